"""Operational endpoints: liveness, readiness, the metrics guard and the human-readable API docs."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import wraps
from typing import Any

from flask import Blueprint, Flask, Response
from flask_swagger_ui import get_swaggerui_blueprint
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from hango.api.auth import bearer_token
from hango.api.context import services
from hango.api.outages import unavailable
from hango.kernel.errors import Unauthorized

blp = Blueprint("ops", __name__)


@blp.get("/healthz")
def healthz() -> dict[str, Any]:
    """The process is alive."""
    return {"status": "ok"}


@blp.get("/readyz")
def readyz() -> Response | dict[str, Any]:
    """The database and Redis (the broker) both answer; a 503 names the one that does not."""
    checks = {"database": _check_database(), "redis": _check_redis()}
    if all(result == "ok" for result in checks.values()):
        return {"status": "ready", "checks": checks}
    failing = ", ".join(name for name, result in checks.items() if result != "ok")
    return unavailable(f"not ready: {failing} unreachable", checks)


def _check_database() -> str:
    try:
        services().db.ping()
    except SQLAlchemyError:
        return "unreachable"
    return "ok"


def _check_redis() -> str:
    try:
        services().redis.ping()
    except RedisError:
        return "unreachable"
    return "ok"


def metrics_guard(token: str | None) -> Callable[[Callable[..., Any]], Callable[..., Any]] | None:
    """The decorator putting ``/metrics`` behind ``Authorization: Bearer <HANGO_METRICS_TOKEN>``; ``None`` if unset.

    The token is compared in constant time, so timing does not reveal how much of a guess was right.
    """
    if not token:
        return None
    expected = token.encode()
    refusal = "/metrics needs 'Authorization: Bearer <HANGO_METRICS_TOKEN>'"

    def guard(view: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not hmac.compare_digest(bearer_token(refusal).encode(), expected):
                raise Unauthorized(refusal)
            return view(*args, **kwargs)

        return guarded

    return guard


def register(app: Flask) -> None:
    """Mount the ops routes and Swagger UI (its assets ship inside a Python package: no CDN)."""
    app.register_blueprint(blp)
    app.register_blueprint(
        get_swaggerui_blueprint("/docs", "/openapi.json", config={"app_name": "hango API"}, blueprint_name="docs")
    )
