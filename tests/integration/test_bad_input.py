"""Bad input at every endpoint answers a problem+json 4xx, never a 500, and changes nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.db import Database
from hango.models import ApiToken, Membership, User
from tests.integration.conftest import TenantFixture

BAD_BODIES: list[tuple[str, str]] = [
    ("application/json", "{"),
    ("application/json", "[1, 2]"),
    ("application/json", '{"email": null, "role": null}'),
    ("application/json", '{"email": ["a"], "role": {"x": 1}}'),
    ("application/json", '{"email": "a@b.io", "role": "member", "extra": true}'),
    ("application/json", '{"email": "' + "a" * 400 + '@b.io", "role": "member"}'),
    ("application/json", '{"limit": 1e309}'),
    ("application/json", '"\\ud800"'),
    ("text/plain", "hello"),
    ("application/x-www-form-urlencoded", "email=a%40b.io&role=member"),
]
BAD_QUERIES = ["limit=-1", "limit=1000", "limit=", "cursor=", "cursor=eyJ4IjoxfQ", "unknown=1", "limit=1.5"]
BAD_IDS = ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00", "..", "1" * 300]


def _v1_routes(app: Flask) -> list[tuple[str, str]]:
    routes = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            routes.append((method, rule.rule))
    return routes


def _fill(rule: str, value: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?[a-z_]+>", value, rule)


def _counts(db: Database) -> tuple[int, ...]:
    with db.transaction() as session:
        return tuple(
            session.scalar(select(func.count()).select_from(model)) or 0 for model in (User, Membership, ApiToken)
        )


def _assert_client_error(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.data[:300])
    assert response.mimetype == "application/problem+json"


def test_every_v1_route_answers_bad_input_with_a_client_error(
    app: Flask, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    routes = _v1_routes(app)
    assert len(routes) >= 5
    before = _counts(db)
    for method, rule in routes:
        for ident in BAD_IDS if "<" in rule else []:
            _assert_client_error(client.open(_fill(rule, ident), method=method, headers=tenant.owner.headers))
        path = _fill(rule, str(tenant.owner.user_id))
        if method in ("POST", "PUT", "PATCH"):
            for content_type, body in BAD_BODIES:
                response = client.open(
                    path, method=method, data=body, content_type=content_type, headers=tenant.owner.headers
                )
                if response.status_code < 400:  # a route without a body ignores it; that is fine
                    continue
                _assert_client_error(response)
        if method == "GET":
            for query in BAD_QUERIES:
                _assert_client_error(client.open(f"{path}?{query}", method=method, headers=tenant.owner.headers))
    assert _counts(db)[:2] == before[:2], "a refused request created a user or membership"


@pytest.mark.parametrize("header", ["Bearer " + "x" * 10000, "Bearer \u00e9\u00e9", "Bearer a b c"])
def test_hostile_authorization_headers_are_401(client: FlaskClient, header: str) -> None:
    response = client.get("/v1/users", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"
