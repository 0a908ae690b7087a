"""The audit trail: insert rows, list a tenant's rows newest first."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.models import ActorKind, AuditEvent, Outcome
from hango.kernel.pagination import Page, PageRequest, paginate


@dataclass(frozen=True)
class AuditRecord:
    """One row to write. ``detail`` must never hold secrets, tool arguments or human messages."""

    tenant_id: uuid.UUID | None
    actor_kind: ActorKind
    actor_id: uuid.UUID | None
    action: str
    target_kind: str
    target_id: str | None
    outcome: Outcome
    detail: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None

    @classmethod
    def by_user(
        cls,
        principal: Principal,
        action: str,
        target: tuple[str, str],
        outcome: Outcome,
        detail: dict[str, Any],
        trace_id: str | None,
    ) -> AuditRecord:
        """A row of something a user did in their tenant: ``target`` is the kind and id acted on."""
        kind, target_id = target
        return cls(principal.tenant_id, "user", principal.user_id, action, kind, target_id, outcome, detail, trace_id)


@dataclass(frozen=True)
class AuditFilter:
    """Optional equality filters of the audit list."""

    action: str | None = None
    target_kind: str | None = None
    target_id: str | None = None


MAX_TEXT = 300


def _clean(text: str | None) -> str | None:
    """Audit text may echo request input (an unrouted path): bound it and drop what PostgreSQL refuses (NUL)."""
    if text is None:
        return None
    return text.replace("\x00", "\ufffd")[:MAX_TEXT]


_INSERT_AUDIT = insert(cast(Table, AuditEvent.__table__))  # built once: every mutating request writes one


def insert_audit_events(session: Session, records: list[AuditRecord]) -> None:
    """Insert audit rows in one statement, without ORM objects (nothing reads them back in the transaction)."""
    if not records:
        return
    rows = [
        {
            "id": uuid.uuid4(),
            "tenant_id": record.tenant_id,
            "actor_kind": record.actor_kind,
            "actor_id": record.actor_id,
            "action": record.action,
            "target_kind": record.target_kind,
            "target_id": _clean(record.target_id),
            "outcome": record.outcome,
            "detail": record.detail,
            "trace_id": record.trace_id,
        }
        for record in records
    ]
    session.execute(_INSERT_AUDIT, rows)


def list_audit_events(
    session: Session, tenant_id: uuid.UUID, filters: AuditFilter, page: PageRequest
) -> Page[AuditEvent]:
    """The tenant's audit rows, newest first."""
    statement = select(AuditEvent).where(AuditEvent.tenant_id == tenant_id)
    for column, value in (
        (AuditEvent.action, filters.action),
        (AuditEvent.target_kind, filters.target_kind),
        (AuditEvent.target_id, filters.target_id),
    ):
        if value is not None:
            statement = statement.where(column == value)
    return paginate(session, statement, [AuditEvent.created_at, AuditEvent.id], page, descending=True)
