"""When PostgreSQL or Redis cannot be reached: a 503 problem with ``Retry-After``, never a 500, and a read whose
pooled connection turned out dead is tried once more on a fresh one.

A connection can die while it sits in the pool (a failover, a restarted pooler, an idle-connection reaper, every
session dropped by an operator). The first statement on it fails and SQLAlchemy discards the whole pool; the
request that met it is the only one to see the failure. For ``GET`` and ``HEAD``, which change nothing, that
request is dispatched again (:class:`RetryReads`), so the client never sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response, request
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from hango.api.context import services
from hango.api.problems import domain_problem, internal_problem
from hango.kernel.errors import Unavailable
from hango.platform.db import is_transient

log = logging.getLogger(__name__)
# Set by the error handler on a read that met a dead pooled connection; :class:`RetryReads` then dispatches it again.
_RETRY = "hango.retry_read"
_RETRIED = "hango.read_retried"
_READS = ("GET", "HEAD")
_REDIS_OUTAGES = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)


def unavailable(detail: str, checks: dict[str, str] | None = None) -> Response:
    """The 503 problem of a dependency that cannot be reached now, with ``Retry-After``."""
    return domain_problem(Unavailable(detail, retry_after(), checks))


def retry_after() -> int:
    """``HANGO_UNAVAILABLE_RETRY_AFTER`` in whole seconds (at least one)."""
    return max(1, round(services().settings.unavailable_retry_after.total_seconds()))


def _database_error(error: SQLAlchemyError) -> Response:
    if not is_transient(error):
        return internal_problem(error)
    lost = isinstance(error, DBAPIError) and error.connection_invalidated
    if lost and request.method in _READS and not request.environ.get(_RETRIED):
        request.environ[_RETRY] = True
    log.warning("the database is unavailable: %s", error.__class__.__name__)
    return unavailable("the database cannot be reached right now; try again later")


def _redis_error(error: RedisError) -> Response:
    if not isinstance(error, _REDIS_OUTAGES):
        return internal_problem(error)
    log.warning("Redis is unavailable: %s", error.__class__.__name__)
    return unavailable("the broker (Redis) cannot be reached right now; try again later")


StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class RetryReads:
    """WSGI middleware: a ``GET`` or ``HEAD`` the error handler marked (its pooled connection was dead) is
    dispatched once more, and only the second answer is sent."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in _READS:
            return self._app(environ, start_response)
        held: list[tuple[Any, ...]] = []

        def hold(*args: Any) -> Callable[[bytes], None]:
            held.append(args)
            return _unused_write

        body = self._app(environ, hold)
        if environ.pop(_RETRY, False):
            close = getattr(body, "close", None)
            if close is not None:
                close()
            environ[_RETRIED] = True
            return self._app(environ, start_response)
        start_response(*held[-1])
        return body


def _unused_write(data: bytes) -> None:
    raise RuntimeError("hango's responses are iterables; WSGI write() is not used")


def register(app: Flask) -> None:
    """Answer outages with 503s and retry reads that met a dead connection."""
    app.register_error_handler(SQLAlchemyError, _database_error)
    app.register_error_handler(RedisError, _redis_error)
    app.wsgi_app = RetryReads(app.wsgi_app)  # type: ignore[method-assign]
