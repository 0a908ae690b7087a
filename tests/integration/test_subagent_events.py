"""The events of a resumed ``task`` call: one ``tool.started`` and one ``tool.finished`` per call over its whole
life, and one ``subagent.started`` and ``subagent.finished`` per child, however often the batch is re-driven.

Found by replaying the OpenAI Agents SDK's nested-approval test through the API: after a subagent resumed, the
run's log announced the outer ``task`` call twice and finished it once, so a client pairing starts with finishes
got it wrong.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.integration.conftest import TenantFixture, create_agent, messages_of, start_run, wait_for_state
from tests.integration.hitl_helpers import assert_paired, decide, finished, pending, replayed_events, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")
TOOLS = ["read_file", "write_file", "count", "task"]
Events = list[tuple[int, str, dict[str, Any]]]


def _task(subagent: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": "task", "args": {"subagent_type": subagent, "description": "do it"}}


def _subagent(name: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"the {name}",
        "system_prompt": f"You are the {name}.",
        "tools": TOOLS,
        "model": {"provider": "scripted", "script": script},
    }


def _approve_until_done(client: FlaskClient, tenant: TenantFixture, run_id: str, *call_ids: str) -> None:
    """Approve each held call in turn, as the run asks for it, and wait for the run to succeed."""
    for call_id in call_ids:
        run = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
        assert run["state"] == "awaiting_approval", run
        assert [item["tool_call_id"] for item in pending(client, tenant.owner, run_id)] == [call_id]
        response = decide(client, tenant.owner, run_id, {"tool_call_id": call_id, "decision": "approve"})
        assert response.status_code == 200, response.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"


def _every_call(client: FlaskClient, tenant: TenantFixture, run_id: str) -> set[str]:
    blocks = [block for message in messages_of(client, tenant.owner, run_id) for block in message["content"]]
    return {block["id"] for block in blocks if block["type"] == "tool_use"}


def _bracketed(events: Events, call_id: str, subagent_type: str) -> bool:
    """Whether a ``task`` call's start and finish enclose its child's start and finish."""
    [child] = [data["subagent_call_id"] for _, type_, data in events if data.get("subagent_type") == subagent_type]
    kinds = [
        type_
        for _, type_, data in events
        if (type_ in ("tool.started", "tool.finished") and data["tool_call_id"] == call_id)
        or (type_ in ("subagent.started", "subagent.finished") and data["subagent_call_id"] == child)
    ]
    return kinds == ["tool.started", "subagent.started", "subagent.finished", "tool.finished"]


def test_a_child_suspending_twice_beside_a_finished_sibling_gives_every_call_one_start_and_one_finish(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    quick = _subagent("quick", [{"tool_calls": [{"id": "qc", "name": "count", "args": {"key": uuid.uuid4().hex}}]}])
    scribe = _subagent(
        "scribe",
        [{"tool_calls": [write_memory("a", "w1")]}, {"tool_calls": [write_memory("b", "w2")]}, {"text": "saved"}],
    )
    parent = [
        {
            "tool_calls": [
                {"id": "pc", "name": "count", "args": {"key": uuid.uuid4().hex}},
                _task("quick", "t0"),
                _task("scribe", "t1"),
            ]
        },
        {"text": "all done"},
    ]
    agent_id = create_agent(client, tenant.owner, parent, tools=TOOLS, subagents=[quick, scribe])
    run_id = start_run(client, tenant.owner, agent_id)
    _approve_until_done(client, tenant, run_id, "w1", "w2")
    events = replayed_events(client, tenant.owner, run_id)
    assert [type_ for _, type_, _ in events].count("run.resumed") == 2
    started = assert_paired(events, "tool.started", "tool.finished", "tool_call_id")
    assert set(started) == _every_call(client, tenant, run_id) == {"pc", "t0", "t1", "qc", "w1", "w2"}
    assert len(assert_paired(events, "subagent.started", "subagent.finished", "subagent_call_id")) == 2
    assert _bracketed(events, "t0", "quick")
    assert _bracketed(events, "t1", "scribe")


def test_nested_children_give_every_call_one_start_and_one_finish(client: FlaskClient, tenant: TenantFixture) -> None:
    inner = _subagent("inner", [{"tool_calls": [write_memory("deep", "w")]}, {"text": "inner done"}])
    outer = _subagent("outer", [{"tool_calls": [_task("inner", "ti")]}, {"text": "outer done"}])
    agent_id = create_agent(
        client,
        tenant.owner,
        [{"tool_calls": [_task("outer", "to")]}, {"text": "top done"}],
        tools=TOOLS,
        subagents=[inner, outer],
    )
    run_id = start_run(client, tenant.owner, agent_id)
    _approve_until_done(client, tenant, run_id, "w")
    events = replayed_events(client, tenant.owner, run_id)
    started = assert_paired(events, "tool.started", "tool.finished", "tool_call_id")
    assert set(started) == _every_call(client, tenant, run_id) == {"to", "ti", "w"}
    assert len(assert_paired(events, "subagent.started", "subagent.finished", "subagent_call_id")) == 2
    assert _bracketed(events, "to", "outer")
    assert _bracketed(events, "ti", "inner")
