"""A run's append-only event log, the source SSE replays from."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.models import Run, RunEvent
from hango.store.runs import get_run


def list_events_after(
    session: Session, principal: Principal, run_id: uuid.UUID, after_seq: int, limit: int
) -> list[RunEvent]:
    """Up to ``limit`` events of a visible run with ``seq`` above ``after_seq``, in order."""
    return events_of(session, get_run(session, principal, run_id), after_seq, limit)


def events_of(session: Session, run: Run, after_seq: int, limit: int) -> list[RunEvent]:
    """Up to ``limit`` events of a run already checked visible, with ``seq`` above ``after_seq``, in order."""
    statement = (
        select(RunEvent)
        .where(RunEvent.tenant_id == run.tenant_id, RunEvent.run_id == run.id, RunEvent.seq > after_seq)
        .order_by(RunEvent.seq)
        .limit(limit)
    )
    return list(session.scalars(statement))
