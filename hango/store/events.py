"""A run's append-only event log, the source SSE replays from.

A ``message.created`` event is kept as a reference to its message (``{"seq": n}``): the message's row already holds
what the event shows, and a replay reads the two together, so clients see the whole message as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from sqlalchemy import Integer, Row, Table, and_, bindparam, insert, select, update
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.models import Message, Run, RunEvent
from hango.store.messages import message_data
from hango.store.runs import get_run

MESSAGE_CREATED = "message.created"


def stored_data(type_: str, data: dict[str, Any]) -> dict[str, Any]:
    """What the log keeps of an event's data: a ``message.created`` event keeps its message's number only."""
    return {"seq": data["seq"]} if type_ == MESSAGE_CREATED else data


def list_events_after(
    session: Session, principal: Principal, run_id: uuid.UUID, after_seq: int, limit: int
) -> list[Logged]:
    """Up to ``limit`` events of a visible run with ``seq`` above ``after_seq``, in order."""
    return events_of(session, get_run(session, principal, run_id), after_seq, limit)


# Built once, values bound: every replay and every stream's catch-up reads through it. A message.created event finds
# its message by the run and the number it keeps (the messages' unique (run_id, seq) index).
_EVENTS_OF = (
    select(
        RunEvent.seq,
        RunEvent.type,
        RunEvent.data,
        Message.seq.label("message_seq"),
        Message.role,
        Message.content,
        Message.subagent_call_id,
    )
    .outerjoin(
        Message,
        and_(
            RunEvent.type == MESSAGE_CREATED,
            Message.run_id == RunEvent.run_id,
            Message.seq == RunEvent.data["seq"].astext.cast(Integer),
        ),
    )
    .where(
        RunEvent.tenant_id == bindparam("tenant"),
        RunEvent.run_id == bindparam("run"),
        RunEvent.seq > bindparam("after"),
    )
    .order_by(RunEvent.seq)
    .limit(bindparam("limit"))
)


class Logged(NamedTuple):
    """An event as the log gives it back: its number, its type and its data (a message's in full)."""

    seq: int
    type: str
    data: dict[str, Any]


def events_of(session: Session, run: Run, after_seq: int, limit: int) -> list[Logged]:
    """Up to ``limit`` events of a run already checked visible, with ``seq`` above ``after_seq``, in order, each
    ``message.created`` with its message."""
    rows = session.execute(_EVENTS_OF, {"tenant": run.tenant_id, "run": run.id, "after": after_seq, "limit": limit})
    return [_logged(row) for row in rows]


def _logged(row: Row[Any]) -> Logged:
    if row.type == MESSAGE_CREATED:
        return Logged(row.seq, row.type, message_data(row.message_seq, row.role, row.content, row.subagent_call_id))
    return Logged(row.seq, row.type, row.data)


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
