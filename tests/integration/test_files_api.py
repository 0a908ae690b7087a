"""An agent's /memories/ and /skills/ through the API."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.integration.conftest import TenantFixture, create_agent


@pytest.fixture
def agent_id(client: FlaskClient, tenant: TenantFixture) -> str:
    return create_agent(client, tenant.owner, [])


def test_owners_write_everyone_reads_and_lists(client: FlaskClient, tenant: TenantFixture, agent_id: str) -> None:
    base = f"/v1/agents/{agent_id}/files"
    written = client.put(
        f"{base}/memories/AGENTS.md", json={"content": "Prefer t\u00e9a."}, headers=tenant.owner.headers
    )
    assert written.status_code == 200
    assert written.json["path"] == "/memories/AGENTS.md"
    assert client.put(f"{base}/skills/sql.md", json={"content": "x"}, headers=tenant.owner.headers).status_code == 200
    member = tenant.add("member")
    read = client.get(f"{base}/memories/AGENTS.md", headers=member.headers)
    assert (read.status_code, read.json["content"]) == (200, "Prefer t\u00e9a.")
    listed = client.get(base, headers=member.headers).json["items"]
    assert [(item["path"], item["size"]) for item in listed] == [("/memories/AGENTS.md", 12), ("/skills/sql.md", 1)]
    only = client.get(base, query_string={"prefix": "/skills/"}, headers=member.headers).json["items"]
    assert [item["path"] for item in only] == ["/skills/sql.md"]
    assert client.put(f"{base}/memories/AGENTS.md", json={"content": "no"}, headers=member.headers).status_code == 403
    assert client.delete(f"{base}/skills/sql.md", headers=member.headers).status_code == 403
    assert client.delete(f"{base}/skills/sql.md", headers=tenant.owner.headers).status_code == 204
    assert client.get(f"{base}/skills/sql.md", headers=member.headers).status_code == 404


@pytest.mark.parametrize("path", ["notes.txt", "memories", "memories/", "memories/../etc/passwd", "skills/../../x"])
def test_only_memories_and_skills_are_served(
    client: FlaskClient, tenant: TenantFixture, agent_id: str, path: str
) -> None:
    response = client.put(f"/v1/agents/{agent_id}/files/{path}", json={"content": "x"}, headers=tenant.owner.headers)
    assert response.status_code == 404
    assert response.mimetype == "application/problem+json"


def test_another_tenants_agent_files_are_not_found(client: FlaskClient, make_tenant: Any) -> None:
    mine, theirs = make_tenant("mine"), make_tenant("theirs")
    agent_id = create_agent(client, theirs.owner, [])
    client.put(
        f"/v1/agents/{agent_id}/files/memories/AGENTS.md", json={"content": "secret"}, headers=theirs.owner.headers
    )
    assert client.get(f"/v1/agents/{agent_id}/files/memories/AGENTS.md", headers=mine.owner.headers).status_code == 404
    assert client.get(f"/v1/agents/{agent_id}/files", headers=mine.owner.headers).status_code == 404
    put = client.put(
        f"/v1/agents/{agent_id}/files/memories/AGENTS.md", json={"content": "x"}, headers=mine.owner.headers
    )
    assert put.status_code == 404
    assert (
        client.get(f"/v1/agents/{agent_id}/files/memories/AGENTS.md", headers=theirs.owner.headers).json["content"]
        == "secret"
    )


def test_bad_bodies_are_a_400_naming_the_field(client: FlaskClient, tenant: TenantFixture, agent_id: str) -> None:
    url = f"/v1/agents/{agent_id}/files/memories/AGENTS.md"
    for body in ({}, {"content": 3}, {"content": "a\u0000b"}):
        response = client.put(url, json=body, headers=tenant.owner.headers)
        assert response.status_code == 400
        assert response.json["errors"][0]["field"] == "content"
    assert client.get(f"/v1/agents/{agent_id}/files?prefix=memories", headers=tenant.owner.headers).status_code == 400


def test_file_writes_are_audited_without_content(client: FlaskClient, tenant: TenantFixture, agent_id: str) -> None:
    client.put(
        f"/v1/agents/{agent_id}/files/memories/AGENTS.md", json={"content": "top secret"}, headers=tenant.owner.headers
    )
    rows = client.get("/v1/audit-events", query_string={"action": "file.write"}, headers=tenant.owner.headers).json[
        "items"
    ]
    assert [(r["target_kind"], r["target_id"], r["outcome"]) for r in rows] == [
        ("file", f"{agent_id}:/memories/AGENTS.md", "success")
    ]
    assert "top secret" not in str(rows)
