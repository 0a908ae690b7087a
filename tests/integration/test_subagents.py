"""Subagents end to end: child loops, their durability, interrupt inheritance, and suspension through a child."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, messages_of, start_run, wait_for_state
from tests.integration.hitl_helpers import (
    MEMORY,
    assert_paired,
    decide,
    event_types,
    pending,
    replayed_events,
    tool_results,
    write_memory,
)
from tests.support.tools import executions

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker_process")]
TOOLS = ["read_file", "write_file", "edit_file", "count", "sleep", "slow_count", "task"]


def _task(subagent: str, description: str = "do it", call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": "task", "args": {"subagent_type": subagent, "description": description}}
    if call_id:
        call["id"] = call_id
    return call


def _subagent(name: str, script: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"the {name}",
        "system_prompt": f"You are the {name}.",
        "tools": config.pop("tools", ["read_file", "write_file", "count", "task"]),
        "model": {"provider": "scripted", "script": script},
        **config,
    }


def _run(
    client: FlaskClient,
    tenant: TenantFixture,
    script: list[dict[str, Any]],
    subagents: list[dict[str, Any]],
    **config: Any,
) -> str:
    agent_id = create_agent(client, tenant.owner, script, tools=TOOLS, subagents=subagents, **config)
    return start_run(client, tenant.owner, agent_id)


def _child_ids(client: FlaskClient, tenant: TenantFixture, run_id: str) -> list[str]:
    ids = [m["subagent_call_id"] for m in messages_of(client, tenant.owner, run_id) if m["subagent_call_id"]]
    return list(dict.fromkeys(ids))


def test_a_task_call_runs_the_child_and_returns_its_final_text(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    child = _subagent("researcher", [{"tool_calls": [{"name": "count", "args": {"key": key}}]}, {"text": "found 42"}])
    run_id = _run(
        client, tenant, [{"tool_calls": [_task("researcher", "find it", "t1")]}, {"text": "The answer is 42."}], [child]
    )
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert tool_results(client, tenant.owner, run_id)["t1"] == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": "found 42",
        "is_error": False,
    }
    assert executions(key) == 1
    messages = messages_of(client, tenant.owner, run_id)
    [child_id] = _child_ids(client, tenant, run_id)
    child_messages = [m for m in messages if m["subagent_call_id"] == child_id]
    assert [m["role"] for m in child_messages] == ["user", "assistant", "tool", "assistant"]
    assert child_messages[0]["content"] == [{"type": "text", "text": "find it"}]
    assert [m["seq"] for m in messages] == list(range(1, len(messages) + 1))
    types = event_types(db, run_id)
    assert types.count("subagent.started") == 1
    assert types.count("subagent.finished") == 1


def test_an_unknown_subagent_is_an_error_result(client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = _run(client, tenant, [{"tool_calls": [_task("nobody", call_id="t")]}, {"text": "ok"}], [])
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    result = tool_results(client, tenant.owner, run_id)["t"]
    assert result["is_error"]
    assert "unknown subagent_type 'nobody'" in result["content"]


def test_the_depth_limit_stops_runaway_nesting(client: FlaskClient, tenant: TenantFixture) -> None:
    # general-purpose inherits the parent's script, so every level calls task again.
    run_id = _run(client, tenant, [{"tool_calls": [_task("general-purpose", call_id="deep")]}, {"text": "stop"}], [])
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"}, timeout=60)["state"] == "succeeded"
    messages = messages_of(client, tenant.owner, run_id)
    refused = [
        b for m in messages for b in m["content"] if b.get("type") == "tool_result" and "at most 3 deep" in b["content"]
    ]
    assert len(refused) == 1
    assert len(_child_ids(client, tenant, run_id)) == 3


@pytest.mark.parametrize(
    ("decision", "check"),
    [
        ({"decision": "approve"}, lambda r, mem: not r["is_error"] and "hi" in mem),
        ({"decision": "edit", "args": {"file_path": MEMORY, "content": "edited"}}, lambda r, mem: "edited" in mem),
        (
            {"decision": "reject", "message": "no memories"},
            lambda r, mem: r["is_error"] and "no memories" in r["content"],
        ),
        ({"decision": "respond", "message": "noted"}, lambda r, mem: r == {**r, "content": "noted", "is_error": False}),
    ],
)
def test_a_child_interrupt_suspends_the_parent_and_each_decision_resumes_into_the_child(
    client: FlaskClient, tenant: TenantFixture, db: Database, decision: dict[str, Any], check: Any
) -> None:
    child = _subagent(
        "scribe",
        [
            {"tool_calls": [write_memory("hi", "w")]},
            {"tool_calls": [{"id": "r", "name": "read_file", "args": {"file_path": MEMORY}}]},
            {"text": "saved"},
        ],
    )
    run_id = _run(client, tenant, [{"tool_calls": [_task("scribe", call_id="t")]}, {"text": "done"}], [child])
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )
    [child_id] = _child_ids(client, tenant, run_id)
    [approval] = pending(client, tenant.owner, run_id)
    assert (approval["tool_call_id"], approval["subagent_call_id"]) == ("w", child_id)
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", **decision}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    memory = results["r"]["content"] if not results["r"]["is_error"] else ""
    assert check(results["w"], memory)
    assert results["t"] == {"type": "tool_result", "tool_use_id": "t", "content": "saved", "is_error": False}
    types = event_types(db, run_id)
    assert types.count("subagent.started") == 1, "the child was started twice"


def test_a_subagent_inherits_the_parents_rules_unless_it_declares_its_own(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    key_inherit, key_own = uuid.uuid4().hex, uuid.uuid4().hex
    inheriting = _subagent(
        "inheritor", [{"tool_calls": [{"id": "ci", "name": "count", "args": {"key": key_inherit}}]}, {"text": "a"}]
    )
    overriding = _subagent(
        "overrider",
        [{"tool_calls": [{"id": "co", "name": "count", "args": {"key": key_own}}]}, {"text": "b"}],
        interrupt_on={},
    )
    run_id = _run(
        client,
        tenant,
        [{"tool_calls": [_task("inheritor", call_id="t1"), _task("overrider", call_id="t2")]}, {"text": "ok"}],
        [inheriting, overriding],
        interrupt_on={"count": True},
    )
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )
    assert [a["tool_call_id"] for a in pending(client, tenant.owner, run_id)] == ["ci"]
    assert (executions(key_inherit), executions(key_own)) == (0, 1)


def test_an_own_rule_set_still_keeps_the_default_memory_rules(client: FlaskClient, tenant: TenantFixture) -> None:
    child = _subagent("writer", [{"tool_calls": [write_memory(call_id="w")]}], interrupt_on={"count": True})
    run_id = _run(client, tenant, [{"tool_calls": [_task("writer")]}], [child], interrupt_on={"write_file": False})
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )


def test_two_children_pausing_in_one_batch_and_a_completed_sibling_is_not_rerun(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    sibling_key, parent_key = uuid.uuid4().hex, uuid.uuid4().hex
    quick = _subagent(
        "quick", [{"tool_calls": [{"name": "count", "args": {"key": sibling_key}}]}, {"text": "quick done"}]
    )
    scribe = _subagent("scribe", [{"tool_calls": [write_memory("a", "wa")]}, {"text": "scribe done"}])
    editor = _subagent("editor", [{"tool_calls": [write_memory("b", "wb")]}, {"text": "editor done"}])
    script = [
        {
            "tool_calls": [
                {"id": "pc", "name": "count", "args": {"key": parent_key}},
                _task("quick", call_id="t0"),
                _task("scribe", call_id="t1"),
                _task("editor", call_id="t2"),
            ]
        },
        {"text": "all done"},
    ]
    run_id = _run(client, tenant, script, [quick, scribe, editor])
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )
    approvals = pending(client, tenant.owner, run_id)
    assert sorted(a["tool_call_id"] for a in approvals) == ["wa", "wb"]
    assert len({a["subagent_call_id"] for a in approvals}) == 2
    assert executions(sibling_key) == 1
    assert executions(parent_key) == 0, "a non-delegating call ran while children waited"
    partial = decide(client, tenant.owner, run_id, {"tool_call_id": "wa", "decision": "approve"})
    assert partial.status_code == 409
    both = [{"tool_call_id": "wa", "decision": "approve"}, {"tool_call_id": "wb", "decision": "approve"}]
    assert decide(client, tenant.owner, run_id, *both).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert executions(sibling_key) == 1, "the completed sibling child ran again"
    assert executions(parent_key) == 1
    results = tool_results(client, tenant.owner, run_id)
    assert [results[i]["content"] for i in ("t0", "t1", "t2")] == ["quick done", "scribe done", "editor done"]


def test_nested_children_suspend_and_resume_through_every_level(client: FlaskClient, tenant: TenantFixture) -> None:
    inner = _subagent("inner", [{"tool_calls": [write_memory("deep", "w")]}, {"text": "inner done"}])
    outer = _subagent("outer", [{"tool_calls": [_task("inner", call_id="ti")]}, {"text": "outer done"}])
    run_id = _run(
        client, tenant, [{"tool_calls": [_task("outer", call_id="to")]}, {"text": "top done"}], [inner, outer]
    )
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )
    [approval] = pending(client, tenant.owner, run_id)
    children = _child_ids(client, tenant, run_id)
    assert len(children) == 2
    assert approval["subagent_call_id"] == children[1]
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert (results["ti"]["content"], results["to"]["content"]) == ("inner done", "outer done")


def test_expiry_of_a_child_approval_fails_the_parent(
    client: FlaskClient, tenant: TenantFixture, db: Database, settings: Any
) -> None:
    from datetime import timedelta

    from hango.platform.runtime import Runtime
    from hango.run.expiry import expire_stale

    child = _subagent("scribe", [{"tool_calls": [write_memory(call_id="w")]}])
    run_id = _run(client, tenant, [{"tool_calls": [_task("scribe")]}], [child])
    assert (
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed", "succeeded"})["state"]
        == "awaiting_approval"
    )
    assert expire_stale(Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db)) >= 1
    run = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json
    assert (run["state"], run["error"]) == ("failed", "approval expired")


def test_a_crash_mid_child_resumes_the_child_without_rerunning_its_completed_calls(
    tenant: TenantFixture, db: Database, settings: Any
) -> None:
    import os
    import signal

    from hango.api import create_app
    from tests.support.processes import wait_until, worker

    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")
    client = create_app(own, db=db).test_client()
    done_before, after = uuid.uuid4().hex, uuid.uuid4().hex
    child = _subagent(
        "worker",
        [
            {"tool_calls": [{"id": "c1", "name": "count", "args": {"key": done_before}}]},
            {"tool_calls": [{"id": "s1", "name": "sleep", "args": {"seconds": 30}}]},
            {"tool_calls": [{"id": "c2", "name": "count", "args": {"key": after}}]},
            {"text": "child finished"},
        ],
        tools=["count", "sleep"],
    )
    agent_id = create_agent(
        client,
        tenant.owner,
        [{"tool_calls": [_task("worker", call_id="t")]}, {"text": "ok"}],
        tools=TOOLS,
        subagents=[child],
    )
    with worker(own, concurrency=1, beat=False, name="child-doomed") as doomed:
        run_id = start_run(client, tenant.owner, agent_id)
        # The child's sleep has started: its assistant turn is stored and its tool.started is the newest event.
        wait_until(lambda: _sleep_started(client, tenant, db, run_id), timeout=30)
        os.killpg(doomed.pid, signal.SIGKILL)
    with worker(own, concurrency=1, beat=True, name="child-rescuer"):
        run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"}, timeout=60)
    assert run["state"] == "succeeded", run
    assert (executions(done_before), executions(after)) == (1, 1)
    results = tool_results(client, tenant.owner, run_id)
    assert results["s1"]["content"] == "tool call interrupted"
    assert results["t"]["content"] == "child finished"
    assert event_types(db, run_id).count("subagent.started") == 1
    # The task call re-driven after the crash is not announced again; the interrupted call's answer finishes it.
    events = replayed_events(client, tenant.owner, run_id)
    assert set(assert_paired(events, "tool.started", "tool.finished", "tool_call_id")) == {"t", "c1", "s1", "c2"}
    [interrupted] = [data for _, type_, data in events if type_ == "tool.finished" and data["tool_call_id"] == "s1"]
    assert interrupted["is_error"] is True


def _sleep_started(client: FlaskClient, tenant: TenantFixture, db: Database, run_id: str) -> bool:
    asked = any(block.get("id") == "s1" for m in messages_of(client, tenant.owner, run_id) for block in m["content"])
    return asked and event_types(db, run_id)[-1] == "tool.started"
