"""The approval expiry sweeper (beat-scheduled).

An approval is due at its own deadline (``expires_at``: its rule's ``ttl``, or an escalation's) or, without one,
``HANGO_APPROVAL_TTL`` after it was created. What a due approval does is its rule's ``on_expiry``:

- ``fail`` (the default): the run fails with exactly ``approval expired``, its pending approvals ``expired``;
- ``reject``: the approval is ``expired`` and its call gets the error result "approval expired: no reviewer
  decided in time" when the run resumes, which it does once nothing of its batch waits any more;
- ``escalate``: the first time, the approval stays pending with the escalation's reviewers and a new deadline
  (``approval.escalated`` on every channel); the second time, the run fails.

Each run is handled in its own transaction, under the run's row lock and only if the run is still
``awaiting_approval``, reading its due approvals after the lock: a concurrent decision either wins (the approval
is decided, or the run ``queued``, and the sweeper leaves it) or loses (it finds the approval expired, reassigned
or the run failed, and is refused) — never both. One ``fail`` among a run's due approvals fails the run. Two
sweepers at once queue on the same lock and the second finds nothing to do. Nobody made a request, so the sweeper
writes its audit rows itself (``approval.expire``, ``approval.escalate``; ``actor_kind = system``).

The sweeper also forgets the tenant approval stream's events once they are older than its retention.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from hango.kernel.models import PendingApproval, Run
from hango.kernel.telemetry import current_trace_id
from hango.platform.runtime import Runtime
from hango.platform.work import Work, unit_of_work
from hango.run import transitions
from hango.store import approval_events as approval_event_store
from hango.store import approvals as store
from hango.store import runs as run_store
from hango.store.audit import AuditRecord, insert_audit_events

log = logging.getLogger(__name__)
EXPIRED = "approval expired"
BATCH = 100
Action = Literal["fail", "reject", "escalate"]


def expire_stale(runtime: Runtime, *, batch: int = BATCH, now: datetime | None = None) -> int:
    """Apply the deadlines of up to ``batch`` runs with a due approval; returns how many runs it changed."""
    now = now or datetime.now(UTC)
    cutoff = now - runtime.settings.approval_ttl
    with runtime.db.transaction() as session:
        run_ids = store.stale_runs(session, now, cutoff, batch)
    trace_id = current_trace_id() or uuid.uuid4().hex
    return sum(expire_run(runtime, run_id, cutoff, trace_id, now=now) for run_id in run_ids)


def sweep(runtime: Runtime) -> int:
    """The beat-scheduled sweep: apply the deadlines that passed, then forget old approval stream events; returns
    how many runs it changed."""
    changed = expire_stale(runtime)
    prune_approval_events(runtime)
    return changed


def prune_approval_events(runtime: Runtime, *, batch: int = 1000) -> int:
    """Forget up to ``batch`` approval stream events older than the stream's retention; returns how many."""
    cutoff = datetime.now(UTC) - runtime.settings.approval_stream_retention()
    with runtime.db.transaction() as session:
        return approval_event_store.prune(session, cutoff, batch)


def action_of(row: PendingApproval) -> Action:
    """What a due approval's deadline does: its rule's ``on_expiry``; an escalation only once."""
    if row.on_expiry == "reject":
        return "reject"
    if isinstance(row.on_expiry, dict) and "escalate" in row.on_expiry and row.escalated_at is None:
        return "escalate"
    return "fail"


@dataclass
class Expiry:
    """What one run's deadlines did: the approvals closed with a failed run, rejected, or escalated."""

    failed: list[PendingApproval] = field(default_factory=list)
    rejected: list[PendingApproval] = field(default_factory=list)
    escalated: list[PendingApproval] = field(default_factory=list)


def expire_run(
    runtime: Runtime, run_id: uuid.UUID, cutoff: datetime, trace_id: str, *, now: datetime | None = None
) -> bool:
    """Apply one run's due deadlines (``cutoff``: the creation time before which an approval without its own
    deadline is due), if it is still waiting; ``True`` when it changed anything."""
    now = now or datetime.now(UTC)
    with unit_of_work(runtime) as work:
        run = run_store.lock_run(work.session, run_id)
        if run is None or run.state != "awaiting_approval":
            return False
        due = store.due_approvals(work.session, run, now, cutoff)
        if not due:
            return False
        expiry = _apply(work, run, due, now)
        if expiry is None:
            return False
        insert_audit_events(work.session, _audit(expiry, trace_id))
    _log(run_id, expiry)
    return True


def _apply(work: Work, run: Run, due: Sequence[PendingApproval], now: datetime) -> Expiry | None:
    actions = {row.id: action_of(row) for row in due}
    if "fail" in actions.values():
        failed = transitions.expire(work, run, EXPIRED)
        return None if failed is None else Expiry(failed=failed)
    expiry = Expiry(
        rejected=[row for row in due if actions[row.id] == "reject"],
        escalated=[row for row in due if actions[row.id] == "escalate"],
    )
    # Escalations first: they keep the run waiting, so a rejection in the same sweep never re-queues it early.
    if expiry.escalated:
        transitions.escalate(work, run, expiry.escalated, now)
    if expiry.rejected:
        transitions.reject_expired(work, run, expiry.rejected)
    return expiry


def _audit(expiry: Expiry, trace_id: str) -> list[AuditRecord]:
    rows = [_record(row, "approval.expire", "fail", trace_id) for row in expiry.failed]
    rows += [_record(row, "approval.expire", "reject", trace_id) for row in expiry.rejected]
    rows += [_record(row, "approval.escalate", "escalate", trace_id) for row in expiry.escalated]
    return rows


def _record(row: PendingApproval, action: str, done: Action, trace_id: str) -> AuditRecord:
    detail: dict[str, Any] = {
        "decided_by": None,
        "decision": None,
        "tool_name": row.tool_name,
        "tool_call_id": row.tool_call_id,
    }
    if done != "fail":  # a failed run's rows keep the shape they always had
        detail["on_expiry"] = done
    if done == "escalate":
        detail["reviewers"] = row.reviewers  # roles and user ids: who may decide now, never the arguments
    return AuditRecord(
        tenant_id=row.tenant_id,
        actor_kind="system",
        actor_id=None,
        action=action,
        target_kind="pending_approval",
        target_id=str(row.id),
        outcome="success",
        detail=detail,
        trace_id=trace_id,
    )


def _log(run_id: uuid.UUID, expiry: Expiry) -> None:
    for message, rows in (
        ("approval expired", expiry.failed),
        ("approval expired and rejected", expiry.rejected),
        ("approval escalated", expiry.escalated),
    ):
        for row in rows:
            extra = {"run_id": str(run_id), "tool": row.tool_name, "tool_call_id": row.tool_call_id}
            log.info(message, extra={**extra, "approval_id": str(row.id)})
