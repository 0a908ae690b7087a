"""``python -m hango.processes.gevent_server OPTIONS``: gunicorn's arbiter, with gevent patching the standard library
before
anything else imports it (what :func:`hango.processes.server.serve` execs; ``OPTIONS`` is gunicorn's settings as JSON).

The environment is the ``hango api`` command's: the log level and every other setting come from it again.
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from hango.kernel.config import Settings  # noqa: E402
from hango.kernel.logs import configure_logging  # noqa: E402
from hango.processes.server import run  # noqa: E402

if __name__ == "__main__":
    configure_logging(Settings.from_env(os.environ).log_level)
    run(json.loads(sys.argv[1]))
