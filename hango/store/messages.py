"""A run's append-only conversation (the run's own messages and its subagents', one sequence per run)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, cast

from sqlalchemy import Table, bindparam, insert, select
from sqlalchemy.orm import Session

from hango.agent.messages import Message
from hango.kernel.auth import Principal
from hango.kernel.models import Message as MessageRow
from hango.kernel.models import Run
from hango.kernel.pagination import Page, PageRequest, paginate
from hango.store.runs import RunCounters, get_run


class StoredMessage(Protocol):
    """What a stored message's API shape and the loop's view of it are made of: a row, or what an insert wrote."""

    @property
    def seq(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> list[Any]: ...

    @property
    def subagent_call_id(self) -> uuid.UUID | None: ...


class Inserted(NamedTuple):
    """A message as :func:`insert_messages` wrote it."""

    seq: int
    role: str
    content: list[Any]
    subagent_call_id: uuid.UUID | None


def message_json(row: StoredMessage) -> dict[str, Any]:
    """The API shape of a stored message (also the data of ``message.created`` events)."""
    return message_data(row.seq, row.role, row.content, row.subagent_call_id)


def message_data(seq: int, role: str, content: list[Any], subagent_call_id: uuid.UUID | None) -> dict[str, Any]:
    """The API shape of a message given by its columns."""
    return {
        "seq": seq,
        "role": role,
        "content": content,
        "subagent_call_id": str(subagent_call_id) if subagent_call_id else None,
    }


def to_message(row: StoredMessage) -> Message:
    """The loop's view of a stored message."""
    role: Any = row.role
    call_id = str(row.subagent_call_id) if row.subagent_call_id else None
    return Message(role=role, content=list(row.content), seq=row.seq, subagent_call_id=call_id)


_INSERT_MESSAGES = insert(cast(Table, MessageRow.__table__))  # built once: every turn appends


def insert_messages(
    session: Session,
    run: Run | RunCounters,
    messages: Sequence[Message],
    subagent_call_id: uuid.UUID | None,
    first_seq: int,
    thread_id: uuid.UUID | None = None,
) -> list[Inserted]:
    """Insert messages numbered from ``first_seq`` (a range the caller reserved on the run's counter) at once; a
    thread's run gives its ``thread_id`` (the numbers are then thread-wide).

    One Core ``executemany`` (SQLAlchemy pages it into multi-row statements) of plain values, no ORM objects: a
    run created with a long history inserts a thousand rows here. Returns what was written.
    """
    inserted = [
        Inserted(first_seq + index, message.role, message.content, subagent_call_id)
        for index, message in enumerate(messages)
    ]
    shared = {
        "tenant_id": run.tenant_id,
        "run_id": run.id,
        "subagent_call_id": subagent_call_id,
        "thread_id": thread_id,
    }
    session.execute(
        _INSERT_MESSAGES, [{**shared, "seq": row.seq, "role": row.role, "content": row.content} for row in inserted]
    )
    return inserted


def child_history(session: Session, run_id: uuid.UUID, subagent_call_id: uuid.UUID) -> list[Message]:
    """A child loop's messages in order (the run's own loop reads its history with :func:`run_history`).

    One query over plain columns (no ORM objects are built), straight into the loop's messages.
    """
    statement = (
        select(MessageRow.seq, MessageRow.role, MessageRow.content)
        .where(MessageRow.run_id == run_id, MessageRow.subagent_call_id == subagent_call_id)
        .order_by(MessageRow.seq)
    )
    child = str(subagent_call_id)
    return [
        Message(role=role, content=list(content), seq=seq, subagent_call_id=child)
        for seq, role, content in session.execute(statement)
    ]


# Built once: a resumed run reads its history at every claim.
_RUN_MESSAGES = (
    select(MessageRow.seq, MessageRow.role, MessageRow.content, MessageRow.subagent_call_id)
    .where(MessageRow.run_id == bindparam("run_id"))
    .order_by(MessageRow.seq)
)


def run_history(session: Session, run_id: uuid.UUID) -> tuple[list[Message], set[str]]:
    """The run's own loop history, and every tool call id of the run (its subagents' included), in one query.

    A claim needs both; reading the run's messages once serves the two (a run without subagents has no others).
    """
    history: list[Message] = []
    call_ids: set[str] = set()
    for seq, role, content, subagent_call_id in session.execute(_RUN_MESSAGES, {"run_id": run_id}):
        child = str(subagent_call_id) if subagent_call_id else None
        message = Message(role=role, content=list(content), seq=seq, subagent_call_id=child)
        if role == "assistant":
            call_ids.update(call.id for call in message.tool_calls)
        if child is None:
            history.append(message)
    return history, call_ids


def list_messages(session: Session, principal: Principal, run_id: uuid.UUID, page: PageRequest) -> Page[MessageRow]:
    """A visible run's messages by ``seq``; :class:`~hango.kernel.errors.NotFound` for a run the principal cannot
    see."""
    run = get_run(session, principal, run_id)
    statement = select(MessageRow).where(MessageRow.tenant_id == run.tenant_id, MessageRow.run_id == run.id)
    return paginate(session, statement, [MessageRow.seq], page)
