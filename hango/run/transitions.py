"""The run state machine: the one writer of ``runs.state`` and of the fields that move with it.

======================  ==================================  ===============  =====================================
transition              from → to                           made by          guard
======================  ==================================  ===============  =====================================
``claim``               queued → running                    worker           the run is ``queued``
``resume``              queued → running (was suspended)    worker           the run is ``queued``
``suspend``             running → awaiting_approval         worker           this worker's lease
``requeue_decided``     awaiting_approval → queued          API              the row lock; every call decided
``decided_waiting``     awaiting_approval (stays)           API              the row lock; calls still pending
``finish``              running → succeeded | failed        worker           this worker's lease
``cancel``              queued | running | awaiting → cancelled   API        not finished
``expire``              awaiting_approval → failed          beat (sweeper)   still waiting, an approval stale
``reject_expired``      awaiting_approval → queued | stays  beat (sweeper)   the row lock; a ``reject`` deadline
``escalate``            awaiting_approval (stays)           beat (sweeper)   the row lock; an ``escalate`` deadline
``reclaim_lost``        running → queued | failed           beat (reconciler)  the lease expired
``give_back``           running → queued                    worker           this worker's lease
``requeue_waiting``     queued (new generation)             beat (reconciler)  the row lock; still queued
======================  ==================================  ===============  =====================================

Each transition is one conditional ``UPDATE … RETURNING`` (:func:`hango.store.runs.move`): the guard is part of
the statement, so two processes racing for the same transition get one winner and one ``None``, whatever the
interleaving. The transition appends its events (and writes its rows) in the caller's unit of work, which
publishes them after commit. A claim moves only the oldest active run of a thread, and every transition that ends a
thread's run enqueues the thread's next one (:mod:`hango.run.threads`). Companion fields — the lease,
``awaiting_since``, ``finished_at``, ``error``, ``queue_generation``, ``attempts`` — are written here and nowhere
else; so is the lease's heartbeat.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from sqlalchemy import DateTime, Numeric, Text, bindparam, case, cast, func, literal
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Session

from hango.agent.loop import RunStopped
from hango.kernel.config import parse_duration
from hango.kernel.errors import Conflict, NotAwaitingApproval
from hango.kernel.models import TERMINAL_RUN_STATES, PendingApproval, Run, RunState
from hango.platform.work import Work
from hango.run import standing, threads
from hango.store import approvals as approval_store
from hango.store import runs as store
from hango.store.runs import Add, RunCounters

QUEUED: tuple[RunState, ...] = ("queued",)
RUNNING: tuple[RunState, ...] = ("running",)
AWAITING: tuple[RunState, ...] = ("awaiting_approval",)
CANCELLABLE: tuple[RunState, ...] = ("queued", "running", "awaiting_approval")
# Where a suspension's start is kept until the run is claimed again (the loop state's private area).
SUSPENDED_AT = ("private", "suspended_at")
# How many times in a row the run was given back (kept in the loop state's private area, which the loop's next
# write of its state replaces: progress resets the count).
GIVEN_BACK = "given_back"
Reclaimed = Literal["requeued", "failed"]


class Carried(Protocol):
    """A worker's write that rides in a transition's own statement: the turn that asked for a suspension, or a
    run's last turn (:class:`hango.run.persistence.NewMessages`)."""

    def values(self) -> dict[str, Any]:
        """The run's fields it moves (the transition's own fields win)."""
        ...

    def event_count(self) -> int:
        """How many event numbers it takes, before the transition's own events."""
        ...

    def insert(self, work: Work, run: RunCounters) -> list[tuple[str, dict[str, Any]]]:
        """Write its rows, given the row the statement returned; its events."""
        ...


@dataclass(frozen=True)
class Lease:
    """Which worker holds which run."""

    run_id: uuid.UUID
    owner: str


# The claim's computed fields, built once; the claim's time is bound as ``claimed_at``.
_CLAIMED_AT = bindparam("claimed_at", type_=DateTime(timezone=True))
_SUSPENSION_STARTED = cast(Run.state_json[SUSPENDED_AT].astext, DateTime(timezone=True))
_WAITED = func.round(cast(func.extract("epoch", _CLAIMED_AT - _SUSPENSION_STARTED), Numeric), 3)
# A resumed run's stored trace context gains how long it waited; the suspension's start leaves the state.
_RESUMED_CONTEXT = store.Sql(
    case(
        (
            _SUSPENSION_STARTED.is_not(None),
            func.coalesce(Run.trace_context, cast(literal("{}"), JSONB)).op("||")(
                func.jsonb_build_object("suspension_seconds", _WAITED)
            ),
        ),
        else_=None,
    )
)
_FIRST_STARTED = store.Sql(func.coalesce(Run.started_at, _CLAIMED_AT))
_UNSUSPENDED = store.Sql(Run.state_json.op("#-")(cast(literal(list(SUSPENDED_AT)), ARRAY(Text))))


def claim(work: Work, run_id: uuid.UUID, owner: str, lease: timedelta) -> Run | None:
    """``claim`` or ``resume``: move a queued run to ``running`` under a fresh lease, in one statement.

    A run that was suspended gets ``run.resumed`` with how long it waited (the suspension's start leaves the
    state); any other gets ``run.started``. ``None`` when the run is not queued (a duplicate delivery), or when an
    earlier run of its thread is still active (that run's end enqueues it again).
    """
    now = datetime.now(UTC)
    values = {
        "state": "running",
        "lease_owner": owner,
        "lease_expires_at": now + lease,
        "started_at": _FIRST_STARTED,
        "updated_at": now,
        "trace_context": _RESUMED_CONTEXT,
        "state_json": _UNSUSPENDED,
    }
    run = store.move(work.session, run_id, QUEUED, values, events=1, bound={"claimed_at": now}, first_of_thread=True)
    if run is None:
        return None
    if run.trace_context and "suspension_seconds" in run.trace_context:
        seconds = float(run.trace_context["suspension_seconds"])
        work.numbered(run, [("run.resumed", {"suspension_seconds": seconds})])
    else:
        work.numbered(run, [("run.started", {"attempt": run.attempts + 1})])
    return run


def extend_lease(session: Session, lease: Lease, duration: timedelta) -> bool:
    """The heartbeat: push this worker's lease out by ``duration``; ``False`` when the run is no longer its own."""
    values: dict[str, Any] = {"lease_expires_at": func.now() + duration}
    return store.move(session, lease.run_id, RUNNING, values, owner=lease.owner) is not None


def suspend(
    work: Work,
    lease: Lease,
    approvals: Sequence[PendingApproval],
    state_json: dict[str, Any],
    trace_context: dict[str, Any] | None,
    carried: Carried | None = None,
) -> RunCounters:
    """``running → awaiting_approval``: store the batch's approvals and the loop state, release the lease; with
    ``carried``, the turn that asked for the batch in the same statement.

    Raises:
        RunStopped: when this worker no longer holds the run (cancelled, or reclaimed after a lost lease).
    """
    now = datetime.now(UTC)
    private = {**state_json.get("private", {}), SUSPENDED_AT[1]: now.isoformat()}
    values: dict[str, Any] = {
        "state": "awaiting_approval",
        "awaiting_since": now,
        "updated_at": now,
        "state_json": {**state_json, "private": private},
        "lease_owner": None,
        "lease_expires_at": None,
    }
    if trace_context is not None:
        values["trace_context"] = trace_context
    for row in approvals:  # what the stored rows will hold, for the approval stream's events
        if row.expires_at is not None and row.created_at is not None:
            # A rule's deadline counts from the creation time stored, not from when the row was built.
            row.expires_at = now + (row.expires_at - row.created_at)
        row.created_at = now
    # A call a standing approval covers is stored decided: it waits with the batch, for nobody.
    pending = [row for row in approvals if row.state == "pending"]
    events = [("approval.requested", approval_store.requested_event(row)) for row in pending]
    events += standing.decided_events(approvals)
    events.append(("run.awaiting_approval", {"pending": [str(row.id) for row in pending]}))
    run = _held(work, lease, values, events, carried)
    approval_store.insert_pending(work.session, approvals)
    for row in approvals:  # what the insert's trigger stores too
        row.run_creator, row.thread_id = run.created_by, run.thread_id
    work.approvals("approval.requested", pending)
    return run


def requeue_decided(work: Work, run: Run, decided: Sequence[PendingApproval]) -> Run:
    """``awaiting_approval → queued`` once every pending call is decided; enqueued after commit.

    Raises:
        NotAwaitingApproval: the run left ``awaiting_approval`` meanwhile (expired, cancelled, decided).
    """
    events = [("approval.decided", approval_store.decided_event(row)) for row in decided]
    moved = _requeue(work, run, events, "approvals decided")
    work.approvals("approval.decided", decided)
    return moved


def _requeue(work: Work, run: Run, events: Events, reason: str) -> Run:
    """``awaiting_approval → queued`` with ``events`` before ``run.queued``; enqueued after commit."""
    values: dict[str, Any] = {
        "state": "queued",
        "awaiting_since": None,
        "updated_at": datetime.now(UTC),
        "queue_generation": Add(1),
    }
    moved = _move(work, run.id, AWAITING, values, [*events, ("run.queued", {"reason": reason})])
    if moved is None:
        raise NotAwaitingApproval(f"run {run.id} is {run.state}, not awaiting approval")
    work.enqueue_after_commit(moved)
    return moved


def reject_expired(work: Work, run: Run, rows: Sequence[PendingApproval]) -> Run | None:
    """Calls whose ``reject`` deadline passed: ``expired``, each answered with an error result when the run resumes;
    the run is queued (returned) once nothing of its batch waits, and keeps waiting otherwise. The caller holds the
    run's row lock and has checked that it is ``awaiting_approval``."""
    for row in rows:
        row.state, row.expiry_action = "expired", "reject"
    work.session.flush()
    events: Events = [("approval.expired", approval_store.expired_event(row)) for row in rows]
    work.approvals("approval.expired", rows)
    if approval_store.still_pending(work.session, run):
        for type_, data in events:
            work.emit(run, type_, data)
        return None
    return _requeue(work, run, events, "approvals expired")


def escalate(work: Work, run: Run, rows: Sequence[PendingApproval], now: datetime) -> None:
    """Calls whose ``escalate`` deadline passed the first time: they stay pending, with the escalation's reviewers
    and a second deadline (which fails the run). The caller holds the run's row lock."""
    for row in rows:
        escalation = row.on_expiry
        row.reviewers = dict(escalation["escalate"])
        row.expires_at = now + parse_duration(escalation["ttl"])
        row.escalated_at = now
        row.reminded_at = None  # the new reviewers are reminded before the new deadline
    work.session.flush()
    for row in rows:
        work.emit(run, "approval.escalated", approval_store.escalated_event(row))
    work.approvals("approval.escalated", rows)


def decided_waiting(work: Work, run: Run, decided: Sequence[PendingApproval]) -> None:
    """Calls decided while the run keeps waiting for others of its batch (their reviewers', or a quorum's): their
    ``approval.decided`` events, and no transition. The caller holds the run's row lock and has checked that it is
    ``awaiting_approval``."""
    for row in decided:
        work.emit(run, "approval.decided", approval_store.decided_event(row))
    work.approvals("approval.decided", decided)


def finish(
    work: Work,
    lease: Lease,
    state: Literal["succeeded", "failed"],
    error: str | None,
    carried: Carried | None = None,
) -> RunCounters:
    """``running → succeeded | failed`` under this worker's lease; with ``carried``, the run's last turn in the
    same statement.

    Raises:
        RunStopped: when this worker no longer holds the run.
    """
    values, finished = _ended(state, error)
    return _held(work, lease, values, [finished], carried)


def cancel(work: Work, run: Run) -> Run:
    """``queued | running | awaiting_approval → cancelled``; a suspended run's approvals leave the queue with it.

    A running loop notices at its next step (its fenced writes find the run no longer its own).

    Raises:
        Conflict: the run has already finished.
    """
    values, finished = _ended("cancelled", None)
    moved = _move(work, run.id, CANCELLABLE, values, [finished])
    if moved is None:
        raise Conflict(f"run {run.id} is already {run.state}")
    # Closed as cancelled, not reported as expiries.
    work.approvals("approval.cancelled", approval_store.close_pending(work.session, moved, "cancelled"))
    return moved


def expire(work: Work, run: Run, error: str) -> list[PendingApproval] | None:
    """``awaiting_approval → failed`` for an approval that outlived its deadline; returns the approvals closed.

    ``None`` when the run is no longer waiting: a decision or a cancel won.
    """
    values, finished = _ended("failed", error)
    moved = _move(work, run.id, AWAITING, values, [finished])
    if moved is None:
        return None
    expired = approval_store.close_pending(work.session, moved, "expired")
    work.approvals("approval.expired", expired)
    return expired


def reclaim_lost(work: Work, run: Run, max_attempts: int) -> Reclaimed | None:
    """``running → queued`` under a new generation when its worker's lease expired — or ``running → failed`` once
    the run has lost ``max_attempts`` workers. ``None`` when the lease was renewed or the run moved meanwhile."""
    now = datetime.now(UTC)
    attempts = run.attempts + 1
    if attempts >= max_attempts:
        failed, finished = _ended("failed", f"the worker running this run was lost {attempts} times")
        failed["attempts"] = attempts
        if _move(work, run.id, RUNNING, failed, [finished], lease_expired_before=now) is None:
            return None
        return "failed"
    released: dict[str, Any] = {"attempts": attempts, "lease_owner": None, "lease_expires_at": None, "updated_at": now}
    queued = {**released, "state": "queued", "queue_generation": Add(1)}
    requeued = ("run.queued", {"reason": "worker lost", "attempt": attempts + 1})
    moved = _move(work, run.id, RUNNING, queued, [requeued], lease_expired_before=now)
    if moved is None:
        return None
    work.enqueue_after_commit(moved)
    return "requeued"


def give_back(work: Work, lease: Lease, most: int) -> Reclaimed | None:
    """``running → queued`` under a new generation, by the worker that holds the run: the database failed it for a
    moment (:func:`hango.platform.db.is_transient`), so it is re-driven from what is stored. Not a lost worker:
    ``attempts``
    stays. The loop state counts the give-backs since the loop last stored its state; one more than ``most`` in a
    row fails the run instead (a statement that always times out must not loop forever). ``None`` when the run is
    no longer this worker's (cancelled, or reclaimed meanwhile)."""
    run = store.lock_run(work.session, lease.run_id)
    if run is None or run.state != "running" or run.lease_owner != lease.owner:
        return None
    private = dict((run.state_json or {}).get("private") or {})
    given = int(private.get(GIVEN_BACK, 0)) + 1
    if given > most:
        failed, finished = _ended("failed", f"the database failed this run {given} times in a row (see the worker log)")
        return "failed" if _move(work, run.id, RUNNING, failed, [finished], owner=lease.owner) else None
    values: dict[str, Any] = {
        "state": "queued",
        "lease_owner": None,
        "lease_expires_at": None,
        "updated_at": datetime.now(UTC),
        "queue_generation": Add(1),
        "state_json": {**(run.state_json or {}), "private": {**private, GIVEN_BACK: given}},
    }
    queued = ("run.queued", {"reason": "transient database error"})
    moved = _move(work, run.id, RUNNING, values, [queued], owner=lease.owner)
    if moved is None:
        return None
    work.enqueue_after_commit(moved)
    return "requeued"


def requeue_waiting(work: Work, run: Run) -> Run | None:
    """A ``queued`` run whose message may be lost gets a new generation, enqueued after commit: a new task id and
    dedup key, so its enqueue is not swallowed by the dedup of the lost one. A message of the old generation that
    does arrive claims the run first, and the new one finds it claimed. The caller holds the run's row lock;
    ``None`` when the run left ``queued`` before that."""
    values: dict[str, Any] = {"updated_at": datetime.now(UTC), "queue_generation": Add(1)}
    moved = store.move(work.session, run.id, QUEUED, values)
    if moved is not None:
        work.enqueue_after_commit(moved)
    return moved


Events = list[tuple[str, dict[str, Any]]]


def _ended(state: RunState, error: str | None) -> tuple[dict[str, Any], tuple[str, dict[str, Any]]]:
    """The fields of a terminal transition (nothing waits, nobody holds the run) and its ``run.finished`` event."""
    now = datetime.now(UTC)
    values = {
        "state": state,
        "error": error,
        "finished_at": now,
        "updated_at": now,
        "awaiting_since": None,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    return values, ("run.finished", {"state": state, "error": error})


def _move(
    work: Work,
    run_id: uuid.UUID,
    source: tuple[RunState, ...],
    values: dict[str, Any],
    events: Events,
    **guards: Any,
) -> Run | None:
    """The conditional update, numbering the transition's events in the same statement."""
    run = store.move(work.session, run_id, source, values, events=len(events), **guards)
    if run is not None:
        work.numbered(run, events)
        if values.get("state") in TERMINAL_RUN_STATES:
            threads.after_ended(work, run)
    return run


def _held(
    work: Work, lease: Lease, values: dict[str, Any], events: Events, carried: Carried | None = None
) -> RunCounters:
    """A transition of a run this worker holds, with what ``carried`` writes in the same statement."""
    if carried is not None:
        values = {**carried.values(), **values}
    taken = len(events) + (carried.event_count() if carried is not None else 0)
    run = store.advance(work.session, lease.run_id, lease.owner, values, events=taken)
    if run is None:
        raise RunStopped(f"run {lease.run_id} is no longer running under this worker")
    work.numbered(run, [*(carried.insert(work, run) if carried is not None else []), *events])
    if values.get("state") in TERMINAL_RUN_STATES:
        threads.after_ended(work, run)
    return run
