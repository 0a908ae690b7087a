"""The loop's persistence on PostgreSQL for one claimed run, fenced by the worker's lease.

Every write locks the run row and checks that the run is still ``running`` under this worker's lease; a run
cancelled through the API, or reclaimed by the reconciler after this worker was presumed dead, stops the loop at
its next write with :class:`RunStopped` and nothing more is written.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hango.agent.files import FileSystem
from hango.agent.loop import RunStopped
from hango.agent.messages import Message, ToolCall, ToolResult, Usage
from hango.agent.state import Decision, GrantLookup, LoopState, PendingCall, StandingApproval, dump_state
from hango.agent.tools.base import ToolTimeout
from hango.kernel.models import Run
from hango.platform.db import is_transient
from hango.platform.runtime import Runtime
from hango.platform.work import Work, unit_of_work
from hango.run import standing
from hango.run.transitions import Lease
from hango.store import approvals as approval_store
from hango.store import runs as run_store
from hango.store import subagent_calls as subagent_store
from hango.store.audit import insert_audit_events
from hango.store.files import run_files
from hango.store.messages import insert_messages, message_json, to_message
from hango.store.runs import Add, RunCounters
from hango.store.tenants import allows_self_approval

log = logging.getLogger(__name__)


def locked_active_run(session: Session, lease: Lease) -> Run:
    """The run row, locked, if this worker still holds it running; otherwise :class:`RunStopped`."""
    run = run_store.lock_run(session, lease.run_id)
    if run is None or run.state != "running" or run.lease_owner != lease.owner:
        raise RunStopped(f"run {lease.run_id} is no longer running under this worker")
    return run


def write_messages(
    work: Work,
    lease: Lease,
    messages: list[Message],
    state: LoopState,
    subagent_call_id: uuid.UUID | None = None,
    *,
    usage: Usage | None = None,
    events: Sequence[tuple[str, dict[str, Any]]] = (),
) -> list[Message]:
    """Append messages with their ``message.created`` events (after ``events``) and store the loop state.

    One fenced statement reserves the messages' sequence numbers and writes the run's counters and state — and
    raises :class:`RunStopped` when this worker no longer holds the run — then one inserts the messages.
    """
    new = NewMessages(messages, state, subagent_call_id, usage, events)
    run = fenced(work, lease, new.values(), events=new.event_count())
    work.numbered(run, new.insert(work, run))
    return new.stored


@dataclass
class NewMessages:
    """Messages appended by one fenced statement of the run's row: the counters and loop state it writes, and, once
    it numbered them, the messages' rows and their ``message.created`` events (after ``events``).

    It is a :class:`~hango.run.transitions.Carried` write too: a transition's own statement can take it, so the
    turn that ends a run or asks for a suspension commits in that one statement.
    """

    messages: list[Message]
    state: LoopState
    subagent_call_id: uuid.UUID | None = None
    usage: Usage | None = None
    events: Sequence[tuple[str, dict[str, Any]]] = ()
    stored: list[Message] = field(default_factory=list)

    def values(self) -> dict[str, Any]:
        """The run's fields this write moves."""
        values: dict[str, Any] = {"message_seq": Add(len(self.messages)), "updated_at": datetime.now(UTC)}
        if self.subagent_call_id is None:
            values["state_json"] = dump_state(self.state)
            values["turn"] = Add(sum(1 for message in self.messages if message.role == "assistant"))
        if self.usage is not None:
            values["input_tokens"] = Add(self.usage.input_tokens)
            values["output_tokens"] = Add(self.usage.output_tokens)
        return values

    def event_count(self) -> int:
        """How many event numbers the write takes."""
        return len(self.events) + len(self.messages)

    def insert(self, work: Work, run: RunCounters) -> list[tuple[str, dict[str, Any]]]:
        """Insert the messages under the numbers ``run`` (the row the statement returned) reserved; their events."""
        first = run.message_seq - len(self.messages) + 1
        rows = insert_messages(work.session, run, self.messages, self.subagent_call_id, first, run.thread_id)
        if self.subagent_call_id is not None:
            subagent_store.save_state(work.session, run.id, self.subagent_call_id, dump_state(self.state))
        self.stored = [to_message(row) for row in rows]
        return [*self.events, *(("message.created", message_json(row)) for row in rows)]


def fenced(work: Work, lease: Lease, values: dict[str, Any], *, events: int = 0) -> RunCounters:
    """Write a running run's row under this worker's lease (taking ``events`` event numbers with it).

    Raises:
        RunStopped: the run is no longer running under this worker.
    """
    run = run_store.advance(work.session, lease.run_id, lease.owner, values, events=events)
    if run is None:
        raise RunStopped(f"run {lease.run_id} is no longer running under this worker")
    return run


def _finished_event(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    """The data of a call's ``tool.finished``."""
    return {"tool_call_id": call.id, "tool_name": call.name, "is_error": result.is_error}


@dataclass(frozen=True)
class _Announcement:
    """An approved call's ``tool.started`` and the loop's state that names it announced (stored as it was then),
    waiting to commit with the call's ``executing`` mark."""

    call: ToolCall
    approval_id: str
    state_json: dict[str, Any]


@dataclass
class _Batch:
    """A tool batch's transaction; finished-call events wait until the results are written under the lock."""

    work: Work
    lease: Lease
    tenant_id: uuid.UUID
    files: FileSystem
    subagent_call_id: uuid.UUID | None
    # Writes an approved call's announcement that its executing mark did not take along.
    announce_waiting: Callable[[], None]
    finished: list[dict[str, Any]] = field(default_factory=list)

    def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        self.finished.append(_finished_event(call, result))

    def isolated(self, call: ToolCall, run: Callable[[], ToolResult], *, delegates: bool = False) -> ToolResult:
        result = self._isolated(call, run, delegates)
        # An approved call the chain answered without running it (its edit no longer fits, its outcome is unknown)
        # has its start written now, before its batch's results.
        self.announce_waiting()
        return result

    def _isolated(self, call: ToolCall, run: Callable[[], ToolResult], delegates: bool) -> ToolResult:
        try:
            with nullcontext() if delegates else self.work.session.begin_nested():
                return run()
        except SQLAlchemyError as exc:
            if is_transient(exc):  # the database's moment, not the call's: the whole batch is given back and re-driven
                raise
            log.exception("tool call failed in storage", extra={"tool": call.name, "tool_call_id": call.id})
            return ToolResult(call.id, f"{call.name} failed: the storage operation was refused", is_error=True)
        except ToolTimeout as exc:
            # The savepoint is rolled back: nothing half-done by the stopped call survives.
            log.warning("tool call timed out", extra={"tool": call.name, "tool_call_id": call.id})
            return ToolResult(call.id, str(exc), is_error=True)

    def append(self, messages: list[Message], state: LoopState) -> list[Message]:
        finished = [("tool.finished", data) for data in self.finished]
        stored = write_messages(self.work, self.lease, messages, state, self.subagent_call_id, events=finished)
        if state.executions:
            # The approved calls' ends commit with their results: a call is ``done`` exactly when its result is.
            session, run_id = self.work.session, self.lease.run_id
            approval_store.record_executions(session, self.tenant_id, run_id, state.executions)
            state.executions.clear()
        return stored


class RunPersistence:
    """Implements the loop's port and the middlewares' services for one loop of a run: the run's own loop, or a
    subagent's (``subagent_call_id``), whose messages carry the child's id and whose state lives in its row."""

    def __init__(
        self,
        runtime: Runtime,
        run: Run,
        lease: Lease,
        stop: threading.Event,
        *,
        subagent_call_id: uuid.UUID | None = None,
        extras: Mapping[str, Any] | None = None,
    ) -> None:
        self._runtime = runtime
        self._lease = lease
        self._stop = stop
        self.tenant_id = run.tenant_id
        self.agent_id = run.agent_id
        self.run_id = run.id
        self.run_creator = run.created_by
        self.thread_id = run.thread_id
        self.subagent_call_id = subagent_call_id
        self.extras: Mapping[str, Any] = extras or {}
        self._announcing: _Announcement | None = None

    def check_active(self) -> None:
        """Stop between steps once the heartbeat found the run no longer this worker's (cancelled, or reclaimed).

        This reads no row: every write is fenced anyway, so a step taken after a cancel the heartbeat has not seen
        yet stores nothing and stops at its first write.
        """
        if self._stop.is_set():
            raise RunStopped(f"run {self.run_id} is no longer running under this worker")

    def append(
        self,
        messages: list[Message],
        state: LoopState,
        usage: Usage | None = None,
        *,
        finished: Sequence[tuple[ToolCall, ToolResult]] = (),
    ) -> list[Message]:
        """Persist messages and state in one fenced transaction, after a ``tool.finished`` for each of ``finished``."""
        events = [("tool.finished", _finished_event(call, result)) for call, result in finished]
        with unit_of_work(self._runtime) as work:
            return write_messages(work, self._lease, messages, state, self.subagent_call_id, usage=usage, events=events)

    def save_state(self, state: LoopState) -> None:
        """Store a child loop's state alone (a child suspending inside its parent's batch), fenced."""
        assert self.subagent_call_id is not None, "a run's own state is stored with its messages or its suspension"
        with unit_of_work(self._runtime) as work:
            self._fenced_with_state(work, state)

    def tool_started(self, call: ToolCall, state: LoopState) -> None:
        """Emit ``tool.started`` before the call runs, and store the loop's state that names the call announced, in
        one fenced transaction (a run no longer this worker's stops here): a re-driven batch then knows the event
        is in the log.

        A call approved by a human waits for its ``executing`` mark (:meth:`execution_started`, just before its
        tool runs), and the two commit together: one transaction instead of two. Should the chain answer the call
        without running it, its batch writes the announcement on its own (:meth:`_Batch.isolated`).
        """
        decision = state.decisions.get(call.id)
        if decision is not None and decision.kind in ("approve", "edit"):
            self._announcing = _Announcement(call, decision.approval_id, dump_state(state))
            return
        with unit_of_work(self._runtime) as work:
            self._write_announcement(work, call, dump_state(state))

    def _write_announcement(self, work: Work, call: ToolCall, state_json: dict[str, Any]) -> None:
        run = self._fenced_with_state(work, state_json, events=1)
        work.numbered(run, [("tool.started", {"tool_call_id": call.id, "tool_name": call.name})])

    def _announce_waiting(self, work: Work | None = None) -> None:
        """Write the announcement waiting for an executing mark, if any: in ``work``, or in a transaction of its
        own."""
        waiting, self._announcing = self._announcing, None
        if waiting is None:
            return
        if work is not None:
            self._write_announcement(work, waiting.call, waiting.state_json)
            return
        with unit_of_work(self._runtime) as own:
            self._write_announcement(own, waiting.call, waiting.state_json)

    def _fenced_with_state(self, work: Work, state: LoopState | dict[str, Any], *, events: int = 0) -> RunCounters:
        """The fenced write of the run's row that stores this loop's state (or its stored form) too: in that row for
        the run's own loop, in its ``subagent_calls`` row for a child's."""
        state_json = state if isinstance(state, dict) else dump_state(state)
        values: dict[str, Any] = {"updated_at": datetime.now(UTC)}
        if self.subagent_call_id is None:
            values["state_json"] = state_json
        run = fenced(work, self._lease, values, events=events)
        if self.subagent_call_id is not None:
            subagent_store.save_state(work.session, self.run_id, self.subagent_call_id, state_json)
        return run

    def standing_approval(self, lookup: GrantLookup) -> StandingApproval | None:
        """The live grant that approves this held call of the run's agent, if any: one indexed read. Without
        self-approval in the tenant, the run's creator's own grants do not apply to their run (one more read, only
        when such a grant is the one found)."""
        query = standing.GrantQuery(self.tenant_id, self.agent_id, self.run_id, lookup)
        with self._runtime.db.read() as session:
            grant = standing.live_grant(session, query, datetime.now(UTC))
            own = grant is not None and grant.created_by == self.run_creator
            if own and not allows_self_approval(session, self.tenant_id):
                grant = standing.live_grant(session, query, datetime.now(UTC), not_by=self.run_creator)
        return None if grant is None else StandingApproval(grant.id, grant.created_by)

    def record_granted(self, granted: Sequence[PendingCall], state: LoopState) -> dict[str, Decision]:
        """Store calls standing approvals cover as decided approvals (audited ``approval.auto_approve``), with the
        loop's state that holds their batch, in one fenced transaction; their decisions by call id.

        Raises:
            GrantWithdrawn: a grant was revoked or expired since the loop found it; nothing was stored.
        """
        rows = standing.approval_rows(
            self.tenant_id, self.run_id, state.turn, granted, datetime.now(UTC), self.subagent_call_id
        )
        events = standing.decided_events(rows)
        with unit_of_work(self._runtime) as work:
            run = self._fenced_with_state(work, state, events=len(events))
            if standing.confirm(work.session, rows, datetime.now(UTC)):
                raise standing.GrantWithdrawn("a grant was revoked while the loop used it; the batch is reviewed again")
            approval_store.insert_pending(work.session, rows)
            insert_audit_events(work.session, standing.audit(rows))
            work.numbered(run, events)
        return standing.decisions(rows)

    def execution_started(self, approval_id: str) -> None:
        """Commit an approved call's ``executing`` mark before its tool starts (fenced: a run no longer this
        worker's stops here, and its call does not run), with the call's announcement when it waits for it."""
        if self._announcing is not None and self._announcing.approval_id != approval_id:
            self._announce_waiting()  # another call's: not expected, but its start must not be lost
        with unit_of_work(self._runtime) as work:
            if self._announcing is not None:
                self._announce_waiting(work)
            else:
                fenced(work, self._lease, {"updated_at": datetime.now(UTC)})
            approval_store.mark_executing(work.session, self.tenant_id, self.run_id, uuid.UUID(approval_id))

    @contextmanager
    def batch(self) -> Iterator[_Batch]:
        """The batch's transaction: tools' file changes and the batch's results commit together or not at all."""
        with unit_of_work(self._runtime) as work:
            files = self._files(work.session)
            yield _Batch(work, self._lease, self.tenant_id, files, self.subagent_call_id, self._announce_waiting)

    @contextmanager
    def files(self) -> Iterator[FileSystem]:
        """A read view of the run's filesystem (reviews and the memory middleware read one file each), outside any
        transaction."""
        with self._runtime.db.read() as session:
            yield self._files(session)

    def _files(self, session: Session) -> FileSystem:
        return run_files(session, self.tenant_id, self.agent_id, self.run_id, self.thread_id)
