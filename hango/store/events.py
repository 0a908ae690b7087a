"""A run's append-only event log, the source SSE replays from."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, insert, select, update
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.models import Run, RunEvent
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


def reserve(session: Session, run_id: uuid.UUID, count: int) -> int:
    """Take the run's next ``count`` event numbers under its row lock; returns the first.

    Concurrent writers queue on the lock, so their sequences never collide and each one's numbers are contiguous.
    """
    bump = update(Run).where(Run.id == run_id).values(event_seq=Run.event_seq + count).returning(Run.event_seq)
    last: int = session.execute(bump, execution_options={"synchronize_session": False}).scalar_one()
    return last - count + 1


# A Core INSERT on the table, built once: every step writes events, and the ORM's bulk path adds nothing here.
_INSERT_EVENTS = insert(cast(Table, RunEvent.__table__))


def insert_events(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert numbered events (``tenant_id``, ``run_id``, ``seq``, ``type``, ``data``) in one statement."""
    if rows:
        session.execute(_INSERT_EVENTS, list(rows))
