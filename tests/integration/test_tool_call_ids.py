"""A provider repeating a tool-call id across turns: the repeat is renamed, approved and resumed correctly."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from tests.integration.conftest import TenantFixture, create_agent, messages_of, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, decide, finished, pending, tool_results, write_memory
from tests.support.processes import worker, worker_answer
from tests.support.stub_provider import StubProvider, anthropic_message, anthropic_text, anthropic_tool_use
from tests.support.tools import executions


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    with StubProvider() as provider:
        yield provider


@pytest.fixture
def claude_client(settings: Settings, db: Database, stub: StubProvider) -> Iterator[FlaskClient]:
    """The API and a worker of their own queue, whose Anthropic provider is the stub."""
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", anthropic_base_url=stub.anthropic_url, anthropic_api_key="k"
    )
    with worker(own, concurrency=1, beat=False, name="tool-call-ids"):
        # A run left queued while this worker boots would be re-enqueued by the session worker's reconciler onto
        # the session queue, whose worker has no stub provider configured: start runs once this worker answers.
        worker_answer(Runtime.build(own, db=db))
        yield create_app(own, db=db).test_client()


def _tool_use_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [block["id"] for message in messages for block in message["content"] if block["type"] == "tool_use"]


def test_a_repeated_id_that_needs_approval_is_approved_and_runs_once(
    claude_client: FlaskClient, tenant: TenantFixture, stub: StubProvider
) -> None:
    client, key = claude_client, uuid.uuid4().hex
    # The provider answers every turn with the same id; the second call waits for a human.
    stub.reply(anthropic_message(anthropic_tool_use("toolu_1", "count", {"key": key})))
    stub.reply(
        anthropic_message(anthropic_tool_use("toolu_1", "write_file", {"file_path": MEMORY, "content": "remember"}))
    )
    stub.reply(anthropic_message(anthropic_tool_use("toolu_1", "read_file", {"file_path": MEMORY})))
    stub.reply(anthropic_message(anthropic_text("Done.")))
    body = {"name": f"claude-{key[:8]}", "model": {"provider": "anthropic", "name": "claude-stub"}}
    body["tools"] = ["count", "read_file", "write_file"]
    agent = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert agent.status_code == 201, agent.json
    run_id = start_run(client, tenant.owner, agent.json["id"])
    suspended = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert suspended["state"] == "awaiting_approval", suspended["error"]

    [approval] = pending(client, tenant.owner, run_id)
    assert (approval["tool_call_id"], approval["tool_name"]) == ("toolu_1_2", "write_file")
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "toolu_1_2", "decision": "approve"})
    assert response.status_code == 200, response.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"

    ids = _tool_use_ids(messages_of(client, tenant.owner, run_id))
    assert ids == ["toolu_1", "toolu_1_2", "toolu_1_3"]
    results = tool_results(client, tenant.owner, run_id)
    assert set(results) == set(ids)
    assert executions(key) == 1
    assert not results["toolu_1_2"]["is_error"]
    assert results["toolu_1_2"]["content"] != "tool call interrupted"
    assert "remember" in results["toolu_1_3"]["content"]
    # The provider is sent the renamed ids, each call followed by its own result.
    last = stub.bodies[-1]["messages"]
    sent = [block for message in last for block in message["content"] if isinstance(block, dict)]
    assert [block["id"] for block in sent if block["type"] == "tool_use"] == ids
    assert [block["tool_use_id"] for block in sent if block["type"] == "tool_result"] == ids


@pytest.mark.usefixtures("worker_process")
def test_two_children_repeating_one_id_both_wait_and_resume(client: FlaskClient, tenant: TenantFixture) -> None:
    # Each child's script names its memory write "w": unique inside each loop, repeated inside the run.
    child = {
        "name": "scribe",
        "description": "writes",
        "system_prompt": "You write.",
        "tools": ["write_file"],
        "model": {"provider": "scripted", "script": [{"tool_calls": [write_memory(call_id="w")]}, {"text": "ok"}]},
    }
    delegate = {"name": "task", "args": {"subagent_type": "scribe", "description": "go"}}
    script = [{"tool_calls": [{**delegate, "id": "t1"}, {**delegate, "id": "t2"}]}, {"text": "both done"}]
    agent_id = create_agent(client, tenant.owner, script, tools=["task"], subagents=[child])
    run_id = start_run(client, tenant.owner, agent_id)
    suspended = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert suspended["state"] == "awaiting_approval", suspended["error"]

    approvals = pending(client, tenant.owner, run_id)
    assert sorted(a["tool_call_id"] for a in approvals) == ["w", "w_2"]
    assert len({a["subagent_call_id"] for a in approvals}) == 2
    decisions = [{"tool_call_id": a["tool_call_id"], "decision": "approve"} for a in approvals]
    assert decide(client, tenant.owner, run_id, *decisions).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    assert sorted(_tool_use_ids(messages_of(client, tenant.owner, run_id))) == ["t1", "t2", "w", "w_2"]
