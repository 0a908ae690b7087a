"""Per-request context: the app's services, the caller and the trace id."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import redis
from flask import current_app, g, request

from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.errors import Unauthorized
from hango.kernel.telemetry import current_trace_id
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.streams.live import Live

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")


@dataclass(frozen=True)
class Services:
    """What the app factory builds once and every request uses."""

    settings: Settings
    db: Database
    redis: redis.Redis
    runtime: Runtime
    live: Live


def services() -> Services:
    """The current app's services."""
    found: Services = current_app.extensions["hango"]
    return found


def principal() -> Principal:
    """The authenticated caller; only valid inside ``/v1`` routes."""
    found: Principal | None = g.get("principal")
    if found is None:
        raise Unauthorized("authentication is required")
    return found


def trace_id() -> str:
    """The trace id for the request's audit rows: the active span's, the caller's ``traceparent``, or a fresh one.

    Only an authenticated caller's ``traceparent`` is believed: an audit row joins the trace that produced it, and
    a caller without a valid token must not be able to point its refusal at somebody else's trace. A request that
    failed authentication gets a fresh id. The value is computed once per request, after authentication (by the
    views and the audit hook); a call before authentication would get, and keep, a fresh id.
    """
    if "trace_id" not in g:
        g.trace_id = _caller_trace_id() if g.get("principal") is not None else uuid.uuid4().hex
    value: str = g.trace_id
    return value


def _caller_trace_id() -> str:
    match = _TRACEPARENT.match(request.headers.get("traceparent", ""))
    return current_trace_id() or (match.group(1) if match else uuid.uuid4().hex)
