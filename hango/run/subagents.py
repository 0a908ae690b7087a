"""Subagents: the child loops of ``task`` calls, durable under ``subagent_calls`` rows.

A child is a loop of its own — its model, prompt, tools and middleware stack — whose messages are stored with
the run's (one sequence per run) under the child's ``subagent_call_id``, and whose private state lives in its row.
Calling ``task`` again with the same call id (a parent resuming after a suspension or a crash) never starts the
child over: a finished child returns its stored result, an unfinished one resumes where it stopped — decided
approvals loaded, its suspended batch re-driven, its own dangling calls repaired.

Inheritance: a declarative subagent uses the parent's ``interrupt_on`` (merged over the default rules) unless it
declares its own (``interrupt_on`` present and not null), which is merged over the defaults instead. The built-in
``general-purpose`` subagent inherits the parent's model, prompt, tools and rules.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

from hango.agent.loop import SuspendBatch
from hango.agent.messages import Message, text_block
from hango.agent.spec import AgentSpec, LoopSpec
from hango.agent.state import AwaitingApproval, Done, Failed, LoopState, Outcome, PendingCall
from hango.agent.tools.base import ToolError
from hango.agent.tools.task import GENERAL_PURPOSE
from hango.kernel.models import SubagentCall
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run.persistence import locked_active_run, write_messages
from hango.run.transitions import Lease
from hango.store import subagent_calls as subagent_store


class Driver(Protocol):
    """What a child needs of its run's loops (:class:`hango.run.loops.Loops`): the run's runtime, lease and typed
    snapshot, and a way to drive a loop."""

    runtime: Runtime
    lease: Lease
    agent: AgentSpec

    def drive(self, spec: LoopSpec, subagent_call_id: uuid.UUID | None, depth: int) -> tuple[Outcome, LoopState]:
        """Run (or resume) one loop of the run."""
        ...


class ChildRunner:
    """The ``task`` tool's engine inside one loop: it starts or resumes that loop's children."""

    def __init__(self, loops: Driver, parent: LoopSpec, parent_call_id: uuid.UUID | None, depth: int) -> None:
        self._loops = loops
        self._parent = parent
        self._parent_call_id = parent_call_id
        self._depth = depth

    def __call__(self, tool_call_id: str, subagent_type: str, description: str) -> str:
        """The child's final text; a waiting child suspends the caller's batch with its pending calls."""
        limit = self._loops.runtime.settings.max_subagent_depth
        if self._depth >= limit:
            raise ToolError(f"subagents may nest at most {limit} deep; do this work yourself")
        spec = self._spec(subagent_type)
        call = self._start(tool_call_id, subagent_type, description)
        if call.state == "succeeded":
            return call.result or ""
        if call.state == "failed":
            raise ToolError(f"subagent {subagent_type} failed: {call.result}")
        outcome, _ = self._loops.drive(spec, call.id, self._depth + 1)
        return self._settle(call, outcome)

    def _spec(self, subagent_type: str) -> LoopSpec:
        if subagent_type == GENERAL_PURPOSE:
            return replace(self._parent, replays_parent=True)
        declared = self._loops.agent.subagent(subagent_type)
        if declared is None:
            known = ", ".join(sorted([*(item.name for item in self._loops.agent.subagents), GENERAL_PURPOSE]))
            raise ToolError(f"unknown subagent_type {subagent_type!r}; use one of: {known}")
        return self._parent.of_subagent(declared)

    def _start(self, tool_call_id: str, subagent_type: str, description: str) -> SubagentCall:
        """The child's row: the existing one when this call ran before, else a new one with its first message."""
        with unit_of_work(self._loops.runtime) as work:
            run = locked_active_run(work.session, self._loops.lease)
            existing = subagent_store.of_tool_call(work.session, run.id, tool_call_id)
            if existing is not None:
                return existing
            call = SubagentCall(
                id=uuid.uuid4(),
                tenant_id=run.tenant_id,
                run_id=run.id,
                parent_subagent_call_id=self._parent_call_id,
                tool_call_id=tool_call_id,
                subagent_type=subagent_type,
                depth=self._depth + 1,
                state="running",
                state_json={},
            )
            work.session.add(call)
            work.session.flush()
            started = ("subagent.started", {"subagent_call_id": str(call.id), "subagent_type": subagent_type})
            first = Message(role="user", content=[text_block(description)])
            write_messages(work, self._loops.lease, [first], LoopState([first]), call.id, events=[started])
        return call

    def _settle(self, call: SubagentCall, outcome: Outcome) -> str:
        if isinstance(outcome, AwaitingApproval):
            raise SuspendBatch([_owned(pending, call.id) for pending in outcome.pending])
        if not isinstance(outcome, Done | Failed):
            raise ToolError("the subagent was stopped")
        failed = isinstance(outcome, Failed)
        result = outcome.error if isinstance(outcome, Failed) else outcome.text
        with unit_of_work(self._loops.runtime) as work:
            run = locked_active_run(work.session, self._loops.lease)
            row = subagent_store.lock(work.session, call.id)
            assert row is not None
            row.state, row.result, row.finished_at = ("failed" if failed else "succeeded"), result, datetime.now(UTC)
            work.emit(run, "subagent.finished", {"subagent_call_id": str(call.id), "is_error": failed})
        if failed:
            raise ToolError(f"subagent {call.subagent_type} failed: {result}")
        return result


def _owned(pending: PendingCall, subagent_call_id: uuid.UUID) -> PendingCall:
    # A grandchild's pending call already names its own loop; only calls of this child's loop get its id.
    if pending.subagent_call_id is not None:
        return pending
    return replace(pending, subagent_call_id=subagent_call_id)
