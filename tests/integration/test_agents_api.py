"""The agents API: who may write, what is validated, and the shape of an agent."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.integration.conftest import TenantFixture


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "notes-bot",
        "system_prompt": "You keep notes.",
        "model": {"provider": "scripted", "script": [{"text": "Done."}]},
        "tools": ["ls", "read_file", "write_file"],
        "max_turns": 10,
    }
    body.update(changes)
    return body


def test_an_owner_creates_and_everyone_reads(client: FlaskClient, tenant: TenantFixture) -> None:
    created = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers)
    assert created.status_code == 201
    agent = created.json
    assert agent["name"] == "notes-bot"
    assert agent["tools"] == ["ls", "read_file", "write_file"]
    assert agent["subagents"] == []
    member = tenant.add("member")
    assert client.get(f"/v1/agents/{agent['id']}", headers=member.headers).json == agent
    assert agent["id"] in {a["id"] for a in client.get("/v1/agents", headers=member.headers).json["items"]}


def test_members_cannot_write_agents_and_admins_can(client: FlaskClient, tenant: TenantFixture) -> None:
    member, admin = tenant.add("member"), tenant.add("admin")
    assert client.post("/v1/agents", json=_body(), headers=member.headers).status_code == 403
    created = client.post("/v1/agents", json=_body(), headers=admin.headers)
    assert created.status_code == 201
    agent_id = created.json["id"]
    assert client.put(f"/v1/agents/{agent_id}", json=_body(), headers=member.headers).status_code == 403


def test_put_replaces_the_whole_configuration(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).json["id"]
    replaced = client.put(
        f"/v1/agents/{agent_id}",
        json={"name": "renamed", "model": {"provider": "scripted"}},
        headers=tenant.owner.headers,
    )
    assert replaced.status_code == 200
    assert (
        replaced.json["name"],
        replaced.json["tools"],
        replaced.json["system_prompt"],
        replaced.json["max_turns"],
    ) == ("renamed", [], "", 50)


def test_a_duplicate_name_is_a_conflict(client: FlaskClient, tenant: TenantFixture) -> None:
    assert client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).status_code == 201
    assert client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).status_code == 409


def test_another_tenants_agent_is_not_found(client: FlaskClient, make_tenant: Any) -> None:
    mine, theirs = make_tenant("mine"), make_tenant("theirs")
    agent_id = client.post("/v1/agents", json=_body(), headers=theirs.owner.headers).json["id"]
    assert client.get(f"/v1/agents/{agent_id}", headers=mine.owner.headers).status_code == 404
    assert client.put(f"/v1/agents/{agent_id}", json=_body(), headers=mine.owner.headers).status_code == 404


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": {"provider": "gpt-magic"}}, "model.provider"),
        ({"model": {"provider": "anthropic"}}, "model.name"),
        ({"model": {"provider": "openai", "name": "gpt-x", "script": []}}, "model.script"),
        ({"model": {"provider": "scripted", "name": "x"}}, "model.name"),
        ({"tools": ["ls", "teleport"]}, "tools[1]"),
        ({"max_turns": 0}, "max_turns"),
        ({"model": {"provider": "scripted", "script": [{"text": 3}]}}, "model.script[0].text"),
        (
            {"model": {"provider": "scripted", "script": [{"tool_calls": [{"args": {}}]}]}},
            "model.script[0].tool_calls[0].name",
        ),
        (
            {
                "model": {
                    "provider": "scripted",
                    "script": [
                        {"tool_calls": [{"id": "a", "name": "ls"}]},
                        {"tool_calls": [{"id": "a", "name": "ls"}]},
                    ],
                }
            },
            "model.script[1].tool_calls[0].id",
        ),
        (
            {"subagents": [{"name": "r", "description": "d", "model": {"provider": "scripted"}, "tools": ["nope"]}]},
            "subagents[0].tools[0]",
        ),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_configuration_is_a_400_naming_the_field(
    client: FlaskClient, tenant: TenantFixture, changes: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/agents", json=_body(**changes), headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert field in [error["field"] for error in response.json["errors"]]
    assert client.get("/v1/agents", headers=tenant.owner.headers).json["items"] == []


def test_creating_an_agent_is_audited(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).json["id"]
    rows = client.get("/v1/audit-events", query_string={"action": "agent.create"}, headers=tenant.owner.headers).json
    assert [(row["target_id"], row["outcome"]) for row in rows["items"]] == [(agent_id, "success")]
