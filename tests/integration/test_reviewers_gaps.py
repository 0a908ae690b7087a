"""Reviewers' gaps (api.md v1.2): ``GET /v1/approvals/{id}`` and ``GET /v1/me``."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.integration.conftest import TenantFixture
from tests.integration.hitl_helpers import pending, suspended_run, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")


def test_one_approval_reads_as_the_lists_show_it_under_any_spelling_of_its_id(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("hi", call_id="w")]}])
    [listed] = pending(client, tenant.owner, run_id)
    for spelling in (listed["id"], listed["id"].upper()):
        response = client.get(f"/v1/approvals/{spelling}", headers=tenant.owner.headers)
        assert response.status_code == 200, response.json
        assert response.json == listed
    assert listed["description"] == "Writes to the agent's persistent memories and skills need a reviewer."


def test_one_approval_is_a_404_to_whoever_cannot_see_its_run(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    creator, other_member, admin = tenant.add("member"), tenant.add("member"), tenant.add("admin")
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("hi", call_id="w")]}], by=creator)
    [listed] = pending(client, creator, run_id)
    for person in (creator, admin):
        assert client.get(f"/v1/approvals/{listed['id']}", headers=person.headers).json == listed
    stranger = make_tenant("elsewhere").owner
    for person in (other_member, stranger):
        response = client.get(f"/v1/approvals/{listed['id']}", headers=person.headers)
        assert response.status_code == 404
        assert response.content_type == "application/problem+json"
        assert response.json["type"] == "urn:hango:problem:not-found"


@pytest.mark.parametrize(
    "spelling",
    ["00000000-0000-0000-0000-000000000000", "not-a-uuid", "0" * 32, "{00000000-0000-0000-0000-000000000000}"],
)
def test_an_unknown_or_malformed_approval_id_is_a_404_problem(
    client: FlaskClient, tenant: TenantFixture, spelling: str
) -> None:
    for suffix in ("", "/preview"):
        response = client.get(f"/v1/approvals/{spelling}{suffix}", headers=tenant.owner.headers)
        assert response.status_code == 404, response.get_data(as_text=True)
        assert response.content_type == "application/problem+json"


@pytest.mark.parametrize("role", ["owner", "admin", "member"])
def test_me_says_who_the_token_belongs_to(client: FlaskClient, tenant: TenantFixture, role: str) -> None:
    person = tenant.owner if role == "owner" else tenant.add(role)
    response = client.get("/v1/me", headers=person.headers)
    assert response.status_code == 200, response.json
    assert response.json == {
        "user_id": str(person.user_id),
        "email": person.email,
        "tenant_id": str(tenant.id),
        "role": role,
    }


def test_me_needs_a_token(client: FlaskClient) -> None:
    assert client.get("/v1/me").status_code == 401
    assert client.get("/v1/me", headers={"Authorization": "Bearer hango_nope"}).status_code == 401


def test_both_are_documented_in_the_openapi_document(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").json["paths"]
    assert set(paths["/v1/me"]["get"]["responses"]) >= {"200", "401"}
    assert set(paths["/v1/approvals/{approval_id}"]["get"]["responses"]) >= {"200", "401", "404"}


def test_an_unknown_query_parameter_is_a_400_as_on_every_other_route(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("hi", call_id="w")]}])
    [listed] = pending(client, tenant.owner, run_id)
    for path in ("/v1/me", f"/v1/approvals/{listed['id']}", f"/v1/approvals/{listed['id']}/preview"):
        response = client.get(f"{path}?sate=all", headers=tenant.owner.headers)
        assert response.status_code == 400, path
        assert response.json["errors"] == [{"field": "sate", "message": "Unknown field."}]
