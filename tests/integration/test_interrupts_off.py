"""Interrupts switched off (``HANGO_INTERRUPTS_ENABLED=false``) still apply the decisions a human already made.

A run suspends with interrupts on; a human decides; the run then resumes on a worker whose interrupts are off. The
decision must be applied (a rejected or answered call never runs, an edited one runs with the human's arguments),
and a new matching call of the same run runs without waiting for anyone.

The module's worker (interrupts off) consumes a queue of the module's own, so the session worker (which shares the
database but not these settings) never takes its runs; a run is created on a queue nobody consumes and suspended in
this process, so that the module's worker gets it only once decided.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.agent.messages import user_message
from hango.agent.middleware.hitl import UnappliedDecisions, require_decisions_applied
from hango.agent.middleware.stack import default_chain
from hango.agent.state import Decision, LoopState
from hango.api.decision_requests import read_request
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Run
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service
from hango.run.worker import execute_run
from hango.services import approvals
from tests.integration.conftest import TenantFixture, create_agent
from tests.integration.hitl_helpers import event_types, pending, tool_results
from tests.support.processes import wait_until, worker
from tests.support.tools import executions


def _run_state(db: Database, run_id: uuid.UUID) -> str | None:
    with db.transaction() as session:
        run = session.get(Run, run_id)
        assert run is not None
        # Waiting for a human again is an end too (the wrong one): the test then fails at once, not at a timeout.
        return run.state if run.state in {"succeeded", "failed", "cancelled", "awaiting_approval"} else None


def _decision(kind: str, edited_key: str) -> tuple[dict[str, Any], str]:
    """The human's decision of one kind, and what the call's result must then hold."""
    if kind == "edit":
        return {"decision": "edit", "args": {"key": edited_key}}, f"counted {edited_key} (1)"
    message = f"the human's {kind} message"
    return {"decision": kind, "message": message}, message


@pytest.fixture(scope="module")
def own(settings: Settings) -> Iterator[Settings]:
    """The session's settings (interrupts on) with the module's queue, which a worker with interrupts off consumes."""
    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")
    with worker(own.replace(interrupts_enabled=False), concurrency=1, beat=False, name="interrupts-off"):
        yield own


@pytest.mark.parametrize("kind", ["reject", "respond", "edit"])
def test_a_run_resumed_with_interrupts_off_applies_its_stored_decisions(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings, kind: str
) -> None:
    parked = Runtime.build(own.replace(queue=f"parked-{uuid.uuid4().hex[:8]}"), db=db)
    runtime = Runtime.build(own, db=db)
    owner = Principal(tenant.id, tenant.owner.user_id, "owner")
    original, edited, later = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("original", "edited", "later"))
    decision, result_holds = _decision(kind, edited)
    script = [
        {"tool_calls": [{"id": "first", "name": "count", "args": {"key": original}}]},
        {"tool_calls": [{"id": "second", "name": "count", "args": {"key": later}}]},
        {"text": "done"},
    ]
    agent_id = uuid.UUID(create_agent(client, tenant.owner, script, interrupt_on={"count": True}))
    run = service.create_run(parked, owner, agent_id, [user_message("go")])
    # Interrupts on (the session's settings): the call waits for a human, in this process.
    assert execute_run(parked, run.id) == "suspended"
    body = {"decisions": [{"tool_call_id": "first", **decision}]}
    # Decided, the run is queued on the module's queue: the worker with interrupts off resumes it.
    assert approvals.decide(runtime, owner, run.id, read_request(body)).run.state == "queued"
    state = wait_until(lambda: _run_state(db, run.id), timeout=60)

    assert state == "succeeded"
    assert executions(original) == 0  # the model's own call never ran
    assert executions(edited) == (1 if kind == "edit" else 0)
    results = tool_results(client, tenant.owner, str(run.id))
    assert result_holds in results["first"]["content"]
    assert results["first"]["is_error"] == (kind == "reject")
    # The new interruptible call ran once, and nothing new waits for a human.
    assert executions(later) == 1
    assert (results["second"]["content"], results["second"]["is_error"]) == (f"counted {later} (1)", False)
    assert [a["tool_call_id"] for a in pending(client, tenant.owner, str(run.id), state="decided")] == ["first"]
    assert pending(client, tenant.owner, str(run.id)) == []
    assert event_types(db, str(run.id)).count("approval.requested") == 1


def test_a_loop_with_decisions_refuses_a_chain_without_the_human_in_the_loop_slot() -> None:
    state = LoopState(messages=[], decisions={"first": Decision("reject", str(uuid.uuid4()), message="no")})
    require_decisions_applied(default_chain(["count"], interrupts=False), state)
    with pytest.raises(UnappliedDecisions, match="HANGO_INTERRUPTS_ENABLED"):
        require_decisions_applied(default_chain(["count"], overrides={"human_in_the_loop": None}), state)
