"""Bearer-token authentication for every ``/v1`` route, plus the JSON content-type rule."""

from __future__ import annotations

from flask import Flask, g, request
from werkzeug.exceptions import UnsupportedMediaType

from hango.api.context import services
from hango.kernel.errors import Unauthorized
from hango.services import tenancy

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def bearer_token(missing: str = "send 'Authorization: Bearer <token>'") -> str:
    """The request's bearer token; :class:`Unauthorized` with ``missing`` when there is none."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized(missing)
    return token.strip()


def _authenticate() -> None:
    if not request.path.startswith("/v1/"):
        return
    g.principal = tenancy.authenticate(services().db, bearer_token())
    if request.method in _BODY_METHODS and _has_body() and not request.is_json:
        raise UnsupportedMediaType("request bodies must be sent as application/json")


def _has_body() -> bool:
    return bool(request.content_length) or request.headers.get("Transfer-Encoding", "") == "chunked"


def register(app: Flask) -> None:
    """Authenticate before every request."""
    app.before_request(_authenticate)
