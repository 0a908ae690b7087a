"""Every response under ``/inbox`` carries the page's security headers, its errors included: a 404 or a 405 is
answered by the app's error handlers, outside the inbox blueprint, where a blueprint hook never runs."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from hango.api import create_app
from hango.api.inbox import SECURITY_HEADERS
from hango.kernel.config import Settings
from hango.platform.db import Database


def _assert_secured(response: TestResponse, status: int) -> None:
    assert response.status_code == status
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, name


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/inbox", 200),
        ("GET", "/inbox/", 200),
        ("GET", "/inbox/assets/inbox.js", 200),
        ("GET", "/inbox/nope", 404),
        ("GET", "/inbox/assets/evil.js", 404),
        ("GET", "/inbox/approvals/not-a-uuid", 404),
        ("GET", "/inbox/runs/00000000-0000-0000-0000-000000000000/more", 404),
        ("GET", "/inbox/threads/00000000-0000-0000-0000-000000000000", 200),
        ("POST", "/inbox", 405),
        ("DELETE", "/inbox/assets/inbox.js", 405),
        ("PUT", "/inbox/approvals/00000000-0000-0000-0000-000000000000", 405),
        ("OPTIONS", "/inbox", 200),
    ],
)
def test_every_inbox_response_carries_the_security_headers(
    client: FlaskClient, method: str, path: str, status: int
) -> None:
    _assert_secured(client.open(path, method=method), status)


def test_a_server_error_under_inbox_carries_them_too(settings: Settings, db: Database) -> None:
    app: Flask = create_app(settings, db=db)

    def broken() -> str:
        raise RuntimeError("a bug under /inbox")

    app.add_url_rule("/inbox/broken", "broken", broken)
    _assert_secured(app.test_client().get("/inbox/broken"), 500)


def test_other_paths_keep_their_own_headers(client: FlaskClient) -> None:
    for path in ("/healthz", "/inboxes", "/v1/nope"):
        assert "X-Frame-Options" not in client.get(path).headers
