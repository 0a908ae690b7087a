"""Runs calling MCP tools, with a real worker and a real MCP server over stdio (the operator's config file).

What the model sees is pinned at the run's first step; a call is interrupted unless its server is trusted and the
tool read-only; an approved call carries its approval id in ``_meta`` and runs once; a changed definition is
refused.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask.testing import FlaskClient
from sqlalchemy import text

from hango.agent.middleware.hitl import OUTCOME_UNKNOWN
from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.run.mcp_tools import DRIFT_ERROR
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, pending, tool_results
from tests.support.mcp import python_env, stdio_entry
from tests.support.processes import api_server, wait_until, worker

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Fixture:
    settings: Settings
    client: FlaskClient
    notes: Path
    record: Path
    drift: Path

    def calls(self, note: str) -> list[dict[str, Any]]:
        """The calls the server received about one note (each test writes notes of its own)."""
        if not self.record.exists():
            return []
        calls = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [call for call in calls if call["arguments"].get("name") == note]

    def with_queue(self, db: Database, **changes: Any) -> Fixture:
        """The same servers on a queue of its own, which the module's worker does not serve, with settings
        ``changes``."""
        settings = self.settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", **changes)
        return dataclasses.replace(self, settings=settings, client=create_app(settings, db=db).test_client())


@pytest.fixture(scope="module")
def configured(settings: Settings, db: Database, tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    """A queue of the module's own and an operator config file with the fixture server (``notes``) and one whose
    command does not exist (``broken``)."""
    tmp_path = tmp_path_factory.mktemp("mcp")
    notes, record, drift = tmp_path / "notes", tmp_path / "calls.jsonl", tmp_path / "drift"
    notes.mkdir()
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_fixture_server"],
        "cwd": str(ROOT),
        "env": {**python_env(), "NOTES_DIR": str(notes), "RECORD_FILE": str(record), "DRIFT_FILE": str(drift)},
    }
    broken = {"command": str(tmp_path / "no-such-server")}
    hanging = stdio_entry("hanger")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": entry, "broken": broken, "hang": hanging}}))
    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", mcp_config=str(config))
    return Fixture(own, create_app(own, db=db).test_client(), notes, record, drift)


@pytest.fixture(scope="module")
def mcp(configured: Fixture) -> Iterator[Fixture]:
    """:func:`configured`, with a worker serving its queue for the whole module."""
    with worker(configured.settings, concurrency=1, beat=False, name="mcp"):
        yield configured


def _call(call_id: str, tool: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": f"mcp__notes__{tool}", "args": args}


def test_a_write_waits_for_a_human_and_runs_once_with_its_approval_id_while_a_trusted_read_runs_at_once(
    mcp: Fixture, tenant: TenantFixture, db: Database
) -> None:
    script = [
        {"tool_calls": [_call("r", "peek", name="a.md")]},
        {"tool_calls": [_call("w", "poke", name="a.md", text="hello")]},
        {"text": "done"},
    ]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__*"])
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
    [item] = pending(mcp.client, tenant.owner, run_id)
    assert item["tool_name"] == "mcp__notes__poke"
    assert [call["tool"] for call in mcp.calls("a.md")] == ["peek"]
    assert not (mcp.notes / "a.md").exists()

    assert decide(mcp.client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (mcp.notes / "a.md").read_text() == "hello"
    pokes = [call for call in mcp.calls("a.md") if call["tool"] == "poke"]
    assert len(pokes) == 1
    assert pokes[0]["meta"]["io.hango/idempotency-key"] == item["id"]
    results = tool_results(mcp.client, tenant.owner, run_id)
    assert results["r"]["content"] == "(no such note)"
    with db.transaction() as session:
        pinned = session.scalar(text("SELECT mcp_tools FROM runs WHERE id = :id"), {"id": run_id})
    # The wildcard took every tool but the one whose hango name would pass 64 characters.
    assert sorted(tool["listed"]["name"] for tool in pinned) == ["big", "peek", "plain", "poke", "slow_poke"]
    assert "wrote 5 characters" in results["w"]["content"]


def test_a_definition_changed_between_the_pause_and_the_approval_is_refused_sent_nowhere_and_audited(
    mcp: Fixture, tenant: TenantFixture, db: Database
) -> None:
    script = [{"tool_calls": [_call("w", "poke", name="b.md", text="x")]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__poke"])
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
    [item] = pending(mcp.client, tenant.owner, run_id)
    assert item["mcp"]["server"] == "notes"
    assert item["mcp"]["annotations"]["destructiveHint"] is True
    assert len(item["definition_sha256"]) == 64
    mcp.drift.touch()
    try:
        assert decide(mcp.client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
        assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    finally:
        mcp.drift.unlink()
    result = tool_results(mcp.client, tenant.owner, run_id)["w"]
    assert result["content"] == DRIFT_ERROR
    assert result["is_error"] is True
    assert mcp.calls("b.md") == []
    assert not (mcp.notes / "b.md").exists()
    [row] = audit_rows(db, tenant.id, "mcp.definition_changed")
    assert row.detail["approval_id"] == item["id"]
    assert row.detail["tool"] == "mcp__notes__poke"
    assert row.detail["definition_sha256"] == item["definition_sha256"]


def test_the_tools_listed_at_the_first_step_are_stored_with_the_run_and_an_unlisted_server_fails_it_by_name(
    mcp: Fixture, tenant: TenantFixture, db: Database
) -> None:
    script = [{"tool_calls": [_call("p", "plain", value=3)]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__plain", "mcp__notes__peek"])
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
    with db.transaction() as session:
        pinned = session.scalar(text("SELECT mcp_tools FROM runs WHERE id = :id"), {"id": run_id})
    assert sorted(tool["listed"]["name"] for tool in pinned) == ["peek", "plain"]
    assert all(tool["trusted"] for tool in pinned)

    broken = create_agent(mcp.client, tenant.owner, script, tools=["mcp__broken__anything"])
    failed = wait_for_state(mcp.client, tenant.owner, start_run(mcp.client, tenant.owner, broken), {"failed"})
    assert failed["error"].startswith("MCP server broken is unavailable")


def test_an_approved_call_cut_short_by_a_killed_worker_is_never_sent_again_and_answered_outcome_unknown(
    configured: Fixture, tenant: TenantFixture, db: Database
) -> None:
    mcp = configured.with_queue(db)
    script = [{"tool_calls": [_call("s", "slow_poke", name="c.md", text="once", seconds=20)]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__slow_poke"])
    with worker(mcp.settings, concurrency=1, beat=False, name="mcp-doomed") as doomed:
        run_id = start_run(mcp.client, tenant.owner, agent_id)
        wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
        [item] = pending(mcp.client, tenant.owner, run_id)
        assert decide(mcp.client, tenant.owner, run_id, {"tool_call_id": "s", "decision": "approve"}).status_code == 200
        wait_until(lambda: len(mcp.calls("c.md")) == 1, timeout=30)
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    with worker(mcp.settings, concurrency=1, beat=True, name="mcp-rescuer"):
        assert (
            wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"}, timeout=60)["state"]
            == "succeeded"
        )

    assert len(mcp.calls("c.md")) == 1, "the approved MCP call was sent again after the crash"
    assert mcp.calls("c.md")[0]["meta"]["io.hango/idempotency-key"] == item["id"]
    result = tool_results(mcp.client, tenant.owner, run_id)["s"]
    assert result["content"] == OUTCOME_UNKNOWN
    assert result["is_error"] is True


def test_a_grant_approves_an_mcp_call_which_carries_the_grants_approval_id_and_a_quorum_holds_one(
    mcp: Fixture, tenant: TenantFixture
) -> None:
    script = [{"tool_calls": [_call("g", "poke", name="g.md", text="granted")]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__poke"])
    body = {"agent_id": agent_id, "tool_name": "mcp__notes__poke", "when": {"name": {"equals": "g.md"}}, "ttl": "1h"}
    created = mcp.client.post("/v1/grants", json=body, headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed", "awaiting_approval"})["state"] == (
        "succeeded"
    )
    [item] = pending(mcp.client, tenant.owner, run_id, "all")
    assert item["grant_id"] == created.json["id"]
    assert [call["meta"]["io.hango/idempotency-key"] for call in mcp.calls("g.md")] == [item["id"]]

    admin = tenant.add("admin")
    quorum = {"mcp__notes__poke": {"approvals_required": 2}}
    script = [{"tool_calls": [_call("q", "poke", name="q.md", text="two")]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__poke"], interrupt_on=quorum)
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
    assert decide(mcp.client, tenant.owner, run_id, {"tool_call_id": "q", "decision": "approve"}).status_code == 200
    assert not (mcp.notes / "q.md").exists()
    assert decide(mcp.client, admin, run_id, {"tool_call_id": "q", "decision": "approve"}).status_code == 200
    assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (mcp.notes / "q.md").read_text() == "two"


def test_an_agents_effective_rules_show_each_mcp_tool_that_waits_and_lifting_one_is_warned_and_audited(
    configured: Fixture, tenant: TenantFixture, db: Database
) -> None:
    mcp = configured
    body = {
        "name": "mcp-rules",
        "model": {"provider": "scripted", "script": []},
        "tools": ["mcp__notes__*", "mcp__broken__x"],
        "interrupt_on": {"mcp__notes__plain": False},
    }
    saved = mcp.client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert saved.status_code == 201, saved.json
    effective = saved.json["effective_interrupt_on"]
    # Trusted (an operator's) and read-only: peek and big run unreviewed, and are absent.
    assert sorted(name for name in effective if name.startswith("mcp__")) == [
        "mcp__broken__x",
        "mcp__notes__plain",
        "mcp__notes__poke",
        "mcp__notes__slow_poke",
    ]
    assert effective["mcp__notes__plain"] is False
    assert effective["mcp__notes__poke"]["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert "could not be listed" in effective["mcp__broken__x"]["description"]
    assert saved.json["warnings"] == [
        {
            "tool": "mcp__notes__plain",
            "message": "mcp__notes__plain is no longer interrupted: its calls run without review",
        }
    ]
    [row] = audit_rows(db, tenant.id, "agent.interrupt_default_overridden")
    assert row.detail["tool"] == "mcp__notes__plain"
    shown = mcp.client.get(f"/v1/agents/{saved.json['id']}", headers=tenant.owner.headers).json
    assert shown["effective_interrupt_on"] == effective


def test_saving_an_agent_that_names_an_unknown_server_or_too_long_a_name_is_a_400_naming_the_entry(
    configured: Fixture, tenant: TenantFixture
) -> None:
    body = {
        "name": "mcp-bad",
        "model": {"provider": "scripted", "script": []},
        "tools": ["ls", "mcp__nowhere__x", "mcp__Notes__x", f"mcp__notes__{'x' * 60}"],
    }
    answer = configured.client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert answer.status_code == 400
    fields = {error["field"]: error["message"] for error in answer.json["errors"]}
    assert set(fields) == {"tools[1]", "tools[2]", "tools[3]"}
    assert "unknown MCP server 'nowhere'" in fields["tools[1]"]
    assert "64 characters" in fields["tools[3]"]


def test_the_gevent_api_server_lists_a_servers_tools_for_an_agents_rules(
    configured: Fixture, tenant: TenantFixture
) -> None:
    body = {"name": "mcp-api", "model": {"provider": "scripted", "script": []}, "tools": ["mcp__notes__*"]}
    with api_server(configured.settings) as base:
        saved = httpx.post(f"{base}/v1/agents", json=body, headers=tenant.owner.headers, timeout=30)
        assert saved.status_code == 201, saved.text
        again = httpx.get(f"{base}/v1/agents/{saved.json()['id']}", headers=tenant.owner.headers, timeout=30)
    waiting = sorted(name for name in again.json()["effective_interrupt_on"] if name.startswith("mcp__"))
    assert waiting == ["mcp__notes__plain", "mcp__notes__poke", "mcp__notes__slow_poke"]


def test_a_call_that_hangs_is_an_error_result_at_the_tool_timeout_and_the_run_and_its_worker_go_on(
    configured: Fixture, tenant: TenantFixture, db: Database
) -> None:
    mcp = configured.with_queue(db, tool_timeout=timedelta(seconds=2))
    script = [{"tool_calls": [{"id": "h", "name": "mcp__hang__hang", "args": {}}]}, {"text": "moved on"}]
    agent_id = create_agent(
        mcp.client, tenant.owner, script, tools=["mcp__hang__hang"], interrupt_on={"mcp__hang__hang": False}
    )
    with worker(mcp.settings, concurrency=1, beat=False, name="mcp-hang"):
        first = start_run(mcp.client, tenant.owner, agent_id)
        second = start_run(mcp.client, tenant.owner, agent_id)
        for run_id in (first, second):
            run = wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"}, timeout=60)
            assert run["state"] == "succeeded"
            with db.transaction() as session:
                attempts = session.scalar(text("SELECT attempts FROM runs WHERE id = :id"), {"id": run_id})
            assert attempts == 0, "the run's lease was lost and the run taken back"
            result = tool_results(mcp.client, tenant.owner, run_id)["h"]
            assert result["is_error"] is True
            assert "mcp__hang__hang" not in result["content"]
            assert "hang of server hang did not answer within" in result["content"]


def test_an_edit_is_checked_against_the_pinned_input_schema_and_a_bad_one_is_a_400_naming_the_field(
    mcp: Fixture, tenant: TenantFixture
) -> None:
    script = [{"tool_calls": [_call("e", "poke", name="e.md", text="model's")]}, {"text": "done"}]
    agent_id = create_agent(mcp.client, tenant.owner, script, tools=["mcp__notes__poke"])
    run_id = start_run(mcp.client, tenant.owner, agent_id)
    wait_for_state(mcp.client, tenant.owner, run_id, {"awaiting_approval"})
    bad = {"tool_call_id": "e", "decision": "edit", "args": {"name": "e.md", "text": 5}}
    refused = decide(mcp.client, tenant.owner, run_id, bad)
    assert refused.status_code == 400
    assert "text" in json.dumps(refused.json["errors"])
    good = {"tool_call_id": "e", "decision": "edit", "args": {"name": "e.md", "text": "reviewer's"}}
    assert decide(mcp.client, tenant.owner, run_id, good).status_code == 200
    assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (mcp.notes / "e.md").read_text() == "reviewer's"
    assert [call["arguments"]["text"] for call in mcp.calls("e.md")] == ["reviewer's"]
