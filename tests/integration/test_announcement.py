"""An approved call's ``tool.started`` commits with its ``executing`` mark, in one transaction; never later than the
call's tool starts, and never lost when the chain answers the call without running it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from hango.agent.messages import ToolCall, ToolResult, user_message
from hango.agent.state import Decision, LoopState, load_state
from hango.api.decision_requests import read_request
from hango.kernel.config import Settings
from hango.kernel.models import PendingApproval, Run, RunEvent
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service
from hango.run.persistence import RunPersistence
from hango.run.transitions import Lease
from hango.run.worker import claim_run, execute_run
from hango.services import approvals
from tests.integration.hitl_helpers import stored_agent

CALL = ToolCall("w", "write_file", {"file_path": "/memories/x", "content": "remember"})


@pytest.fixture(scope="module")
def runtime(settings: Settings, db: Database) -> Runtime:
    # Runs are enqueued onto a queue nobody consumes: this test drives them itself.
    return Runtime.build(settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:6]}"), db=db)


def _approved_and_claimed(runtime: Runtime) -> tuple[RunPersistence, LoopState, uuid.UUID]:
    """A run whose write_file call a human approved, claimed again by this test's worker; the persistence of its
    loop, a state holding the decision, and the approval's id."""
    script = [{"tool_calls": [{"id": CALL.id, "name": CALL.name, "args": CALL.input}]}]
    owner, agent_id = stored_agent(runtime.db, script, ["write_file"])
    run = service.create_run(runtime, owner, agent_id, [user_message("go")])
    assert execute_run(runtime, run.id) == "suspended"
    body = {"decisions": [{"tool_call_id": CALL.id, "decision": "approve"}]}
    [approval] = approvals.decide(runtime, owner, run.id, read_request(body)).approvals
    claimed = claim_run(runtime, run.id, "test-worker")
    assert claimed is not None
    persistence = RunPersistence(runtime, claimed.run, Lease(run.id, "test-worker"), threading.Event())
    state = LoopState(messages=[], decisions={CALL.id: Decision("approve", str(approval.id))})
    state.announced.append(CALL.id)  # as the loop does before it announces
    return persistence, state, approval.id


def _logged(runtime: Runtime, run_id: uuid.UUID) -> tuple[list[str], str, list[str]]:
    """The run's event types after its claim, its approval's execution, and the calls its stored state announced."""
    with runtime.db.read() as session:
        types = list(session.scalars(select(RunEvent.type).where(RunEvent.run_id == run_id).order_by(RunEvent.seq)))
        execution = session.scalars(select(PendingApproval.execution).where(PendingApproval.run_id == run_id)).one()
        state: dict[str, Any] = session.scalars(select(Run.state_json).where(Run.id == run_id)).one()
    return types[types.index("run.resumed") + 1 :], execution, load_state(state, []).announced


@contextmanager
def _commits() -> Iterator[list[int]]:
    counted = [0]

    def commit(conn: Any) -> None:
        counted[0] += 1

    event.listen(Engine, "commit", commit)
    try:
        yield counted
    finally:
        event.remove(Engine, "commit", commit)


def test_an_approved_calls_start_commits_with_its_executing_mark(runtime: Runtime) -> None:
    persistence, state, approval_id = _approved_and_claimed(runtime)
    run_id = persistence.run_id
    with _commits() as commits:
        persistence.tool_started(CALL, state)
        assert _logged(runtime, run_id) == ([], "not_started", [])  # nothing yet: it waits for the mark
        persistence.execution_started(str(approval_id))
    assert commits == [1]
    assert _logged(runtime, run_id) == (["tool.started"], "executing", [CALL.id])


def test_an_approved_call_answered_without_running_has_its_start_written_before_its_result(runtime: Runtime) -> None:
    persistence, state, _ = _approved_and_claimed(runtime)
    persistence.tool_started(CALL, state)
    with persistence.batch() as batch:
        result = batch.isolated(CALL, lambda: ToolResult(CALL.id, "the edit no longer fits", is_error=True))
        assert result.is_error
        assert _logged(runtime, persistence.run_id) == (["tool.started"], "not_started", [CALL.id])


def test_a_call_without_a_decision_announces_itself_at_once(runtime: Runtime) -> None:
    persistence, state, _ = _approved_and_claimed(runtime)
    other = ToolCall("o", "read_file", {"file_path": "/memories/x"})
    state.announced.append(other.id)
    persistence.tool_started(other, state)
    assert _logged(runtime, persistence.run_id) == (["tool.started"], "not_started", [CALL.id, other.id])
