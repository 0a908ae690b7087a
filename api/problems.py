"""RFC 9457 problem documents: the one place errors become HTTP responses."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, json
from werkzeug.exceptions import HTTPException

from hango.api.audit import audit_written
from hango.kernel.errors import (
    AlreadyVoted,
    Conflict,
    FieldError,
    Forbidden,
    HangoError,
    InvalidInput,
    NotAwaitingApproval,
    NotFound,
    PartialDecision,
    RetryLater,
    StaleApproval,
    StreamCapacityFull,
    ThreadBusy,
    TooManyStreams,
    Unauthorized,
    Unavailable,
)
from hango.mcp.client import McpUnavailable

PROBLEM = "urn:hango:problem:"
log = logging.getLogger(__name__)

_HTTP_TYPES = {
    400: "validation",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "validation",
    409: "conflict",
    413: "payload-too-large",
    415: "validation",
}
_DOMAIN_STATUS: list[tuple[type[HangoError], int, str]] = [
    (InvalidInput, 400, "Invalid request"),
    (PartialDecision, 409, "Partial decision"),
    (ThreadBusy, 409, "Thread busy"),
    (NotAwaitingApproval, 409, "Run not awaiting approval"),
    (StaleApproval, 409, "Stale approval"),
    (AlreadyVoted, 409, "Already voted"),
    (Unauthorized, 401, "Unauthorized"),
    (Forbidden, 403, "Forbidden"),
    (NotFound, 404, "Not found"),
    (Conflict, 409, "Conflict"),
    (TooManyStreams, 429, "Too many streams"),
    (StreamCapacityFull, 503, "Stream capacity full"),
    (Unavailable, 503, "Service unavailable"),
    (McpUnavailable, 502, "MCP server unavailable"),
]


_KINDS: dict[type[HangoError], str] = {
    PartialDecision: "partial-decision",
    ThreadBusy: "thread-busy",
    StaleApproval: "stale-approval",
    AlreadyVoted: "already-voted",
    NotAwaitingApproval: "not-awaiting-approval",
    TooManyStreams: "too-many-streams",
    StreamCapacityFull: "stream-capacity-full",
    Unavailable: "unavailable",
    McpUnavailable: "mcp-unavailable",
}


def problem(status: int, title: str, detail: str, *, kind: str | None = None, **extra: Any) -> Response:
    """A problem+json response; ``kind`` is the last part of the type URN (derived from the status if omitted)."""
    body = {
        "type": PROBLEM + (kind or _HTTP_TYPES.get(status, "internal")),
        "title": title,
        "status": status,
        "detail": detail,
        **extra,
    }
    return Response(json.dumps(body), status=status, mimetype="application/problem+json")


def field_errors(errors: list[FieldError]) -> list[dict[str, str]]:
    """Render field errors as the ``errors`` member."""
    return [{"field": error.field, "message": error.message} for error in errors]


def domain_problem(error: HangoError) -> Response:
    """The problem document of one of hango's own errors (with ``Retry-After`` for a :class:`RetryLater`)."""
    if error.audited:
        audit_written()
    for cls, status, title in _DOMAIN_STATUS:
        if isinstance(error, cls):
            extra: dict[str, Any] = {}
            if isinstance(error, InvalidInput):
                extra["errors"] = field_errors(error.errors)
            if isinstance(error, PartialDecision):
                extra["remaining"] = error.remaining
            if isinstance(error, ThreadBusy):
                extra["active_run_id"] = str(error.active_run_id)
            if isinstance(error, Unavailable) and error.checks is not None:
                extra["checks"] = error.checks
            if isinstance(error, McpUnavailable):
                extra["server"] = error.server
            response = problem(status, title, str(error), kind=_kind(error), **extra)
            if isinstance(error, RetryLater):
                response.headers["Retry-After"] = str(error.retry_after)
            return response
    return internal_problem(error)


def _kind(error: HangoError) -> str | None:
    """The most specific problem type named for the error's class or one of its bases."""
    return next((_KINDS[cls] for cls in type(error).__mro__ if cls in _KINDS), None)


def _http_problem(error: HTTPException) -> Response:
    status = error.code or 500
    if status >= 500:
        return internal_problem(error)
    response = problem(status, error.name, error.description or error.name)
    if status == 405 and error.get_response().headers.get("Allow"):
        response.headers["Allow"] = error.get_response().headers["Allow"]
    return response


def internal_problem(error: BaseException) -> Response:
    """The 500 of an error nobody expected: logged in full, answered with nothing of it."""
    log.error("unhandled error", exc_info=error)
    return problem(500, "Internal server error", "The server failed to handle the request; it has been logged.")


def register(app: Flask) -> None:
    """Install the handlers so that every error status answers problem+json, never HTML or a stack trace."""
    app.register_error_handler(HangoError, domain_problem)
    app.register_error_handler(HTTPException, _http_problem)
    app.register_error_handler(Exception, internal_problem)
