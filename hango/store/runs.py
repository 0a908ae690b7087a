"""Runs, and the visibility rule every run-scoped read goes through."""

from __future__ import annotations

import uuid

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.errors import NotFound
from hango.models import Run
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
