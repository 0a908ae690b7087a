"""Executing one run on a worker: claim, heartbeat, drive the loop, finish. Holds nothing once it returns."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Literal

from opentelemetry.trace import SpanContext
from sqlalchemy import func, select, update

from hango.agent.loop import RunStopped
from hango.agent.state import AwaitingApproval, Cancelled, Done, Failed, LoopState, Outcome, dump_state, load_private
from hango.errors import HangoError
from hango.logs import run_logging
from hango.models import PendingApproval, Run
from hango.run.persistence import Lease, locked_active_run
from hango.run.runtime import Runtime, unit_of_work
from hango.run.subagents import Loops, LoopSpec
from hango.store import approvals as approval_store

log = logging.getLogger(__name__)
Execution = Literal["skipped", "finished", "stopped", "suspended"]
SUSPENDED_AT = "suspended_at"


def worker_identity() -> str:
    """A lease owner name unique to this process and execution."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claim_run(runtime: Runtime, run_id: uuid.UUID, owner: str) -> Run | None:
    """Move the run ``queued → running`` under a fresh lease; ``None`` when it is not queued (a duplicate)."""
    lease = runtime.settings.run_lease
    with unit_of_work(runtime) as work:
        run = work.session.scalar(select(Run).where(Run.id == run_id, Run.state == "queued").with_for_update())
        if run is None:
            return None
        now = datetime.now(UTC)
        run.state = "running"
        run.lease_owner = owner
        run.lease_expires_at = now + lease
        run.started_at = run.started_at or now
        run.updated_at = now
        private = load_private(run.state_json)
        suspended_at = private.pop(SUSPENDED_AT, None)
        if suspended_at is None:
            run.trace_context = None
            work.emit(run, "run.started", {"attempt": run.attempts + 1})
        else:
            run.state_json = {**run.state_json, "private": private}
            waited = round((now - datetime.fromisoformat(suspended_at)).total_seconds(), 3)
            run.trace_context = {**(run.trace_context or {}), "suspension_seconds": waited}
            work.emit(run, "run.resumed", {"suspension_seconds": waited})
    return run


def execute_run(runtime: Runtime, run_id: uuid.UUID, owner: str | None = None) -> Execution:
    """Claim and drive a run until it finishes, suspends or stops; a duplicate delivery does nothing.

    Every line logged meanwhile, in this thread, carries the run's id (:func:`hango.logs.run_logging`).
    """
    with run_logging(run_id):
        return _execute(runtime, run_id, owner or worker_identity())


def _execute(runtime: Runtime, run_id: uuid.UUID, owner: str) -> Execution:
    run = claim_run(runtime, run_id, owner)
    if run is None:
        log.info("run not claimable; skipping", extra={"run_id": str(run_id)})
        return "skipped"
    lease = Lease(run.id, owner)
    stop = threading.Event()
    log.info("run claimed", extra={"run_id": str(run.id), "tenant_id": str(run.tenant_id)})
    loops = Loops(runtime, run, lease, stop)
    with _heartbeat(runtime, lease, stop):
        try:
            outcome, state = loops.drive(LoopSpec.of_agent(run.agent_snapshot), None, depth=0)
        except RunStopped:
            log.info("run stopped (cancelled or lease lost)", extra={"run_id": str(run.id)})
            return "stopped"
        except Exception as exc:  # the worker boundary: record why the run failed, then keep serving
            outcome, state = unexpected_failure(exc, run.id), None
    if isinstance(outcome, AwaitingApproval) and state is not None:
        return _suspend(runtime, lease, outcome, state, loops.span_context)
    return _finish(runtime, lease, outcome)


def unexpected_failure(exc: Exception, run_id: uuid.UUID) -> Failed:
    """The public outcome of an exception that escaped the loop; its full text goes to the log only.

    hango's own errors carry messages written for users. Anything else may hold internals — a SQLAlchemy error's
    text has the SQL and its parameters, which can be another call's data — so the run's ``error`` gets a reference
    to the log line instead.
    """
    if isinstance(exc, HangoError):
        log.warning("run failed: %s", exc, extra={"run_id": str(run_id)})
        return Failed(str(exc))
    reference = uuid.uuid4().hex[:12]
    log.exception(
        "run failed unexpectedly (reference %s)", reference, extra={"run_id": str(run_id), "error_reference": reference}
    )
    return Failed(f"internal error (see the worker log, reference {reference})")


def _suspend(
    runtime: Runtime, lease: Lease, outcome: AwaitingApproval, state: LoopState, span: SpanContext | None
) -> Execution:
    """Persist the batch's pending approvals, the state and the ``awaiting_approval`` transition in one transaction."""
    try:
        with unit_of_work(runtime) as work:
            run = locked_active_run(work.session, lease)
            now = datetime.now(UTC)
            rows = [
                PendingApproval(
                    id=uuid.uuid4(),
                    tenant_id=run.tenant_id,
                    run_id=run.id,
                    turn=run.turn,
                    tool_call_id=pending.call.id,
                    tool_name=pending.call.name,
                    arguments=pending.call.input,
                    allowed_decisions=list(pending.allowed_decisions),
                    subagent_call_id=pending.subagent_call_id,
                )
                for pending in outcome.pending
            ]
            work.session.add_all(rows)
            work.session.flush()
            run.state_json = dump_state(state) | {"private": {**state.private, SUSPENDED_AT: now.isoformat()}}
            run.state, run.awaiting_since, run.updated_at = "awaiting_approval", now, now
            if span is not None and span.is_valid:
                # What the resumed trace links back to.
                run.trace_context = {"trace_id": format(span.trace_id, "032x"), "span_id": format(span.span_id, "016x")}
            run.lease_owner, run.lease_expires_at = None, None
            for row in rows:
                work.emit(run, "approval.requested", approval_store.requested_event(row))
            work.emit(run, "run.awaiting_approval", {"pending": [str(row.id) for row in rows]})
    except RunStopped:
        return "stopped"
    for row in rows:
        log.info(
            "approval requested",
            extra={
                "run_id": str(row.run_id),
                "tool": row.tool_name,
                "tool_call_id": row.tool_call_id,
                "approval_id": str(row.id),
            },
        )
    return "suspended"


def _finish(runtime: Runtime, lease: Lease, outcome: Outcome) -> Execution:
    if isinstance(outcome, Cancelled | AwaitingApproval):
        return "stopped"
    state, error = ("succeeded", None) if isinstance(outcome, Done) else ("failed", outcome.error)
    try:
        with unit_of_work(runtime) as work:
            run = locked_active_run(work.session, lease)
            now = datetime.now(UTC)
            run.state, run.error, run.finished_at, run.updated_at = state, error, now, now
            run.lease_owner, run.lease_expires_at = None, None
            work.emit(run, "run.finished", {"state": state, "error": error})
    except RunStopped:
        return "stopped"
    log.info("run finished", extra={"run_id": str(lease.run_id), "state": state, "error": error})
    return "finished"


@contextmanager
def _heartbeat(runtime: Runtime, lease: Lease, stop: threading.Event) -> Iterator[None]:
    """Extend the lease every interval; when it cannot (the run was taken away), set ``stop``."""
    done = threading.Event()
    interval = runtime.settings.run_heartbeat_interval.total_seconds()

    def beat() -> None:
        while not done.wait(interval):
            try:
                if not _extend_lease(runtime, lease):
                    stop.set()
                    return
            except Exception:  # a missed beat is survivable; the next one may succeed before the lease ends
                log.warning("heartbeat failed", extra={"run_id": str(lease.run_id)}, exc_info=True)

    thread = threading.Thread(target=beat, name=f"heartbeat-{lease.run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _extend_lease(runtime: Runtime, lease: Lease) -> bool:
    with runtime.db.transaction() as session:
        extended = session.execute(
            update(Run)
            .where(Run.id == lease.run_id, Run.state == "running", Run.lease_owner == lease.owner)
            .values(lease_expires_at=func.now() + runtime.settings.run_lease)
            .returning(Run.id)
        ).first()
    return extended is not None
