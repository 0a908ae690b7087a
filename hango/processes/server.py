"""gunicorn embedded as a library. The app is named by its import string, so the domain never imports the edge.

The workers are gevent workers: sockets, locks and sleeps yield to other greenlets, and
:func:`hango.processes.green.cooperative_postgres` makes psycopg2 yield too, so an open event stream costs a greenlet
and a
socket, not a thread. gevent must patch the standard library before anything imports it (``ssl`` above all), and
the ``hango`` command has imported half of it by the time it parses its options; so :func:`serve` replaces the
process with a fresh interpreter (:mod:`hango.processes.gevent_server`, same pid) that patches first and then runs the
arbiter.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.util import import_app

from hango.processes import multiprocess_metrics

WSGI_APP = "hango.api.wsgi:app_from_env()"
log = logging.getLogger(__name__)


class _Server(BaseApplication):  # type: ignore[misc]
    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        defaults = {
            "worker_class": "gevent",
            "accesslog": "/dev/stderr",
            "errorlog": "-",
            "graceful_timeout": 10,
            # gunicorn's control socket lives in the user's home and would be shared by every server of the user.
            "control_socket_disable": True,
        }
        for key, value in {**defaults, **self._options}.items():
            if key in self.cfg.settings:  # older gunicorn releases lack some settings (the control socket)
                self.cfg.set(key, value)

    def load(self) -> Any:
        # Each worker builds its own app, engine and pool after the fork.
        return import_app(WSGI_APP)


def raise_open_files_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (a socket per open stream); the new limit.

    The workers inherit it. A limit that cannot be raised is kept, with a warning.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return soft
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        log.warning("could not raise the open-files limit from %d to %d", soft, target)
        return soft
    return target


def serve(options: dict[str, Any]) -> None:
    """Become gunicorn, in the foreground until SIGTERM or SIGINT: this process is replaced (same pid)."""
    limit = raise_open_files_limit()
    connections = int(options.get("worker_connections", 0))
    if connections and connections > limit:
        log.warning("%d connections per worker exceed the open-files limit of %d", connections, limit)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "hango.processes.gevent_server", json.dumps(options)])  # noqa: S606 (our own interpreter, no shell)


def run(options: dict[str, Any]) -> None:
    """Run gunicorn in this process (already patched by :mod:`hango.processes.gevent_server`)."""
    with multiprocess_metrics.shared_folder("hango-api-metrics-") as folder:
        _Server({**options, **_metrics_hooks(folder)}).run()


def _metrics_hooks(folder: str) -> dict[str, Any]:
    """The gunicorn hooks of request metrics shared by every worker process through ``folder``.

    The arbiter makes the folder before it forks, so this works with any worker class (gevent, threads): each
    worker is a process of its own and writes its own files. When a worker exits, its live gauges go; its counts
    stay.
    """

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess_metrics.forget_process(worker.pid, folder)

    return {"child_exit": child_exit}
