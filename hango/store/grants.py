"""Standing approvals (grants): their rows, the tenant's active count, revocation and the loop's lookup."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, func, or_, select, text, update
from sqlalchemy.orm import Session

from hango.kernel.errors import NotFound
from hango.kernel.models import Grant, Membership, Run
from hango.kernel.pagination import Page, PageRequest, paginate


@dataclass(frozen=True)
class GrantFilter:
    """Optional filters of the grants list: one agent's, and only the active (or only the inactive) ones."""

    agent_id: uuid.UUID | None = None
    active: bool | None = None


def active_at(now: datetime) -> ColumnElement[bool]:
    """Grants that apply at ``now``: not revoked, not expired."""
    return and_(Grant.revoked_at.is_(None), Grant.expires_at > now)


def live_ids(session: Session, tenant_id: uuid.UUID, ids: Collection[uuid.UUID], now: datetime) -> set[uuid.UUID]:
    """Which of these grants still apply at ``now``, locked ``FOR SHARE`` until the transaction ends: a revocation
    racing the caller waits for its commit."""
    statement = (
        select(Grant.id)
        .where(Grant.tenant_id == tenant_id, Grant.id.in_(list(ids)), active_at(now))
        .with_for_update(read=True)
    )
    return set(session.scalars(statement))


def lock_quota(session: Session, tenant_id: uuid.UUID) -> None:
    """Serialise the tenant's grant creations until the transaction ends (two at once count each other's).

    A transaction-scoped advisory lock, not the tenant's row: it conflicts with nothing but another grant
    creation, so it cannot join a cycle with the row locks runs, decisions and inserts take.
    """
    session.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"grants:{tenant_id}"})


def share_run(session: Session, tenant_id: uuid.UUID, run_id: uuid.UUID) -> Run:
    """A run of the tenant, held ``FOR KEY SHARE`` (what the grant's foreign key takes anyway), taken before the
    quota lock so that a decision holding the run never waits on a creation holding the quota.

    Raises:
        NotFound: no such run in the tenant.
    """
    statement = (
        select(Run).where(Run.tenant_id == tenant_id, Run.id == run_id).with_for_update(key_share=True, read=True)
    )
    run = session.scalar(statement)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def count_active(session: Session, tenant_id: uuid.UUID, now: datetime) -> int:
    """How many of the tenant's grants are active at ``now``."""
    statement = select(func.count()).where(Grant.tenant_id == tenant_id, active_at(now))
    found: int = session.scalar(statement) or 0
    return found


def add(session: Session, grant: Grant) -> Grant:
    """Insert a grant; its ``created_at`` is read back."""
    session.add(grant)
    session.flush()
    session.refresh(grant)
    return grant


def get(session: Session, tenant_id: uuid.UUID, grant_id: uuid.UUID) -> Grant:
    """A grant of the tenant; :class:`NotFound` for another tenant's or an unknown one."""
    found = session.scalar(select(Grant).where(Grant.tenant_id == tenant_id, Grant.id == grant_id))
    if found is None:
        raise NotFound(f"grant {grant_id} not found")
    return found


def page(
    session: Session, tenant_id: uuid.UUID, filters: GrantFilter, request: PageRequest, now: datetime
) -> Page[Grant]:
    """The tenant's grants, newest first, filtered."""
    statement = select(Grant).where(Grant.tenant_id == tenant_id)
    if filters.agent_id is not None:
        statement = statement.where(Grant.agent_id == filters.agent_id)
    if filters.active is not None:
        statement = statement.where(active_at(now) if filters.active else ~active_at(now))
    return paginate(session, statement, [Grant.created_at, Grant.id], request, descending=True)


def revoke(session: Session, tenant_id: uuid.UUID, grant_id: uuid.UUID, by: uuid.UUID, now: datetime) -> Grant:
    """Mark a grant revoked by ``by`` at ``now``; one already revoked keeps its first revocation.

    Raises:
        NotFound: no such grant in the tenant.
    """
    statement = (
        update(Grant)
        .where(Grant.tenant_id == tenant_id, Grant.id == grant_id, Grant.revoked_at.is_(None))
        .values(revoked_at=now, revoked_by=by)
        .returning(Grant)
    )
    revoked = session.scalars(statement, execution_options={"populate_existing": True}).one_or_none()
    return revoked if revoked is not None else get(session, tenant_id, grant_id)


def candidates(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    run_id: uuid.UUID,
    tool_name: str,
    now: datetime,
) -> list[tuple[Grant, str | None]]:
    """The active grants of an agent's tool that cover a run, oldest first, each with the role its creator holds
    in the tenant now (None: no longer a member), in one statement on the ``(tenant_id, agent_id, tool_name)``
    index.

    The grants are locked ``FOR SHARE`` until the transaction ends: a revocation (an ``UPDATE``) racing the caller
    waits for its commit, so once ``DELETE /v1/grants/{id}`` has answered no later lookup can use the grant.
    """
    membership = and_(Membership.tenant_id == Grant.tenant_id, Membership.user_id == Grant.created_by)
    statement = (
        select(Grant, Membership.role)
        .outerjoin(Membership, membership)
        .where(
            Grant.tenant_id == tenant_id,
            Grant.agent_id == agent_id,
            Grant.tool_name == tool_name,
            active_at(now),
            or_(Grant.run_id.is_(None), Grant.run_id == run_id),
        )
        .order_by(Grant.created_at, Grant.id)
        .with_for_update(read=True, of=Grant)
    )
    return [(grant, role) for grant, role in session.execute(statement)]
