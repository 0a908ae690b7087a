"""Structured logging: one JSON object per line on stderr."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

from hango.kernel.telemetry import current_trace_id

_STANDARD = set(vars(logging.makeLogRecord({})))
_RUN_ID: ContextVar[str | None] = ContextVar("hango_run_id", default=None)


@contextmanager
def run_logging(run_id: uuid.UUID) -> Iterator[None]:
    """Give every line logged in this context (the loop, its middleware, its tools) the field ``run_id``.

    A context variable rather than ``extra`` at each call: a line logged deep in a middleware or a tool cannot be
    forgotten, so filtering logs by run id (Loki: ``| run_id="..."``) tells a run's whole story. Threads started
    inside the context do not inherit it; they pass ``run_id`` in ``extra`` themselves.
    """
    token = _RUN_ID.set(str(run_id))
    try:
        yield
    finally:
        _RUN_ID.reset(token)


class JsonFormatter(logging.Formatter):
    """Render a record, its ``extra`` fields, the active run id and the active trace id as JSON."""

    def format(self, record: logging.LogRecord) -> str:
        """Format one record as a single JSON line."""
        payload: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        payload.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        run_id = _RUN_ID.get()
        if run_id is not None:
            payload.setdefault("run_id", run_id)
        trace_id = current_trace_id()
        if trace_id is not None:
            payload.setdefault("trace_id", trace_id)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(level: str) -> None:
    """Send every log line to stderr as JSON at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
