"""Tool budgets (api.md "Tool budgets") on real PostgreSQL: the per-call timeout, and hostile runs on a worker.

The sizes, storage totals and linear-time patterns are tested in memory (tests/unit/test_filesystem_tools.py).
Here, the timeout stops calls made as the loop makes them, through ``execute``; and hostile scripts run on a real
worker of their own queue, next to another tenant's ordinary run: every budget the scripts break is an error
result, their leases are never lost, and the ordinary run still succeeds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.agent.messages import ToolCall, ToolResult, user_message
from hango.agent.tools.base import ToolContext, ToolLimits, ToolTimeout, execute
from hango.agent.tools.filesystem import BUILTIN_TOOLS
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Run, RunEvent
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service
from hango.store.files import SqlFileSystem
from tests.integration.conftest import TenantFixture, create_agent
from tests.integration.test_filesystem_tools import _seed_run
from tests.support.processes import wait_until, worker
from tests.support.tools import TOOLS as TEST_TOOLS

pytestmark = pytest.mark.integration

TOOLS = {tool.name: tool for tool in [*BUILTIN_TOOLS, *TEST_TOOLS]}
LIMITS = ToolLimits(max_file_bytes=32_000, max_run_storage_bytes=80_000, max_agent_storage_bytes=50_000, timeout=2)


def _call(context: ToolContext, name: str, **args: Any) -> ToolResult:
    return execute(TOOLS[name], context, ToolCall(f"call-{uuid.uuid4().hex[:8]}", name, args))


@pytest.fixture
def tools(db: Database) -> Iterator[ToolContext]:
    """The tools of a fresh run with small limits, inside one transaction."""
    with db.transaction() as session:
        run = _seed_run(session)
        files = SqlFileSystem(session, run.tenant_id, run.agent_id, run.id)
        yield ToolContext(run.tenant_id, run.agent_id, run.id, "call", files, limits=LIMITS)


# The per-call timeout


@pytest.mark.parametrize(("name", "args"), [("sleep", {"seconds": 60}), ("spin", {"seconds": 600})])
def test_a_call_past_the_timeout_is_stopped_and_named(tools: ToolContext, name: str, args: dict[str, Any]) -> None:
    quick = replace(tools, limits=replace(LIMITS, timeout=0.2))

    with pytest.raises(ToolTimeout) as raised:
        _call(quick, name, **args)

    assert f"{name} did not finish within 0.2s" in str(raised.value)
    assert "HANGO_TOOL_TIMEOUT" in str(raised.value)


# Hostile scripts on a real worker


def _hostile_script() -> list[dict[str, Any]]:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("w_big", "write_file", {"file_path": "/big.txt", "content": "a" * 300}),
        (
            "e_big",
            "edit_file",
            {"file_path": "/big.txt", "old_string": "a", "new_string": "a" * 100, "replace_all": True},
        ),
        ("g_cat", "grep", {"pattern": "(a+)+b", "path": "/big.txt"}),
        ("g_ref", "grep", {"pattern": r"(a)\1"}),
        (
            "e_grow",
            "edit_file",
            {"file_path": "/big.txt", "old_string": "a", "new_string": "a" * 1000, "replace_all": True},
        ),
        ("w_huge", "write_file", {"file_path": "/huge.txt", "content": "z" * 40_000}),
        ("w_m1", "write_file", {"file_path": "/memories/m1.md", "content": "m" * 300}),
        (
            "e_m1",
            "edit_file",
            {"file_path": "/memories/m1.md", "old_string": "m", "new_string": "m" * 100, "replace_all": True},
        ),
        ("w_m2", "write_file", {"file_path": "/memories/m2.md", "content": "n" * 300}),
        (
            "e_m2",
            "edit_file",
            {"file_path": "/memories/m2.md", "old_string": "n", "new_string": "n" * 100, "replace_all": True},
        ),
        ("w_s2", "write_file", {"file_path": "/s2.txt", "content": "b" * 300}),
        (
            "e_s2",
            "edit_file",
            {"file_path": "/s2.txt", "old_string": "b", "new_string": "b" * 100, "replace_all": True},
        ),
        ("w_s3", "write_file", {"file_path": "/s3.txt", "content": "c" * 300}),
        (
            "e_s3",
            "edit_file",
            {"file_path": "/s3.txt", "old_string": "c", "new_string": "c" * 100, "replace_all": True},
        ),
        ("spin", "spin", {"seconds": 600}),
        ("scribble", "scribble", {"file_path": "/half.txt", "seconds": 600}),
        ("r_half", "read_file", {"file_path": "/half.txt"}),
        ("sleep", "sleep", {"seconds": 60}),
    ]
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": id_, "name": name, "args": args}]} for id_, name, args in calls
    ]
    return [*turns, {"text": "survived"}]


# What each call of the hostile script must answer: an error naming the limit, or None for a success.
HOSTILE_ERRORS = {
    "w_big": None,
    "e_big": None,
    "g_cat": None,
    "g_ref": "RE2",
    "e_grow": "HANGO_MAX_FILE_BYTES",
    "w_huge": "HANGO_MAX_FILE_BYTES",
    "w_m1": None,
    "e_m1": None,
    "w_m2": None,
    "e_m2": "HANGO_MAX_AGENT_STORAGE_BYTES",
    "w_s2": None,
    "e_s2": None,
    "w_s3": None,
    "e_s3": "HANGO_MAX_RUN_STORAGE_BYTES",
    "spin": "HANGO_TOOL_TIMEOUT",
    "scribble": "HANGO_TOOL_TIMEOUT",
    "r_half": "file not found: /half.txt",
    "sleep": "HANGO_TOOL_TIMEOUT",
}


UNPROTECTED = {"write_file": False, "edit_file": False}


@pytest.fixture
def budget_runtime(settings: Settings, db: Database) -> Runtime:
    """A runtime on a queue of its own, with the small limits of these tests."""
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        max_file_bytes=LIMITS.max_file_bytes,
        max_run_storage_bytes=LIMITS.max_run_storage_bytes,
        max_agent_storage_bytes=LIMITS.max_agent_storage_bytes,
        tool_timeout=timedelta(seconds=LIMITS.timeout),
    )
    return Runtime.build(own, db=db)


def _owner(tenant: TenantFixture) -> Principal:
    return Principal(tenant.id, tenant.owner.user_id, "owner")


def _final(db: Database, run_id: uuid.UUID) -> Run | None:
    with db.transaction() as session:
        run = session.get(Run, run_id)
        return run if run is not None and run.state in {"succeeded", "failed", "cancelled"} else None


def _event_types(db: Database, run_id: uuid.UUID) -> list[str]:
    with db.transaction() as session:
        return list(session.scalars(select(RunEvent.type).where(RunEvent.run_id == run_id).order_by(RunEvent.seq)))


def _results(client: FlaskClient, tenant: TenantFixture, run_id: uuid.UUID) -> dict[str, dict[str, Any]]:
    messages = client.get(f"/v1/runs/{run_id}/messages?limit=200", headers=tenant.owner.headers).json["items"]
    return {block["tool_use_id"]: block for m in messages if m["role"] == "tool" for block in m["content"]}


def test_hostile_runs_meet_every_budget_without_stalling_other_tenants(
    client: FlaskClient, make_tenant: Any, db: Database, budget_runtime: Runtime
) -> None:
    hostile, ordinary = make_tenant("hostile"), make_tenant("ordinary")
    allowed = ["read_file", "write_file", "edit_file", "glob", "grep", "spin", "scribble", "sleep"]
    hostile_runs = [
        service.create_run(
            budget_runtime,
            _owner(hostile),
            uuid.UUID(
                # Memories are protected by default; these scripts test budgets, not approvals.
                create_agent(client, hostile.owner, _hostile_script(), tools=allowed, interrupt_on=UNPROTECTED)
            ),
            [user_message("go")],
        )
        for _ in range(2)
    ]
    polite = [{"tool_calls": [{"id": "w", "name": "write_file", "args": {"file_path": "/n.md", "content": "hi\n"}}]}]
    ordinary_agent = uuid.UUID(create_agent(client, ordinary.owner, [*polite, {"text": "fine"}], tools=allowed))
    # Two hostile runs take both worker processes; the ordinary run needs one of them to be given back.
    ordinary_run = service.create_run(budget_runtime, _owner(ordinary), ordinary_agent, [user_message("go")])

    with worker(budget_runtime.settings, concurrency=2, beat=True, name="budgets"):
        finals = [wait_until(lambda run=run: _final(db, run.id), timeout=120) for run in [*hostile_runs, ordinary_run]]

    *hostile_finals, ordinary_final = finals
    assert ordinary_final.state == "succeeded", ordinary_final.error
    for run, final in zip(hostile_runs, hostile_finals, strict=True):
        assert final.state == "succeeded", final.error
        results = _results(client, hostile, run.id)
        for call_id, expected in HOSTILE_ERRORS.items():
            result = results[call_id]
            if expected is None:
                assert not result["is_error"], (call_id, result["content"])
            else:
                assert result["is_error"], (call_id, result["content"])
                assert expected in result["content"], (call_id, result["content"])
        assert results["g_cat"]["content"] == "no matches for '(a+)+b' under /big.txt"
        # The lease was never lost: one start, no reclaim, no second attempt.
        events = _event_types(db, run.id)
        assert events.count("run.started") == 1
        assert "run.queued" not in events[events.index("run.started") :]
        assert final.attempts == run.attempts
