"""gunicorn embedded as a library. The app is named by its import string, so the domain never imports the edge.

The workers are gevent workers: gunicorn monkey-patches each one after the fork, before it loads the app, so
sockets, locks and sleeps yield to other greenlets; :func:`hango.green.cooperative_postgres` makes psycopg2 yield
too. An open event stream then costs a greenlet and a socket, not a thread.
"""

from __future__ import annotations

import logging
import resource
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.util import import_app

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
    """Run gunicorn in the foreground until SIGTERM or SIGINT."""
    limit = raise_open_files_limit()
    connections = int(options.get("worker_connections", 0))
    if connections and connections > limit:
        log.warning("%d connections per worker exceed the open-files limit of %d", connections, limit)
    _Server(options).run()
