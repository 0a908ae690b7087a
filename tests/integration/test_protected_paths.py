"""The default rules cover every spelling of the agent's storage, at the top level and inside subagents."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, finished, pending, suspended_run, tool_results

pytestmark = pytest.mark.usefixtures("worker_process")

ALIASES = ["/memories", "/memories/.", "/memories/x/..", "/skills", "/skills/./", "//memories//", "/skills/a/../b"]


@pytest.mark.parametrize("path", ALIASES)
def test_every_spelling_of_agent_storage_waits_for_a_human(
    client: FlaskClient, tenant: TenantFixture, path: str
) -> None:
    script = [{"tool_calls": [{"id": "w", "name": "write_file", "args": {"file_path": path, "content": "x"}}]}]
    run_id = suspended_run(client, tenant, script)
    [approval] = pending(client, tenant.owner, run_id)
    assert (approval["tool_call_id"], approval["arguments"]["file_path"]) == ("w", path)


@pytest.mark.parametrize("path", ["/memoriesx/a.md", "/notes/memories/a.md", "/skill"])
def test_paths_beside_agent_storage_run_freely(client: FlaskClient, tenant: TenantFixture, path: str) -> None:
    script = [{"tool_calls": [{"id": "w", "name": "write_file", "args": {"file_path": path, "content": "x"}}]}]
    agent_id = create_agent(client, tenant.owner, script)
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed", "awaiting_approval"})["state"] == (
        "succeeded"
    )


def _child(interrupt_on: Any) -> dict[str, Any]:
    write = {"id": "cw", "name": "write_file", "args": {"file_path": "/memories", "content": "x"}}
    return {
        "name": "scribe",
        "description": "writes",
        "system_prompt": "You write.",
        "tools": ["write_file"],
        "model": {"provider": "scripted", "script": [{"tool_calls": [write]}]},
        "interrupt_on": interrupt_on,
    }


def _delegate() -> list[dict[str, Any]]:
    return [{"tool_calls": [{"id": "t", "name": "task", "args": {"subagent_type": "scribe", "description": "go"}}]}]


def test_a_subagent_with_its_own_rules_keeps_the_defaults_on_aliases(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    own_rules = {"edit_file": {"allowed_decisions": ["approve"]}}
    run_id = suspended_run(client, tenant, _delegate(), tools=["task"], subagents=[_child(own_rules)])
    [approval] = pending(client, tenant.owner, run_id)
    assert (approval["tool_call_id"], approval["subagent_call_id"] is not None) == ("cw", True)


def test_a_subagent_lifting_a_default_is_logged_and_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    agent_id = create_agent(
        client, tenant.owner, _delegate(), tools=["task"], subagents=[_child({"write_file": False})]
    )
    [row] = audit_rows(db, tenant.id, "agent.interrupt_default_overridden")
    assert (row.target_id, row.detail) == (agent_id, {"tool": "write_file", "subagent": "scribe"})
    run_id = start_run(client, tenant.owner, agent_id)
    state = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed", "awaiting_approval"})["state"]
    assert state != "awaiting_approval", "the audited false lifts the default inside the subagent"


def test_replacing_an_agent_audits_a_subagent_override_again(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    agent_id = create_agent(client, tenant.owner, _delegate(), tools=["task"], subagents=[_child(None)])
    assert audit_rows(db, tenant.id, "agent.interrupt_default_overridden") == []
    body = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json
    config = {key: body[key] for key in ("name", "system_prompt", "model", "tools", "interrupt_on", "max_turns")}
    config["subagents"] = [_child({"edit_file": False})]
    response = client.put(f"/v1/agents/{agent_id}", json=config, headers=tenant.owner.headers)
    assert response.status_code == 200, response.json
    [row] = audit_rows(db, tenant.id, "agent.interrupt_default_overridden")
    assert row.detail == {"tool": "edit_file", "subagent": "scribe"}


@pytest.mark.parametrize(
    ("prefix", "listed"),
    [("/memories/x/..", True), ("/memories/.", True), ("//memories", True), ("/skills/", False)],
)
def test_the_files_listing_normalises_its_prefix(
    client: FlaskClient, tenant: TenantFixture, prefix: str, listed: bool
) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    put = client.put(f"/v1/agents/{agent_id}/files/memories/a.md", json={"content": "x"}, headers=tenant.owner.headers)
    assert put.status_code == 200, put.json
    response = client.get(f"/v1/agents/{agent_id}/files", query_string={"prefix": prefix}, headers=tenant.owner.headers)
    assert response.status_code == 200, response.json
    assert [item["path"] for item in response.json["items"]] == (["/memories/a.md"] if listed else [])


@pytest.mark.parametrize("raw", ["memories", "memories/.", "memories/x/..", "skills/"])
def test_the_files_api_serves_no_file_at_a_storage_root(client: FlaskClient, tenant: TenantFixture, raw: str) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    response = client.put(f"/v1/agents/{agent_id}/files/{raw}", json={"content": "x"}, headers=tenant.owner.headers)
    assert response.status_code == 404, response.json


@pytest.mark.parametrize("path", ["/memories/x/..", "/skills/."])
def test_an_approved_write_to_a_storage_root_stores_no_file(
    client: FlaskClient, tenant: TenantFixture, db: Database, path: str
) -> None:
    script = [{"tool_calls": [{"id": "w", "name": "write_file", "args": {"file_path": path, "content": "x"}}]}]
    run_id = suspended_run(client, tenant, script)
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    result = tool_results(client, tenant.owner, run_id)["w"]
    assert result["is_error"], result
    assert "names a directory" in result["content"]
