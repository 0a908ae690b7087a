"""Runs: the visibility rule every run-scoped read goes through, and the statements behind the run state machine
(:mod:`hango.run.transitions` is their only caller that changes a run's state)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.errors import NotFound
from hango.models import Run, RunState
from hango.pagination import Page, PageRequest, paginate


def visible_to(principal: Principal) -> ColumnElement[bool]:
    """The runs a principal may see: the tenant's, and for a member only the ones they created."""
    clause = Run.tenant_id == principal.tenant_id
    if not principal.is_manager:
        clause = clause & (Run.created_by == principal.user_id)
    return clause


def get_run(session: Session, principal: Principal, run_id: uuid.UUID, *, for_update: bool = False) -> Run:
    """A run the principal may see; :class:`NotFound` otherwise, so existence is never revealed."""
    statement = select(Run).where(Run.id == run_id, visible_to(principal))
    if for_update:
        statement = statement.with_for_update()
    run = session.scalar(statement)
    if run is None:
        raise NotFound(f"run {run_id} not found")
    return run


def list_runs(session: Session, principal: Principal, page: PageRequest, state: str | None = None) -> Page[Run]:
    """The runs a principal may see, newest first, optionally in one state."""
    statement = select(Run).where(visible_to(principal))
    if state is not None:
        statement = statement.where(Run.state == state)
    return paginate(session, statement, [Run.created_at, Run.id], page, descending=True)


def move(
    session: Session,
    run_id: uuid.UUID,
    source: Collection[RunState],
    values: Mapping[str, Any],
    *,
    owner: str | None = None,
    lease_expired_before: datetime | None = None,
    events: int = 0,
) -> Run | None:
    """Change a run's row in one conditional ``UPDATE … RETURNING``: only while it is in ``source`` (and, given an
    ``owner``, under that worker's lease). ``None`` when the guard did not hold; the loaded row is refreshed.

    ``events`` takes that many event numbers in the same statement; they end at the returned ``event_seq``.
    """
    if events:
        values = {**values, "event_seq": Run.event_seq + events}
    statement = update(Run).where(Run.id == run_id, Run.state.in_(source))
    if owner is not None:
        statement = statement.where(Run.lease_owner == owner)
    if lease_expired_before is not None:
        statement = statement.where(Run.lease_expires_at < lease_expired_before)
    returning = statement.values(**values).returning(Run)
    options = {"synchronize_session": False, "populate_existing": True}
    return session.scalars(returning, execution_options=options).one_or_none()


def advance(
    session: Session, run_id: uuid.UUID, owner: str, values: Mapping[str, Any], *, events: int = 0
) -> Run | None:
    """Write a running run's counters and loop state under this worker's lease, in one fenced statement (the
    run's state is not among ``values``: that is a transition's); ``None`` when the lease is no longer held."""
    running: tuple[RunState, ...] = ("running",)
    return move(session, run_id, running, values, owner=owner, events=events)


def lock_run(session: Session, run_id: uuid.UUID) -> Run | None:
    """The run row, locked for this transaction (any tenant: the worker and beat tasks act for the system)."""
    return session.scalar(select(Run).where(Run.id == run_id).with_for_update())


def lock_lost_runs(session: Session, now: datetime, limit: int) -> list[Run]:
    """``running`` runs whose lease ended before ``now``, oldest lease first, skipping rows others hold."""
    statement = (
        select(Run)
        .where(Run.state == "running", Run.lease_expires_at < now)
        .order_by(Run.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(statement))


def waiting_too_long(session: Session, updated_before: datetime, limit: int) -> list[tuple[uuid.UUID, int]]:
    """``(id, queue_generation)`` of ``queued`` runs untouched since ``updated_before``, longest waiting first."""
    statement = (
        select(Run.id, Run.queue_generation)
        .where(Run.state == "queued", Run.updated_at < updated_before)
        .order_by(Run.updated_at)
        .limit(limit)
    )
    return [(row.id, row.queue_generation) for row in session.execute(statement)]
