"""The approval expiry sweeper (beat-scheduled).

Approvals older than ``HANGO_APPROVAL_TTL`` fail their run with exactly ``approval expired``. Each run is expired
in its own transaction, under the run's row lock and only if the run is still ``awaiting_approval``, so a
concurrent decision either wins (the run is ``queued`` and the sweeper leaves it) or loses (it finds the run
``failed`` and answers 409) — never both. Two sweepers at once queue on the same lock and the second finds nothing
to do. Nobody made a request, so the sweeper writes its ``approval.expire`` audit rows itself.

The sweeper also forgets the tenant approval stream's events once they are older than its retention.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from hango.models import PendingApproval
from hango.run import transitions
from hango.run.runtime import Runtime, unit_of_work
from hango.store import approval_events as approval_event_store
from hango.store import approvals as store
from hango.store import runs as run_store
from hango.store.audit import AuditRecord, insert_audit_events
from hango.telemetry import current_trace_id

log = logging.getLogger(__name__)
EXPIRED = "approval expired"
BATCH = 100


def expire_stale(runtime: Runtime, *, batch: int = BATCH) -> int:
    """Expire up to ``batch`` runs whose approvals outlived the TTL; returns how many runs were failed."""
    cutoff = datetime.now(UTC) - runtime.settings.approval_ttl
    with runtime.db.transaction() as session:
        run_ids = store.stale_runs(session, cutoff, batch)
    trace_id = current_trace_id() or uuid.uuid4().hex
    return sum(expire_run(runtime, run_id, cutoff, trace_id) for run_id in run_ids)


def sweep(runtime: Runtime) -> int:
    """The beat-scheduled sweep: expire what outlived the TTL, then forget old approval stream events; returns how
    many runs were failed."""
    failed = expire_stale(runtime)
    prune_approval_events(runtime)
    return failed


def prune_approval_events(runtime: Runtime, *, batch: int = 1000) -> int:
    """Forget up to ``batch`` approval stream events older than the stream's retention; returns how many."""
    cutoff = datetime.now(UTC) - runtime.settings.approval_stream_retention()
    with runtime.db.transaction() as session:
        return approval_event_store.prune(session, cutoff, batch)


def expire_run(runtime: Runtime, run_id: uuid.UUID, cutoff: datetime, trace_id: str) -> bool:
    """Fail one run for an expired approval, if it is still waiting and still stale; ``True`` when it did."""
    with unit_of_work(runtime) as work:
        run = run_store.lock_run(work.session, run_id)
        if run is None or not store.has_stale(work.session, run, cutoff):
            return False
        expired = transitions.expire(work, run, EXPIRED)
        if expired is None:
            return False
        insert_audit_events(work.session, [_audit(row, trace_id) for row in expired])
    for row in expired:
        log.info(
            "approval expired",
            extra={
                "run_id": str(run_id),
                "tool": row.tool_name,
                "tool_call_id": row.tool_call_id,
                "approval_id": str(row.id),
            },
        )
    return True


def _audit(row: PendingApproval, trace_id: str) -> AuditRecord:
    return AuditRecord(
        tenant_id=row.tenant_id,
        actor_kind="system",
        actor_id=None,
        action="approval.expire",
        target_kind="pending_approval",
        target_id=str(row.id),
        outcome="success",
        detail={"decided_by": None, "decision": None, "tool_name": row.tool_name, "tool_call_id": row.tool_call_id},
        trace_id=trace_id,
    )
