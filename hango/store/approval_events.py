"""A tenant's approval stream: its numbered log, what ``GET /v1/approvals/events`` replays from."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.models import ApprovalEvent, Tenant

_TABLE = cast(Table, ApprovalEvent.__table__)
_INSERT = insert(_TABLE)
_RESERVE = (
    update(cast(Table, Tenant.__table__))
    .where(Tenant.id == bindparam("tenant_id"))
    .values(approval_event_seq=Tenant.approval_event_seq + bindparam("count"))
    .returning(Tenant.approval_event_seq, Tenant.has_webhooks)
)


def reserve(session: Session, tenant_id: uuid.UUID, count: int) -> int:
    """Take the tenant's next ``count`` numbers; returns the first.

    The tenant's row stays locked until this transaction ends, so the numbers are given in commit order: a
    transaction can only take numbers after every earlier holder committed (or rolled back, giving its numbers
    back). A reader that has seen number ``n`` therefore never sees a smaller one appear later. Call it late in a
    transaction, to hold the lock briefly.
    """
    return reserve_reading_webhooks(session, tenant_id, count)[0]


def reserve_reading_webhooks(session: Session, tenant_id: uuid.UUID, count: int) -> tuple[int, bool]:
    """:func:`reserve`, and the tenant's ``has_webhooks`` read in the same statement."""
    last, has_webhooks = session.execute(_RESERVE, {"tenant_id": tenant_id, "count": count}).one()
    return last - count + 1, has_webhooks


def insert_events(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert numbered rows (``tenant_id``, ``seq``, ``type``, ``approval_id``, ``run_creator``, ``data``)."""
    if rows:
        session.execute(_INSERT, list(rows))


def visible_after(session: Session, principal: Principal, after: int, limit: int) -> list[ApprovalEvent]:
    """Up to ``limit`` events after ``after`` that the principal may see, in order: the tenant's, or for a member
    those of their own runs (the same rule as the approval queue's)."""
    statement = select(ApprovalEvent).where(ApprovalEvent.tenant_id == principal.tenant_id, ApprovalEvent.seq > after)
    if not principal.is_manager:
        statement = statement.where(ApprovalEvent.run_creator == principal.user_id)
    return list(session.scalars(statement.order_by(ApprovalEvent.seq).limit(limit)))


def last_seq(session: Session, tenant_id: uuid.UUID) -> int:
    """The last number the tenant's stream gave (0 before its first event)."""
    found: int = session.execute(select(Tenant.approval_event_seq).where(Tenant.id == tenant_id)).scalar_one()
    return found


def prune(session: Session, older_than: datetime, limit: int) -> int:
    """Delete up to ``limit`` events created before ``older_than``; returns how many went."""
    oldest = select(ApprovalEvent.tenant_id, ApprovalEvent.seq).where(ApprovalEvent.created_at < older_than)
    doomed = oldest.order_by(ApprovalEvent.created_at).limit(limit).subquery()
    statement = delete(ApprovalEvent).where(
        ApprovalEvent.tenant_id == doomed.c.tenant_id, ApprovalEvent.seq == doomed.c.seq
    )
    result = session.execute(statement, execution_options={"synchronize_session": False})
    return int(result.rowcount)  # type: ignore[attr-defined]
