"""Exactly-once approved execution with real processes: a worker SIGKILLed while an approved call runs.

Each crash test has a queue of its own, so only the workers it starts take its runs. The doomed worker is killed while
the approved ``slow_count`` (or ``idempotent_slow_count``) sleeps through its first execution; the rescuer, with
beat, finds the run's lease expired, takes it over and re-drives the batch.
"""

from __future__ import annotations

import os
import signal
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.agent.middleware.hitl import OUTCOME_UNKNOWN
from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import File
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, decide, pending, tool_results
from tests.support.processes import wait_until, worker
from tests.support.tools import executions, keys_seen

TOOLS = ["edit_file", "slow_count", "idempotent_slow_count"]


@pytest.fixture
def own(settings: Settings, db: Database) -> tuple[Settings, FlaskClient]:
    own_settings = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")
    return own_settings, create_app(own_settings, db=db).test_client()


def _executions(client: FlaskClient, tenant: TenantFixture, run_id: str) -> dict[str, str]:
    return {item["tool_call_id"]: item["execution"] for item in pending(client, tenant.owner, run_id, "all")}


def _crash_during_approved_calls(
    settings: Settings, client: FlaskClient, tenant: TenantFixture, db: Database, slow_tool: str
) -> tuple[str, str, dict[str, Any]]:
    """A batch of an approved memory edit and an approved slow call; the worker dies while the slow call runs.

    Returns the run id, the counter key and the approvals by call id as the API listed them at the crash.
    """
    key = uuid.uuid4().hex
    edit = {"id": "e", "name": "edit_file", "args": {"file_path": MEMORY, "old_string": "x", "new_string": "xy"}}
    slow = {"id": "s", "name": slow_tool, "args": {"key": key, "seconds": 30}}
    script = [{"tool_calls": [edit, slow]}, {"text": "done"}]
    agent_id = create_agent(client, tenant.owner, script, tools=TOOLS, interrupt_on={slow_tool: True})
    with db.transaction() as session:
        session.add(File(id=uuid.uuid4(), tenant_id=tenant.id, agent_id=uuid.UUID(agent_id), path=MEMORY, content="x"))
    with worker(settings, concurrency=1, beat=False, name="approved-doomed") as doomed:
        run_id = start_run(client, tenant.owner, agent_id)
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
        assert _executions(client, tenant, run_id) == {"e": "not_started", "s": "not_started"}
        decisions = [{"tool_call_id": "e", "decision": "approve"}, {"tool_call_id": "s", "decision": "approve"}]
        assert decide(client, tenant.owner, run_id, *decisions).status_code == 200
        wait_until(lambda: executions(key) == 1, timeout=30)
        at_crash = {item["tool_call_id"]: item for item in pending(client, tenant.owner, run_id, "all")}
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    with worker(settings, concurrency=1, beat=True, name="approved-rescuer"):
        assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"}, timeout=60)["state"] == "succeeded"
    return run_id, key, at_crash


def test_a_non_idempotent_approved_call_cut_short_by_a_crash_is_not_run_again(
    own: tuple[Settings, FlaskClient], tenant: TenantFixture, db: Database
) -> None:
    settings, client = own
    run_id, key, at_crash = _crash_during_approved_calls(settings, client, tenant, db, "slow_count")

    # Both marks committed before their tools started: the edit ran first, the slow call was running.
    assert at_crash["e"]["execution"] == "executing"
    assert at_crash["s"]["execution"] == "executing"
    assert executions(key) == 1, "the approved call ran again after the crash"
    assert keys_seen(key) == [at_crash["s"]["id"]], "the tool did not get its approval id as idempotency key"
    results = tool_results(client, tenant.owner, run_id)
    assert results["s"] == {"type": "tool_result", "tool_use_id": "s", "content": OUTCOME_UNKNOWN, "is_error": True}
    # The built-in edit is idempotent: its first attempt was rolled back with the batch, and it ran again, once.
    assert not results["e"]["is_error"]
    assert _executions(client, tenant, run_id) == {"e": "done", "s": "outcome_unknown"}
    # The model was told: the turn after the batch answered with the unknown outcome in its history.
    messages = client.get(f"/v1/runs/{run_id}/messages?limit=200", headers=tenant.owner.headers).json["items"]
    assert messages[-1]["role"] == "assistant"
    assert messages[-2]["role"] == "tool"
    with db.transaction() as session:
        content = session.scalar(
            select(File.content).where(File.tenant_id == tenant.id, File.path == MEMORY, File.run_id.is_(None))
        )
    assert content == "xy"


def test_an_idempotent_approved_call_cut_short_by_a_crash_runs_again_with_the_same_key(
    own: tuple[Settings, FlaskClient], tenant: TenantFixture, db: Database
) -> None:
    settings, client = own
    run_id, key, at_crash = _crash_during_approved_calls(settings, client, tenant, db, "idempotent_slow_count")

    assert at_crash["s"]["execution"] == "executing"
    assert executions(key) == 2
    approval_id = at_crash["s"]["id"]
    assert keys_seen(key) == [approval_id, approval_id]
    results = tool_results(client, tenant.owner, run_id)
    assert results["s"]["content"] == f"counted {key} (2)"
    assert not results["s"]["is_error"]
    assert _executions(client, tenant, run_id) == {"e": "done", "s": "done"}


@pytest.mark.usefixtures("worker_process")
def test_calls_that_never_ran_stay_not_started(client: FlaskClient, tenant: TenantFixture) -> None:
    key = uuid.uuid4().hex
    calls = [{"id": f"c{i}", "name": "slow_count", "args": {"key": f"{key}{i}", "seconds": 0}} for i in range(3)]
    agent_id = create_agent(
        client, tenant.owner, [{"tool_calls": calls}, {"text": "done"}], tools=TOOLS, interrupt_on={"slow_count": True}
    )
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    decisions = [
        {"tool_call_id": "c0", "decision": "approve"},
        {"tool_call_id": "c1", "decision": "reject", "message": "no"},
        {"tool_call_id": "c2", "decision": "respond", "message": "42"},
    ]
    assert decide(client, tenant.owner, run_id, *decisions).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert _executions(client, tenant, run_id) == {"c0": "done", "c1": "not_started", "c2": "not_started"}
    assert [executions(f"{key}{i}") for i in range(3)] == [1, 0, 0]
