"""Runs end to end: the API, a real Celery worker process, PostgreSQL and Redis."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.kernel.models import RunEvent
from hango.platform.db import Database
from tests.integration.conftest import (
    TenantFixture,
    create_agent,
    messages_of,
    start_run,
    wait_for_state,
)
from tests.support.processes import logged, wait_until, worker_log_name
from tests.support.tools import executions

pytestmark = pytest.mark.usefixtures("worker_process")


def _event_types(db: Database, run_id: str) -> list[str]:
    from sqlalchemy import select

    with db.transaction() as session:
        rows = session.scalars(select(RunEvent).where(RunEvent.run_id == uuid.UUID(run_id)).order_by(RunEvent.seq))
        return [row.type for row in rows]


def test_a_scripted_run_finishes_with_the_right_messages_and_events(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    script = [
        {
            "text": "Saving.",
            "tool_calls": [{"id": "w1", "name": "write_file", "args": {"file_path": "/notes.txt", "content": "hi"}}],
        },
        {"text": "Reading.", "tool_calls": [{"id": "r1", "name": "read_file", "args": {"file_path": "/notes.txt"}}]},
        {"text": "Done."},
    ]
    agent_id = create_agent(client, tenant.owner, script)
    run_id = start_run(client, tenant.owner, agent_id, "take a note")
    run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
    assert run["state"] == "succeeded", run
    assert run["turn"] == 3
    assert run["usage"]["input_tokens"] > 0

    messages = messages_of(client, tenant.owner, run_id)
    assert [m["seq"] for m in messages] == list(range(1, 7))
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[1]["content"][1] == {
        "type": "tool_use",
        "id": "w1",
        "name": "write_file",
        "input": {"file_path": "/notes.txt", "content": "hi"},
    }
    assert messages[2]["content"][0]["tool_use_id"] == "w1"
    assert messages[2]["content"][0]["is_error"] is False
    assert "hi" in messages[4]["content"][0]["content"]
    assert messages[5]["content"] == [{"type": "text", "text": "Done."}]

    assert _event_types(db, run_id) == [
        "run.queued",
        "message.created",
        "run.started",
        "message.created",
        "tool.started",
        "tool.finished",
        "message.created",
        "message.created",
        "tool.started",
        "tool.finished",
        "message.created",
        "message.created",
        "run.finished",
    ]


def test_tool_failures_become_error_results_and_the_run_goes_on(client: FlaskClient, tenant: TenantFixture) -> None:
    script = [
        {
            "tool_calls": [
                {"id": "bad-args", "name": "write_file", "args": {"file_path": "/x"}},
                {"id": "unknown", "name": "no_such_tool", "args": {}},
                {"id": "not-allowed", "name": "grep", "args": {"pattern": "x"}},
                {"id": "missing", "name": "read_file", "args": {"file_path": "/nope.txt"}},
            ]
        },
        {"text": "Recovered."},
    ]
    agent_id = create_agent(client, tenant.owner, script, tools=["write_file", "read_file"])
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    results = messages_of(client, tenant.owner, run_id)[2]["content"]
    assert [r["tool_use_id"] for r in results] == ["bad-args", "unknown", "not-allowed", "missing"]
    assert all(r["is_error"] for r in results)
    assert "content" in results[0]["content"]
    assert "not available" in results[1]["content"]
    assert "not available" in results[2]["content"]
    assert "not found" in results[3]["content"]


def test_max_turns_fails_the_run_with_a_reason(client: FlaskClient, tenant: TenantFixture) -> None:
    looping = [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}] * 5
    agent_id = create_agent(client, tenant.owner, looping, max_turns=2)
    run_id = start_run(client, tenant.owner, agent_id)
    run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
    assert run["state"] == "failed"
    assert run["error"] == "the run reached its limit of 2 turns"
    assert run["turn"] == 2


def test_an_exhausted_script_answers_done(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded"})["state"] == "succeeded"
    assert messages_of(client, tenant.owner, run_id)[-1]["content"] == [{"type": "text", "text": "done"}]


def test_memories_persist_across_runs_and_scratch_does_not(client: FlaskClient, tenant: TenantFixture) -> None:
    writer = [
        {
            "tool_calls": [
                {"name": "write_file", "args": {"file_path": "/memories/AGENTS.md", "content": "remember me"}},
                {"name": "write_file", "args": {"file_path": "/scratch.txt", "content": "forget me"}},
            ]
        }
    ]
    reader = [
        {
            "tool_calls": [
                {"name": "read_file", "args": {"file_path": "/memories/AGENTS.md"}},
                {"name": "read_file", "args": {"file_path": "/scratch.txt"}},
            ]
        }
    ]
    # The default rules would hold the memory write for a human; this test is about persistence, so lift them.
    agent_id = create_agent(client, tenant.owner, writer, interrupt_on={"write_file": False})
    first = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, first, {"succeeded", "failed"})["state"] == "succeeded"
    agent = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json
    body = {key: agent[key] for key in ("name", "system_prompt", "tools", "interrupt_on", "subagents", "max_turns")}
    body["model"] = {"provider": "scripted", "script": reader}
    assert client.put(f"/v1/agents/{agent_id}", json=body, headers=tenant.owner.headers).status_code == 200
    second = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, second, {"succeeded", "failed"})["state"] == "succeeded"
    memory, scratch = messages_of(client, tenant.owner, second)[2]["content"]
    assert "remember me" in memory["content"]
    assert not memory["is_error"]
    assert scratch["is_error"]


def test_a_run_uses_the_agent_as_it_was_when_created(client: FlaskClient, tenant: TenantFixture) -> None:
    key = uuid.uuid4().hex
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [{"name": "sleep", "args": {"seconds": 0.5}}]}])
    run_id = start_run(client, tenant.owner, agent_id)
    agent = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json
    body = {k: agent[k] for k in ("name", "system_prompt", "tools", "interrupt_on", "subagents", "max_turns")}
    body["model"] = {"provider": "scripted", "script": [{"tool_calls": [{"name": "count", "args": {"key": key}}]}]}
    assert client.put(f"/v1/agents/{agent_id}", json=body, headers=tenant.owner.headers).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert executions(key) == 0


def test_cancelling_a_running_run_stops_it_between_steps(
    client: FlaskClient, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    key = uuid.uuid4().hex
    script = [
        {"tool_calls": [{"name": "sleep", "args": {"seconds": 1}}]},
        {"tool_calls": [{"name": "count", "args": {"key": key}}]},
    ]
    agent_id = create_agent(client, tenant.owner, script)
    run_id = start_run(client, tenant.owner, agent_id)
    wait_until(lambda: "tool.started" in _event_types(db, run_id))
    cancelled = client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers)
    assert cancelled.status_code == 200
    assert cancelled.json["state"] == "cancelled"
    # The worker finishes the sleep, its batch is refused by the fence, and the next turn never runs.
    wait_until(lambda: logged(worker_log_name(settings, "session"), "run stopped", run_id), timeout=15)
    assert executions(key) == 0
    assert [m["role"] for m in messages_of(client, tenant.owner, run_id)] == ["user", "assistant"]
    again = client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers)
    assert again.status_code == 409


def test_members_see_and_cancel_only_their_own_runs(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    alice, bob = tenant.add("member"), tenant.add("member")
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [{"name": "sleep", "args": {"seconds": 0.2}}]}])
    run_id = start_run(client, alice, agent_id)
    assert client.get(f"/v1/runs/{run_id}", headers=alice.headers).status_code == 200
    assert client.get(f"/v1/runs/{run_id}", headers=bob.headers).status_code == 404
    assert client.get(f"/v1/runs/{run_id}/messages", headers=bob.headers).status_code == 404
    assert client.post(f"/v1/runs/{run_id}/cancel", headers=bob.headers).status_code == 404
    assert run_id not in {r["id"] for r in client.get("/v1/runs", headers=bob.headers).json["items"]}
    assert run_id in {r["id"] for r in client.get("/v1/runs", headers=tenant.owner.headers).json["items"]}
    other = make_tenant("other")
    assert client.get(f"/v1/runs/{run_id}", headers=other.owner.headers).status_code == 404
    assert (
        client.post("/v1/runs", json={"agent_id": agent_id, "input": "x"}, headers=other.owner.headers).status_code
        == 404
    )


def test_a_run_can_start_from_a_conversation(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = create_agent(client, tenant.owner, [{"text": "ok"}])
    body = {
        "agent_id": agent_id,
        "messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": [{"type": "text", "text": "noted"}]},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
    }
    response = client.post("/v1/runs", json=body, headers=tenant.owner.headers)
    assert response.status_code == 202, response.json
    run_id = response.json["id"]
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    messages = messages_of(client, tenant.owner, run_id)
    assert [(m["role"], m["content"][0]["text"]) for m in messages[:3]] == [
        ("user", "first"),
        ("assistant", "noted"),
        ("user", "second"),
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
        ({"messages": [{"role": "user", "content": [{"type": "image", "text": "x"}]}]}, "messages[0].content[0].type"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"input": "x", "messages": [{"role": "user", "content": "y"}]}, "input"),
        ({}, "input"),
    ],
)
def test_bad_run_input_is_a_400_naming_the_field(
    client: FlaskClient, tenant: TenantFixture, body: dict[str, Any], field: str
) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    response = client.post("/v1/runs", json={"agent_id": agent_id, **body}, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert field in [error["field"] for error in response.json["errors"]]
