"""Threads: who may see which, their derived status, and the statements behind a thread's conversation.

A thread's conversation is the messages of its runs (``messages.thread_id``, ``seq`` thread-wide, subagents' inner
messages excluded) after, for a fork, its ancestors' messages up to where it forked (:class:`ThreadAncestor`).
Numbers never overlap along that line (a fork's own messages are numbered after its ``base_seq``), so one ordered
scan over the segments reads the conversation.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Integer,
    and_,
    bindparam,
    case,
    delete,
    exists,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    update,
)
from sqlalchemy.orm import Session

from hango.agent.messages import Message
from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import (
    ACTIVE_RUN_STATES,
    Agent,
    ApprovalEvent,
    File,
    PendingApproval,
    Run,
    RunEvent,
    SubagentCall,
    Thread,
    ThreadAncestor,
)
from hango.kernel.models import Message as MessageRow
from hango.kernel.pagination import Page, PageRequest, paginate

THREAD_STATUSES = ("idle", "busy", "interrupted", "error")


def visible_to(principal: Principal) -> ColumnElement[bool]:
    """The threads a principal may see: the tenant's live ones, and for a member only those they created."""
    clause: ColumnElement[bool] = (Thread.tenant_id == principal.tenant_id) & Thread.deleted_at.is_(None)
    if not principal.is_manager:
        clause = clause & (Thread.created_by == principal.user_id)
    return clause


def get_thread(session: Session, principal: Principal, thread_id: uuid.UUID, *, for_update: bool = False) -> Thread:
    """A thread the principal may see (locked until commit with ``for_update``); :class:`NotFound` otherwise."""
    statement = select(Thread).where(Thread.id == thread_id, visible_to(principal))
    if for_update:
        # FOR NO KEY UPDATE: a worker's insert of a message (or update of a row it wrote) referencing the thread
        # takes a key-share lock on it while holding its run's row, which a request holding the thread then waits
        # for; FOR UPDATE would make the two wait on each other (a deadlock).
        statement = statement.with_for_update(key_share=True)
    thread = session.scalar(statement)
    if thread is None:
        raise NotFound(f"thread {thread_id} not found")
    return thread


def take_position(session: Session, principal: Principal, thread_id: uuid.UUID) -> tuple[Thread, Agent]:
    """A thread the principal may see, locked until commit, with the next run's place taken (``run_seq``), and its
    agent, in one statement (an ``UPDATE … FROM``); :class:`NotFound` otherwise."""
    values = {"run_seq": Thread.run_seq + 1, "updated_at": datetime.now(UTC)}
    statement = (
        update(Thread)
        .where(Thread.id == thread_id, visible_to(principal), Agent.id == Thread.agent_id)
        .values(**values)
        .returning(Thread, Agent)
    )
    options = {"synchronize_session": False, "populate_existing": True}
    row = session.execute(statement, execution_options=options).one_or_none()
    if row is None:
        raise NotFound(f"thread {thread_id} not found")
    return row[0], row[1]


def follow_active(session: Session, thread: Thread) -> list[uuid.UUID]:
    """Mark the thread's active runs ``followed`` (a run is about to be added after them); their ids, oldest first.

    The ``UPDATE`` locks them until commit as ``FOR NO KEY UPDATE`` would: it waits for (and holds off) a run's
    transition, not the inserts that merely reference the run (a message, an event), which take a key-share lock.
    A run that ends meanwhile either ends first, and is then not among them (its state is checked again once its
    lock is taken), or waits, and then finds itself followed: its end looks for the next run to start
    (:func:`hango.run.threads.after_ended`). A run nobody followed ends without that look.
    """
    statement = (
        update(Run)
        .where(Run.thread_id == thread.id, Run.tenant_id == thread.tenant_id, Run.state.in_(ACTIVE_RUN_STATES))
        .values(followed=True)
        .returning(Run.id, Run.thread_position)
    )
    rows = session.execute(statement, execution_options={"synchronize_session": False}).all()
    return [run_id for run_id, _ in sorted(rows, key=lambda row: row[1] or 0)]


def active_runs(session: Session, thread_id: uuid.UUID) -> list[Run]:
    """The thread's queued, running and waiting runs, oldest first."""
    statement = (
        select(Run).where(Run.thread_id == thread_id, Run.state.in_(ACTIVE_RUN_STATES)).order_by(Run.thread_position)
    )
    return list(session.scalars(statement))


class Queued(NamedTuple):
    """A queued run to enqueue: its id and the generation its message carries."""

    id: uuid.UUID
    queue_generation: int


# Built once: every end of a thread's run asks it.
_OLDEST_ACTIVE = (
    select(Run.id, Run.state, Run.queue_generation)
    .where(Run.thread_id == bindparam("thread_id"), Run.state.in_(ACTIVE_RUN_STATES))
    .order_by(Run.thread_position)
    .limit(1)
)


def next_to_start(session: Session, thread_id: uuid.UUID) -> Queued | None:
    """The thread's oldest active run, if it is queued: the one to enqueue once the run before it ended."""
    row = session.execute(_OLDEST_ACTIVE, {"thread_id": thread_id}).one_or_none()
    return Queued(row.id, row.queue_generation) if row is not None and row.state == "queued" else None


# --- what the API shows of a thread: derived when read, so that no run's step writes the thread's row


def status_of() -> ColumnElement[str]:
    """A thread's status, from its runs: ``interrupted`` while one awaits approval, else ``busy`` while one is
    queued or running, else ``error`` when its last run that succeeded or failed failed, else ``idle``."""
    awaiting = exists().where(Run.thread_id == Thread.id, Run.state == "awaiting_approval")
    busy = exists().where(Run.thread_id == Thread.id, Run.state.in_(("queued", "running")))
    last_ended = (
        select(Run.state)
        .where(Run.thread_id == Thread.id, Run.state.in_(("succeeded", "failed")))
        .order_by(Run.thread_position.desc())
        .limit(1)
        .scalar_subquery()
    )
    return case(
        (awaiting, "interrupted"),
        (busy, "busy"),
        (last_ended == "failed", "error"),
        else_="idle",
    )


def _last_run_id() -> ColumnElement[uuid.UUID]:
    return (
        select(Run.id).where(Run.thread_id == Thread.id).order_by(Run.thread_position.desc()).limit(1).scalar_subquery()
    )


def _own_message_count() -> ColumnElement[int]:
    return (
        select(func.count())
        .select_from(MessageRow)
        .where(MessageRow.thread_id == Thread.id, MessageRow.subagent_call_id.is_(None))
        .scalar_subquery()
    )


@dataclass(frozen=True)
class ThreadView:
    """A thread as the API shows it, with what is derived from its runs and messages."""

    thread: Thread
    status: str
    last_run_id: uuid.UUID | None
    message_count: int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.thread, name)


def views(session: Session, threads: Sequence[Thread]) -> list[ThreadView]:
    """The views of ``threads``, derived in one statement."""
    if not threads:
        return []
    statement = select(Thread.id, status_of(), _last_run_id(), Thread.base_count + _own_message_count()).where(
        Thread.id.in_([thread.id for thread in threads])
    )
    derived = {row[0]: row[1:] for row in session.execute(statement)}
    return [ThreadView(thread, *derived[thread.id]) for thread in threads]


@dataclass(frozen=True)
class ThreadFilter:
    """What a thread list keeps: one status, one agent, and metadata values (compared as text)."""

    status: str | None = None
    agent_id: uuid.UUID | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


EVERY_THREAD = ThreadFilter()


def list_threads(
    session: Session, principal: Principal, page: PageRequest, kept: ThreadFilter = EVERY_THREAD
) -> Page[ThreadView]:
    """The threads a principal may see, newest first, that ``kept`` keeps."""
    statement = select(Thread).where(visible_to(principal))
    if kept.status is not None:
        statement = statement.where(status_of() == kept.status)
    if kept.agent_id is not None:
        statement = statement.where(Thread.agent_id == kept.agent_id)
    for key, value in kept.metadata.items():  # compared as text: ?metadata.n=5 finds {"n": 5} and {"n": "5"}
        statement = statement.where(Thread.meta[key].astext == value)
    found = paginate(session, statement, [Thread.created_at, Thread.id], page, descending=True)
    return Page(views(session, found.items), found.next_cursor)


# --- the conversation


@dataclass(frozen=True)
class Lineage:
    """Where a thread's conversation lies: its own messages, after its ancestors' up to their ``up_to_seq``."""

    thread_id: uuid.UUID
    tenant_id: uuid.UUID
    ancestors: tuple[tuple[uuid.UUID, int], ...]

    @classmethod
    def of(cls, session: Session, thread: Thread) -> Lineage:
        """The lineage of a thread, read in one statement (none for a thread that is not a fork)."""
        if thread.base_seq == 0:
            return cls(thread.id, thread.tenant_id, ())
        statement = select(ThreadAncestor.ancestor_id, ThreadAncestor.up_to_seq).where(
            ThreadAncestor.thread_id == thread.id
        )
        ancestors = tuple((ancestor, up_to) for ancestor, up_to in session.execute(statement))
        return cls(thread.id, thread.tenant_id, ancestors)

    def messages(self, before: int | None = None) -> ColumnElement[bool]:
        """The conversation's messages (numbered below ``before`` when given)."""
        own: ColumnElement[bool] = MessageRow.thread_id == self.thread_id
        segments = [
            own,
            *(and_(MessageRow.thread_id == ancestor, MessageRow.seq <= up_to) for ancestor, up_to in self.ancestors),
        ]
        clause = and_(MessageRow.tenant_id == self.tenant_id, MessageRow.subagent_call_id.is_(None), or_(*segments))
        return clause if before is None else and_(clause, MessageRow.seq < before)


def conversation_page(session: Session, lineage: Lineage, page: PageRequest) -> Page[MessageRow]:
    """One page of the conversation, by ``seq``."""
    return paginate(session, select(MessageRow).where(lineage.messages()), [MessageRow.seq], page)


@dataclass(frozen=True)
class Earlier:
    """What a run of a thread sees of the conversation before its own messages: the last messages (all, or at most
    a window's worth), the run each belongs to, and how many assistant turns the whole of it holds."""

    messages: list[Message]
    run_ids: list[uuid.UUID]
    turns: int


def earlier_conversation(session: Session, lineage: Lineage, before: int | None, most: int | None) -> Earlier:
    """The conversation before ``before`` (``None``: all of it): its last ``most`` messages (``None``: every one),
    in order, and the assistant turns of the whole of it."""
    clause = lineage.messages(before)
    statement = (
        select(MessageRow.seq, MessageRow.role, MessageRow.content, MessageRow.run_id)
        .where(clause)
        .order_by(MessageRow.seq.desc())
    )
    if most is not None:
        statement = statement.limit(most)
    rows = list(session.execute(statement))[::-1]
    messages = [Message(role=role, content=list(content), seq=seq) for seq, role, content, _ in rows]
    turns = sum(1 for message in messages if message.role == "assistant")
    if most is not None and len(rows) == most:  # the rest of the conversation is counted, not read
        turns = _assistant_turns(session, clause)
    return Earlier(messages, [row[3] for row in rows], turns)


@dataclass(frozen=True)
class Start:
    """What a thread run's claim reads of its thread: the number of its last stored message (its inner ones
    included; before any, where its own numbers start), and the conversation before the run. At the run's first
    claim, also where its event numbers end once :func:`start_of` took those of its input."""

    last_seq: int
    earlier: Earlier
    base_seq: int = 0
    event_seq: int | None = None


def _start_statement(*, first: bool) -> Any:
    """The claim's read of a thread, built once: the thread's tenant and ``base_seq``, its last number, and its
    last ``most`` conversation messages before ``before`` (a lateral join; ``most`` null: all).

    ``first``: the run's first claim, which also marks the run started in the same statement (a data-modifying
    ``WITH``; the claim holds the run's row): its own messages are numbered from the thread's last number on, its
    ``inputs`` messages take as many numbers and event numbers, and its kept input is cleared. A run whose start
    also answers calls left unanswered (rare) has its numbers moved on by :func:`hango.run.threads.begin`.
    """
    # Not named after a column of runs: an UPDATE sets every column its parameters name.
    thread_id = bindparam("thread", type_=Thread.id.type)
    last = select(func.max(MessageRow.seq)).where(MessageRow.thread_id == thread_id).scalar_subquery()
    own = (
        select(MessageRow.seq, MessageRow.role, MessageRow.content, MessageRow.run_id)
        .where(
            MessageRow.thread_id == Thread.id,
            MessageRow.tenant_id == Thread.tenant_id,
            MessageRow.subagent_call_id.is_(None),
            MessageRow.seq < bindparam("before", type_=Integer),
        )
        .order_by(MessageRow.seq.desc())
        .limit(bindparam("most", type_=Integer))
        .lateral()
    )
    columns: list[Any] = [Thread.tenant_id, Thread.base_seq, last, own.c.seq, own.c.role, own.c.content, own.c.run_id]
    if first:
        base = select(Thread.base_seq).where(Thread.id == thread_id).scalar_subquery()
        inputs = bindparam("inputs", type_=Integer)
        ending = func.coalesce(last, base)
        started = (
            update(Run)
            .where(Run.id == bindparam("run_id", type_=Run.id.type), Run.first_seq.is_(None))
            .values(first_seq=ending + 1, message_seq=ending + inputs, input=null(), event_seq=Run.event_seq + inputs)
            .returning(Run.event_seq)
            .cte("started")
        )
        columns.append(select(started.c.event_seq).scalar_subquery())
    return select(*columns).outerjoin(own, literal(True)).where(Thread.id == thread_id).order_by(own.c.seq)


_START = _start_statement(first=False)
_FIRST_START = _start_statement(first=True)
_NO_END = 2**31 - 1  # above every seq: "before" nothing


@dataclass(frozen=True)
class Starting:
    """A run's first claim: the run, and how many messages its input stores."""

    run_id: uuid.UUID
    inputs: int


def start_of(
    session: Session, thread_id: uuid.UUID, before: int | None, most: int | None, starting: Starting | None = None
) -> Start:
    """What a claim of a run of ``thread_id`` reads (the caller has the right to it: a worker's run's): for a thread
    that is not a fork, in one statement built once; a fork reads its lineage as well. ``starting``: the run's first
    claim, marked started in the same statement (:func:`_start_statement`)."""
    parameters: dict[str, Any] = {"thread": thread_id, "before": before or _NO_END, "most": most}
    if starting is not None:
        parameters |= {"run_id": starting.run_id, "inputs": starting.inputs}
    rows = list(session.execute(_START if starting is None else _FIRST_START, parameters))
    tenant_id, base_seq, seq = rows[0][0], rows[0][1], rows[0][2]
    last_seq = base_seq if seq is None else int(seq)
    event_seq = None if starting is None else int(rows[0][7])
    if base_seq:  # a fork: its conversation spans its ancestors
        thread = session.get_one(Thread, thread_id)
        lineage = Lineage.of(session, thread)
        return Start(last_seq, earlier_conversation(session, lineage, before, most), base_seq, event_seq)
    found = [row[3:7] for row in rows if row[3] is not None]
    messages = [Message(role=role, content=list(content), seq=number) for number, role, content, _ in found]
    turns = sum(1 for message in messages if message.role == "assistant")
    if most is not None and len(found) == most:  # the rest of the conversation is counted, not read
        turns = _assistant_turns(session, Lineage(thread_id, tenant_id, ()).messages(before))
    return Start(last_seq, Earlier(messages, [row[3] for row in found], turns), event_seq=event_seq)


def _assistant_turns(session: Session, clause: ColumnElement[bool]) -> int:
    counted = select(func.count()).select_from(MessageRow).where(clause, MessageRow.role == "assistant")
    return int(session.scalar(counted) or 0)


def conversation_count(session: Session, lineage: Lineage, up_to: int) -> int:
    """How many conversation messages are numbered up to ``up_to``."""
    statement = select(func.count()).select_from(MessageRow).where(lineage.messages(up_to + 1))
    return int(session.scalar(statement) or 0)


def message_at(session: Session, lineage: Lineage, seq: int) -> MessageRow | None:
    """The conversation's message numbered ``seq``, if there is one."""
    return session.scalar(select(MessageRow).where(lineage.messages(), MessageRow.seq == seq))


def following(session: Session, lineage: Lineage, seq: int) -> MessageRow | None:
    """The conversation's first message after ``seq``, if any."""
    statement = select(MessageRow).where(lineage.messages(), MessageRow.seq > seq).order_by(MessageRow.seq).limit(1)
    return session.scalar(statement)


def insert_fork(session: Session, parent: Thread, lineage: Lineage, fork: Thread, up_to: int) -> None:
    """Store ``fork``'s lineage (the parent up to ``up_to``, and what the parent shares up to there) and copy the
    parent's scratch files to it."""
    rows = [{"thread_id": fork.id, "ancestor_id": parent.id, "up_to_seq": up_to}]
    rows += [
        {"thread_id": fork.id, "ancestor_id": ancestor, "up_to_seq": min(shared, up_to)}
        for ancestor, shared in lineage.ancestors
        if min(shared, up_to) > 0
    ]
    session.execute(insert(ThreadAncestor), rows)
    columns = select(
        func.gen_random_uuid(), File.tenant_id, File.path, File.content, literal(fork.id, File.thread_id.type)
    ).where(File.tenant_id == parent.tenant_id, File.thread_id == parent.id)
    session.execute(
        insert(File).from_select(["id", "tenant_id", "path", "content", "thread_id"], columns),
        execution_options={"synchronize_session": False},
    )


# --- deletion


def shared_up_to(session: Session, thread_id: uuid.UUID) -> int | None:
    """The highest number up to which some other thread (a fork, live or deleted) shares this thread's messages."""
    statement = select(func.max(ThreadAncestor.up_to_seq)).where(ThreadAncestor.ancestor_id == thread_id)
    shared = session.scalar(statement)
    return None if shared is None else int(shared)


def remove(session: Session, thread: Thread) -> None:
    """Remove a thread whose runs have all ended, with its runs, messages, events, approvals and scratch files.

    Messages a fork shares stay, with the runs that own them, behind the thread's row marked deleted; they go with
    the last fork that shares them. Then every deleted ancestor no fork shares any more goes too.
    """
    runs = select(Run.id).where(Run.thread_id == thread.id)
    approvals = select(PendingApproval.id).where(PendingApproval.run_id.in_(runs))
    session.execute(
        delete(ApprovalEvent).where(
            ApprovalEvent.tenant_id == thread.tenant_id, ApprovalEvent.approval_id.in_(approvals)
        )
    )
    shared = shared_up_to(session, thread.id)
    if shared is None:
        ancestors = list(
            session.scalars(select(ThreadAncestor.ancestor_id).where(ThreadAncestor.thread_id == thread.id))
        )
        session.execute(delete(Thread).where(Thread.id == thread.id))  # its runs and everything theirs cascade
        _collect(session, ancestors)
        return
    session.execute(delete(RunEvent).where(RunEvent.run_id.in_(runs)))
    session.execute(delete(PendingApproval).where(PendingApproval.run_id.in_(runs)))
    session.execute(delete(SubagentCall).where(SubagentCall.run_id.in_(runs)))
    session.execute(delete(MessageRow).where(MessageRow.thread_id == thread.id, MessageRow.seq > shared))
    session.execute(delete(File).where(File.thread_id == thread.id))
    keeping = select(MessageRow.run_id).where(MessageRow.thread_id == thread.id)
    session.execute(delete(Run).where(Run.thread_id == thread.id, Run.id.not_in(keeping)))
    now = datetime.now(UTC)
    session.execute(update(Run).where(Run.thread_id == thread.id).values(deleted_at=now))
    session.execute(update(Thread).where(Thread.id == thread.id).values(deleted_at=now))


def _collect(session: Session, ancestors: Sequence[uuid.UUID]) -> None:
    """Remove the deleted ancestors that no thread shares messages with any more."""
    for ancestor_id in ancestors:
        statement = select(Thread).where(Thread.id == ancestor_id, Thread.deleted_at.is_not(None)).with_for_update()
        ancestor = session.scalar(statement)
        if ancestor is not None and shared_up_to(session, ancestor.id) is None:
            remove(session, ancestor)


# --- the thread's event stream: its runs one after the other


@dataclass(frozen=True)
class RunPlace:
    """A run of a thread and its place among the thread's runs."""

    run_id: uuid.UUID
    position: int


def run_from(session: Session, principal: Principal, thread_id: uuid.UUID, position: int) -> RunPlace | None:
    """The thread's first run at ``position`` or after, in one statement; ``None`` when it has none yet.

    Raises:
        NotFound: the principal may not see the thread (or it was deleted).
    """
    statement = (
        select(Thread.id, Run.id, Run.thread_position)
        .outerjoin(Run, (Run.thread_id == Thread.id) & (Run.thread_position >= position))
        .where(Thread.id == thread_id, visible_to(principal))
        .order_by(Run.thread_position)
        .limit(1)
    )
    row = session.execute(statement).one_or_none()
    if row is None:
        raise NotFound(f"thread {thread_id} not found")
    _, run_id, place = row
    return None if run_id is None or place is None else RunPlace(run_id, place)


def thread_run(session: Session, principal: Principal, thread_id: uuid.UUID, run_id: uuid.UUID) -> Run | None:
    """A run of a thread the principal may see (whoever started the run); ``None`` otherwise."""
    statement = (
        select(Run)
        .join(Thread, Thread.id == Run.thread_id)
        .where(Run.id == run_id, Run.thread_id == thread_id, visible_to(principal))
    )
    return session.scalar(statement)


def visible_run_count(session: Session, principal: Principal, thread_id: uuid.UUID) -> int | None:
    """How many runs the thread has been given (its last run's place), or ``None`` when the principal may not see
    it."""
    count = session.scalar(select(Thread.run_seq).where(Thread.id == thread_id, visible_to(principal)))
    return None if count is None else int(count)


def visible_run_head(
    session: Session, principal: Principal, thread_id: uuid.UUID, run_id: uuid.UUID
) -> tuple[str, int] | None:
    """A thread's run's state and last event number, or ``None`` when the principal may not see the thread."""
    statement = (
        select(Run.state, Run.event_seq)
        .join(Thread, Thread.id == Run.thread_id)
        .where(Run.id == run_id, Run.thread_id == thread_id, visible_to(principal))
    )
    row = session.execute(statement).one_or_none()
    return None if row is None else (row.state, row.event_seq)
