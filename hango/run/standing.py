"""Calls a standing approval (a grant) covers: found by the loop's lookup (:func:`live_grant`), stored as approvals
already decided, never waiting for anyone.

The loop holds such a call like any other its rules match, so it is recorded where every approval is. When a
sibling waits for a human, the granted call's decided row is written with the suspension; otherwise with the batch
marked held, just before the batch runs (:meth:`~hango.run.persistence.RunPersistence.record_granted`). Either way
the batch is then re-driven like one a human decided, and the granted call keeps the guarantees of an approved one
(its ``execution``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from hango.agent.grant_terms import covers
from hango.agent.interrupts import is_reviewer
from hango.agent.loop import GrantWithdrawn
from hango.agent.state import Decision, GrantLookup, PendingCall
from hango.kernel.canonical import sha256_hex
from hango.kernel.models import Grant, PendingApproval
from hango.store import approvals as approval_store
from hango.store import grants as grant_store
from hango.store.audit import AuditRecord


def approval_rows(
    tenant_id: uuid.UUID,
    run_id: uuid.UUID,
    turn: int,
    held: Sequence[PendingCall],
    now: datetime,
    subagent_call_id: uuid.UUID | None = None,
) -> list[PendingApproval]:
    """The approvals of held calls, ids chosen here so that events can name them: ``pending``, or ``decided`` by
    the standing approval that covers the call."""
    return [_row(tenant_id, run_id, turn, pending, now, subagent_call_id) for pending in held]


def _row(
    tenant_id: uuid.UUID,
    run_id: uuid.UUID,
    turn: int,
    pending: PendingCall,
    now: datetime,
    subagent_call_id: uuid.UUID | None,
) -> PendingApproval:
    row = PendingApproval(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        run_id=run_id,
        turn=turn,
        tool_call_id=pending.call.id,
        tool_name=pending.call.name,
        arguments=pending.call.input,
        arguments_sha256=sha256_hex(pending.call.input),
        allowed_decisions=list(pending.allowed_decisions),
        subagent_call_id=pending.subagent_call_id or subagent_call_id,
        reviewers=dict(pending.reviewers) if pending.reviewers is not None else None,
        approvals_required=pending.approvals_required,
        created_at=now,
        state="pending",
        execution="not_started",
        # A rule's own deadline; without one the approval follows HANGO_APPROVAL_TTL.
        expires_at=now + pending.ttl if pending.ttl is not None else None,
        on_expiry=pending.on_expiry,
        description=pending.description,
        mcp=dict(pending.tool_shown) if pending.tool_shown is not None else None,
    )
    if pending.granted is not None:
        row.state, row.decision, row.decision_message = "decided", "approve", ""
        row.decided_by, row.decided_at = pending.granted.granted_by, now
        row.grant_id = pending.granted.grant_id
    return row


__all__ = ["GrantWithdrawn", "approval_rows", "audit", "confirm", "decided_events", "decisions"]


def confirm(session: Session, rows: Sequence[PendingApproval], now: datetime) -> list[PendingApproval]:
    """Look at the rows' grants again, in the transaction that stores the rows, and lock them ``FOR SHARE``: a
    row whose grant was revoked or expired since the loop found it goes back to ``pending`` (returned), so that
    once ``DELETE /v1/grants/{id}`` has answered no call is recorded approved by that grant."""
    granted = [row for row in rows if row.grant_id is not None]
    if not granted:
        return []
    live = grant_store.live_ids(session, granted[0].tenant_id, {row.grant_id for row in granted if row.grant_id}, now)
    withdrawn = [row for row in granted if row.grant_id not in live]
    for row in withdrawn:
        row.state, row.decision, row.decided_by, row.decided_at, row.grant_id = "pending", "", None, None, None
    return withdrawn


def decisions(rows: Sequence[PendingApproval]) -> dict[str, Decision]:
    """The decisions of granted rows by call id, as the human-in-the-loop middleware applies them."""
    return {
        row.tool_call_id: Decision("approve", str(row.id), decided_by=str(row.decided_by))
        for row in rows
        if row.grant_id is not None
    }


def decided_events(rows: Sequence[PendingApproval]) -> list[tuple[str, dict[str, Any]]]:
    """The run's ``approval.decided`` events of granted rows, naming their grant."""
    return [
        ("approval.decided", {**approval_store.decided_event(row), "grant_id": str(row.grant_id)})
        for row in rows
        if row.grant_id is not None
    ]


def audit(rows: Sequence[PendingApproval], trace_id: str | None = None) -> list[AuditRecord]:
    """One ``approval.auto_approve`` row per granted approval: the system decided, for the grant's creator."""
    return [
        AuditRecord(
            tenant_id=row.tenant_id,
            actor_kind="system",
            actor_id=None,
            action="approval.auto_approve",
            target_kind="pending_approval",
            target_id=str(row.id),
            outcome="success",
            detail={
                "decided_by": str(row.decided_by),
                "decision": "approve",
                "grant_id": str(row.grant_id),
                "tool_name": row.tool_name,
                "tool_call_id": row.tool_call_id,
                "run_id": str(row.run_id),
            },
            trace_id=trace_id,
        )
        for row in rows
        if row.grant_id is not None
    ]


@dataclass(frozen=True)
class GrantQuery:
    """A held call a grant might approve, as the loop asks: whose run, which call, and the rule holding it."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    run_id: uuid.UUID
    lookup: GrantLookup


def live_grant(session: Session, query: GrantQuery, now: datetime, not_by: uuid.UUID | None = None) -> Grant | None:
    """The oldest active grant that approves this call, or None.

    A grant approves only where its creator, with the role they hold in the tenant now, may decide the call under
    the rule that holds it (its ``reviewers``), and never for ``not_by`` (the run's creator, in a tenant that
    forbids self-approval: their grant would be their own approval by proxy). Ask only where a rule would suspend
    the call, and never for a rule with ``approvals_required`` above 1.

    One indexed statement; ``when`` is matched by :func:`~hango.agent.grant_terms.covers`. The grants found stay
    locked ``FOR SHARE`` until the caller's transaction ends; the loop looks again, with
    :func:`~hango.store.grants.live_ids`, in the transaction that records the call as approved, so a revocation
    either comes first (and the call waits for a human) or waits for that commit.
    """
    lookup = query.lookup
    found = grant_store.candidates(
        session,
        tenant_id=query.tenant_id,
        agent_id=query.agent_id,
        run_id=query.run_id,
        tool_name=lookup.call.name,
        now=now,
    )
    for grant, creator_role in found:
        if grant.created_by == not_by or not is_reviewer(grant.created_by, creator_role, lookup.reviewers):
            continue
        if covers(grant, lookup.call.input, lookup.arguments):
            return grant
    return None
