"""Runs calling MCP tools, with a real worker and a real MCP server over stdio (the operator's config file).

What the model sees is pinned at the run's first step; a call is interrupted unless its server is trusted and the
tool read-only; an approved call carries its approval id in ``_meta`` and runs once; a changed definition is
refused.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.run.mcp_tools import DRIFT_ERROR
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, pending, tool_results
from tests.support.processes import worker

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Fixture:
    settings: Settings
    client: FlaskClient
    notes: Path
    record: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@pytest.fixture
def mcp(settings: Settings, db: Database, tmp_path: Path) -> Iterator[Fixture]:
    notes, record = tmp_path / "notes", tmp_path / "calls.jsonl"
    notes.mkdir()
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_fixture_server"],
        "cwd": str(ROOT),
        "env": {"NOTES_DIR": str(notes), "RECORD_FILE": str(record), "PYTHONPATH": str(ROOT)},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", mcp_config=str(config))
    with worker(own, concurrency=1, beat=False, name="mcp"):
        yield Fixture(own, create_app(own, db=db).test_client(), notes, record)


def _call(call_id: str, tool: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "name": f"mcp__notes__{tool}", "args": args}


def test_a_write_waits_for_a_human_and_runs_once_with_its_approval_id_while_a_trusted_read_runs_at_once(
    mcp: Fixture, tenant: TenantFixture
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
    assert [call["tool"] for call in mcp.calls()] == ["peek"]
    assert not (mcp.notes / "a.md").exists()

    assert decide(mcp.client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(mcp.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (mcp.notes / "a.md").read_text() == "hello"
    pokes = [call for call in mcp.calls() if call["tool"] == "poke"]
    assert len(pokes) == 1
    assert pokes[0]["meta"]["io.hango/idempotency-key"] == item["id"]
    results = tool_results(mcp.client, tenant.owner, run_id)
    assert results["r"]["content"] == "(no such note)"
    assert "wrote 5 characters" in results["w"]["content"]
