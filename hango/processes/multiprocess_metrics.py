"""prometheus_client's multiprocess mode, for the servers that fork: gunicorn's API workers and Celery's pool.

A counter kept in one process's memory is a lie once several processes serve: each scrape reaches one of them
and reads its share (17, then 8, then 17). In multiprocess mode every process writes its values to its own files
in one folder, and a scrape adds up every file it finds there, whichever process answers it. The files of a
process that exited stay, so its requests still count and a total never goes backwards.

The folder is private to one server: the parent creates it before forking, every child inherits
``PROMETHEUS_MULTIPROC_DIR``, and it is removed when the server stops.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import multiprocess as prometheus_multiprocess

ENVIRONMENT = "PROMETHEUS_MULTIPROC_DIR"


@contextmanager
def shared_folder(prefix: str) -> Iterator[str]:
    """A fresh folder that this process and every process it forks from now on write their metric values to.

    Set before the fork, so gunicorn's and Celery's children inherit it. Any folder named in the inherited
    environment is replaced: two servers sharing one folder would add up each other's requests.
    """
    previous = os.environ.get(ENVIRONMENT)
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        os.environ[ENVIRONMENT] = folder
        _choose_value_class()
        try:
            yield folder
        finally:
            if previous is None:
                os.environ.pop(ENVIRONMENT, None)
            else:
                os.environ[ENVIRONMENT] = previous
            _choose_value_class()


def _choose_value_class() -> None:
    # prometheus_client picks where metric values live (memory or the folder's files) when it is first imported.
    # A process that imported it before the folder existed (the Celery worker imports the middleware, and with it
    # the metrics, at start) must pick again, before it creates its first metric.
    if "prometheus_client.values" in sys.modules:
        from prometheus_client import values

        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]


def current_folder() -> str | None:
    """The folder this process shares its metric values through; ``None`` when it counts alone in memory."""
    return os.environ.get(ENVIRONMENT) or None


class _SharedValues(prometheus_multiprocess.MultiProcessCollector):
    """prometheus_client's collector of the shared files, skipping a file a process has created but not yet
    written its header to (the library would fail the whole scrape on it; its values arrive at the next one)."""

    def collect(self) -> Any:
        files = [path for path in glob.glob(os.path.join(self._path, "*.db")) if os.path.getsize(path) >= 8]
        return self.merge(files, accumulate=True)  # type: ignore[no-untyped-call]


def add_shared_values(registry: CollectorRegistry, folder: str) -> None:
    """Make ``registry`` report the values every process wrote to ``folder`` (read again at every scrape)."""
    _SharedValues(registry, path=folder)  # type: ignore[no-untyped-call]


def forget_process(pid: int, folder: str) -> None:
    """Drop the live gauges of a child that exited; its counters and histograms keep counting."""
    prometheus_multiprocess.mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]
