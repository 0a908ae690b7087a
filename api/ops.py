"""Operational endpoints: liveness, readiness and the human-readable API docs."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response
from flask_swagger_ui import get_swaggerui_blueprint
from redis.exceptions import RedisError
from sqlalchemy.exc import SQLAlchemyError

from api.context import services
from api.problems import problem

blp = Blueprint("ops", __name__)


@blp.get("/healthz")
def healthz() -> dict[str, Any]:
    """The process is alive."""
    return {"status": "ok"}


@blp.get("/readyz")
def readyz() -> Response | dict[str, Any]:
    """The database and Redis both answer."""
    checks = {"database": _check_database(), "redis": _check_redis()}
    if all(result == "ok" for result in checks.values()):
        return {"status": "ready", "checks": checks}
    failing = ", ".join(name for name, result in checks.items() if result != "ok")
    return problem(503, "Service unavailable", f"not ready: {failing} unreachable", kind="internal", checks=checks)


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


def register(app: Flask) -> None:
    """Mount the ops routes and Swagger UI (its assets ship inside a Python package: no CDN)."""
    app.register_blueprint(blp)
    app.register_blueprint(
        get_swaggerui_blueprint("/docs", "/openapi.json", config={"app_name": "hango API"}, blueprint_name="docs")
    )
