"""Executing one run on a worker: claim, heartbeat, drive the loop, finish. Holds nothing once it returns."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from opentelemetry.trace import SpanContext

from hango.agent.loop import RunStopped
from hango.agent.spec import AgentSpec, LoopSpec
from hango.agent.state import AwaitingApproval, Cancelled, Done, Failed, LoopState, Outcome, dump_state
from hango.kernel.errors import HangoError
from hango.kernel.logs import run_logging
from hango.kernel.models import PendingApproval, Run
from hango.kernel.telemetry import stored_context
from hango.platform.db import is_transient
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import standing, threads, transitions
from hango.run.loops import Loops, StoredLoop
from hango.run.persistence import NewMessages
from hango.run.transitions import Lease
from hango.store.audit import insert_audit_events

log = logging.getLogger(__name__)
Execution = Literal["skipped", "finished", "stopped", "suspended", "given_back"]


def worker_identity() -> str:
    """A lease owner name unique to this process and execution."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Claimed:
    """A run this worker now holds, with what its own loop resumes from (read in the claim's transaction)."""

    run: Run
    loop: StoredLoop
    call_ids: set[str]


def claim_run(runtime: Runtime, run_id: uuid.UUID, owner: str) -> Claimed | None:
    """Move the run ``queued → running`` under a fresh lease and read its loop's inputs, in one transaction;
    ``None`` when it is not queued (a duplicate delivery)."""
    with unit_of_work(runtime) as work:
        run = transitions.claim(work, run_id, owner, runtime.settings.run_lease)
        if run is None:
            return None
        thread = None
        if run.thread_id is not None:
            thread = threads.begin(work, run, AgentSpec.of_snapshot(run.agent_snapshot).history_window)
        return Claimed(run, *StoredLoop.of_run(work.session, run, thread))


def execute_run(runtime: Runtime, run_id: uuid.UUID, owner: str | None = None) -> Execution:
    """Claim and drive a run until it finishes, suspends or stops; a duplicate delivery does nothing.

    Every line logged meanwhile, in this thread, carries the run's id (:func:`hango.kernel.logs.run_logging`).
    """
    with run_logging(run_id):
        return _execute(runtime, run_id, owner or worker_identity())


def _execute(runtime: Runtime, run_id: uuid.UUID, owner: str) -> Execution:
    claimed = claim_run(runtime, run_id, owner)
    if claimed is None:
        log.info("run not claimable; skipping", extra={"run_id": str(run_id)})
        return "skipped"
    run = claimed.run
    lease = Lease(run.id, owner)
    stop = threading.Event()
    log.info("run claimed", extra={"run_id": str(run.id), "tenant_id": str(run.tenant_id)})
    loops = Loops(runtime, run, lease, stop, claimed.call_ids)
    try:
        with _heartbeat(runtime, lease, stop):
            try:
                loops.pin()
                outcome, state = loops.drive(LoopSpec.of_agent(loops.agent), None, 0, claimed.loop)
            except RunStopped:
                log.info("run stopped (cancelled or lease lost)", extra={"run_id": str(run.id)})
                return "stopped"
            except Exception as exc:  # the worker boundary: record why the run failed, then keep serving
                if is_transient(exc):
                    raise
                outcome, state = unexpected_failure(exc, run.id), None
        if isinstance(outcome, AwaitingApproval) and state is not None:
            return _suspend(runtime, lease, outcome, _approvals(run, state, outcome), state, loops.span_context)
        return _finish(runtime, lease, outcome, state)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning(
            "the database failed the run for a moment; giving it back", extra={"run_id": str(run.id)}, exc_info=True
        )
        return give_back(runtime, lease)


def give_back(runtime: Runtime, lease: Lease) -> Execution:
    """Queue a run this worker holds again, without spending one of its attempts, after the database failed it for
    a moment (a dropped connection, a failover, a deadlock): it is re-driven from what is stored, on this worker or
    another; after ``HANGO_MAX_RUN_GIVE_BACKS`` in a row without progress, it fails. While the database stays
    unreachable this keeps trying, as long as the lease would have lasted; after that the reconciler reclaims the run
    like a lost worker's."""
    deadline = time.monotonic() + runtime.settings.run_lease.total_seconds()
    pause = min(0.1, runtime.settings.run_heartbeat_interval.total_seconds())
    while True:
        try:
            with unit_of_work(runtime) as work:
                given = transitions.give_back(work, lease, runtime.settings.max_run_give_backs)
        except Exception as exc:
            if not is_transient(exc) or time.monotonic() + pause > deadline:
                log.warning("could not give the run back; the reconciler will", extra={"run_id": str(lease.run_id)})
                return "stopped"
            time.sleep(pause)
            pause = min(2 * pause, runtime.settings.run_heartbeat_interval.total_seconds())
            continue
        if given is None:
            log.info("run stopped (cancelled or lease lost)", extra={"run_id": str(lease.run_id)})
            return "stopped"
        if given == "failed":
            log.warning("the database failed the run too many times in a row", extra={"run_id": str(lease.run_id)})
            return "finished"
        return "given_back"


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


def _approvals(run: Run, state: LoopState, outcome: AwaitingApproval) -> list[PendingApproval]:
    """The approvals of a suspended batch (pending, or decided by a standing approval), ids chosen here so its
    events can name them."""
    return standing.approval_rows(run.tenant_id, run.id, state.turn, outcome.pending, datetime.now(UTC))


def _suspend(
    runtime: Runtime,
    lease: Lease,
    outcome: AwaitingApproval,
    rows: list[PendingApproval],
    state: LoopState,
    span: SpanContext | None,
) -> Execution:
    """Persist the turn that asked for the batch (when unsaved), the batch's pending approvals, the state and the
    ``awaiting_approval`` transition in one transaction (the run's row in one statement)."""
    # What the resumed trace links back to.
    context = stored_context(span)
    try:
        with unit_of_work(runtime) as work:
            # A call whose grant was revoked since the loop found it waits for a human like its siblings.
            standing.confirm(work.session, rows, datetime.now(UTC))
            # The turn that asked for the held batch commits with its suspension.
            transitions.suspend(work, lease, rows, dump_state(state), context, _last_turn(outcome, state))
            insert_audit_events(work.session, standing.audit(rows))
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


def _finish(runtime: Runtime, lease: Lease, outcome: Outcome, loop: LoopState | None) -> Execution:
    """The run's ``finish`` transition, with its last turn (a final answer) in the same statement."""
    if isinstance(outcome, Cancelled | AwaitingApproval):
        return "stopped"
    state: Literal["succeeded", "failed"] = "succeeded" if isinstance(outcome, Done) else "failed"
    error = outcome.error if isinstance(outcome, Failed) else None
    last = _last_turn(outcome, loop) if isinstance(outcome, Done) and loop is not None else None
    try:
        with unit_of_work(runtime) as work:
            transitions.finish(work, lease, state, error, last)
    except RunStopped:
        return "stopped"
    log.info("run finished", extra={"run_id": str(lease.run_id), "state": state, "error": error})
    return "finished"


def _last_turn(outcome: Done | AwaitingApproval, state: LoopState) -> NewMessages | None:
    """The turn the loop handed back unsaved, as the write its transition carries; ``None`` when there is none."""
    return NewMessages(list(outcome.unsaved), state, usage=outcome.usage) if outcome.unsaved else None


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
        return transitions.extend_lease(session, lease, runtime.settings.run_lease)
