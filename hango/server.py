"""gunicorn embedded as a library. The app is named by its import string, so the domain never imports the edge."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.util import import_app

from hango import multiprocess_metrics

WSGI_APP = "hango.api.wsgi:app_from_env()"


class _Server(BaseApplication):  # type: ignore[misc]
    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        super().__init__()

    def load_config(self) -> None:
        defaults = {
            "worker_class": "gthread",
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


def serve(options: dict[str, Any]) -> None:
    """Run gunicorn in the foreground until SIGTERM or SIGINT."""
    with multiprocess_metrics.shared_folder("hango-api-metrics-") as folder:
        _Server({**options, **_metrics_hooks(folder)}).run()


def _metrics_hooks(folder: str) -> dict[str, Any]:
    """The gunicorn hooks of request metrics shared by every worker process through ``folder``.

    The folder is made before gunicorn forks, so it works with any worker class (threads, gevent): each worker is
    a process of its own and writes its own files. When a worker exits, its live gauges go; its counts stay.
    """

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess_metrics.forget_process(worker.pid, folder)

    return {"child_exit": child_exit}
