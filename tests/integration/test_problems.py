"""Every error status answers an RFC 9457 problem document with a field-level ``errors`` list for bad input."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, bearer


def _assert_problem(response, status: int, kind: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert response.status_code == status, response.data
    assert response.mimetype == "application/problem+json"
    body = response.json
    assert body["type"] == f"urn:hango:problem:{kind}"
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    assert b"Traceback" not in response.data
    assert b"<html" not in response.data.lower()
    return body


def _fields(body: dict) -> list[str]:  # type: ignore[type-arg]
    return [error["field"] for error in body["errors"]]


def test_malformed_json_is_a_400_naming_the_body(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.post("/v1/users", data="{not json", content_type="application/json", headers=tenant.owner.headers)
    assert _fields(_assert_problem(response, 400, "validation")) == ["body"]


def test_unknown_fields_and_wrong_types_are_named(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.post(
        "/v1/users", json={"email": 42, "role": "king", "nickname": "x"}, headers=tenant.owner.headers
    )
    body = _assert_problem(response, 400, "validation")
    assert sorted(_fields(body)) == ["email", "nickname", "role"]


def test_missing_required_fields_are_named(tenant: TenantFixture, client: FlaskClient) -> None:
    body = _assert_problem(client.post("/v1/users", json={}, headers=tenant.owner.headers), 400, "validation")
    assert sorted(_fields(body)) == ["email", "role"]


@pytest.mark.parametrize("payload", ["[]", "null", '"text"', "3"])
def test_a_body_that_is_not_an_object_is_a_400(tenant: TenantFixture, client: FlaskClient, payload: str) -> None:
    response = client.post("/v1/users", data=payload, content_type="application/json", headers=tenant.owner.headers)
    _assert_problem(response, 400, "validation")


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=201", "limit"), ("limit=0", "limit"), ("limit=ten", "limit"), ("cursor=%%%", "cursor"), ("x=1", "x")],
)
def test_bad_list_arguments_are_a_400(tenant: TenantFixture, client: FlaskClient, query: str, field: str) -> None:
    response = client.get(f"/v1/users?{query}", headers=tenant.owner.headers)
    assert _fields(_assert_problem(response, 400, "validation")) == [field]


def test_lists_over_their_length_are_a_400_naming_them(tenant: TenantFixture, client: FlaskClient) -> None:
    agent = {"name": "long", "model": {"provider": "scripted", "script": []}}
    agent_id = client.post("/v1/agents", json=agent, headers=tenant.owner.headers).json["id"]
    messages = [{"role": "user", "content": "hi"}] * 1001
    response = client.post("/v1/runs", json={"agent_id": agent_id, "messages": messages}, headers=tenant.owner.headers)
    assert _fields(_assert_problem(response, 400, "validation")) == ["messages"]
    run = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=tenant.owner.headers).json
    decisions = [{"tool_call_id": f"call-{index}", "decision": "approve"} for index in range(1001)]
    response = client.post(
        f"/v1/runs/{run['id']}/approvals", json={"decisions": decisions}, headers=tenant.owner.headers
    )
    assert _fields(_assert_problem(response, 400, "validation")) == ["decisions"]


def test_an_empty_cursor_asks_for_the_first_page(tenant: TenantFixture, client: FlaskClient) -> None:
    tenant.add("member")
    first = client.get("/v1/users?limit=1", headers=tenant.owner.headers)
    empty = client.get("/v1/users?limit=1&cursor=", headers=tenant.owner.headers)
    assert empty.status_code == 200, empty.json
    assert empty.json == first.json
    assert empty.json["next_cursor"]


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer nope", "Basic dXNlcjpwYXNz", "hango_abc"])
def test_missing_or_bad_credentials_are_a_401(client: FlaskClient, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    _assert_problem(client.get("/v1/users", headers=headers), 401, "unauthorized")


def test_an_unknown_route_is_a_404(tenant: TenantFixture, client: FlaskClient) -> None:
    _assert_problem(client.get("/v1/nothing-here", headers=tenant.owner.headers), 404, "not-found")
    _assert_problem(client.get("/nothing-here"), 404, "not-found")


def test_a_malformed_id_in_the_path_is_a_404(tenant: TenantFixture, client: FlaskClient) -> None:
    _assert_problem(client.delete("/v1/tokens/not-a-uuid", headers=tenant.owner.headers), 404, "not-found")


def test_a_wrong_method_is_a_405_with_allow(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.delete("/v1/users", headers=tenant.owner.headers)
    _assert_problem(response, 405, "validation")
    assert "GET" in response.headers["Allow"]


def test_a_body_over_the_limit_is_a_413(tenant: TenantFixture, client: FlaskClient, settings: Settings) -> None:
    big = {"email": "a@b.io", "role": "member", "pad": "x" * (settings.max_body_bytes + 1)}
    _assert_problem(client.post("/v1/users", json=big, headers=tenant.owner.headers), 413, "payload-too-large")


def test_a_body_that_is_not_json_is_a_415(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.post("/v1/users", data="email=a@b.io", content_type="text/plain", headers=tenant.owner.headers)
    _assert_problem(response, 415, "validation")


def test_an_unexpected_failure_is_a_500_without_details(settings: Settings, db: Database) -> None:
    app = create_app(settings, db=db)

    @app.get("/boom")
    def boom() -> str:
        raise RuntimeError("secret internals")

    response = app.test_client().get("/boom")
    body = _assert_problem(response, 500, "internal")
    assert "secret internals" not in response.get_data(as_text=True)
    assert body["title"] == "Internal server error"


def test_problem_for_a_good_token_with_a_bad_body_names_no_secret(tenant: TenantFixture, client: FlaskClient) -> None:
    response = client.post("/v1/users", json={"email": "bad"}, headers=bearer(tenant.owner.token))
    assert tenant.owner.token not in response.get_data(as_text=True)
