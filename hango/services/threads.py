"""Threads for the API: create, list, read, change, delete and fork them, start runs on them and read their
conversation.

Who may do what: anyone in the tenant creates threads and starts runs on the threads they may see; a member sees
only the threads they created (another's is a 404, like another tenant's); changing the metadata and deleting take
the thread's creator, an owner or an admin.

A run on a thread is created in one transaction with the thread's row locked, so that two requests agree on which
run is active: ``reject`` refuses while one is, ``enqueue`` queues the new run behind it (started by the end of the
run before it), and ``interrupt`` cancels every active run before creating the new one.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import insert, select

from hango.agent.messages import Message
from hango.kernel.auth import Principal
from hango.kernel.errors import Conflict, Forbidden, InvalidInput, NotFound, ThreadBusy
from hango.kernel.models import Message as MessageRow
from hango.kernel.models import Run, Thread
from hango.kernel.pagination import Page, PageRequest
from hango.platform.events import Event
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import transitions
from hango.run.service import new_run
from hango.run.threads import input_json
from hango.store import agents as agent_store
from hango.store import events as event_store
from hango.store import runs as run_store
from hango.store import threads as store
from hango.store.audit import AuditRecord, insert_audit_events
from hango.store.threads import ThreadFilter, ThreadView

Strategy = Literal["reject", "enqueue", "interrupt"]
STRATEGIES: tuple[Strategy, ...] = ("reject", "enqueue", "interrupt")


def check_metadata(metadata: Any, most_bytes: int) -> dict[str, Any]:
    """``metadata`` when it is a JSON object of at most ``most_bytes`` bytes; a 400 naming the field otherwise."""
    if not isinstance(metadata, dict):
        raise InvalidInput.field("metadata", "must be a JSON object")
    size = len(json.dumps(metadata, separators=(",", ":"), ensure_ascii=False).encode())
    if size > most_bytes:
        raise InvalidInput.field(
            "metadata", f"is {size} bytes as JSON; at most {most_bytes} (HANGO_MAX_THREAD_METADATA_BYTES)"
        )
    return metadata


def create_thread(runtime: Runtime, principal: Principal, agent_id: uuid.UUID, metadata: dict[str, Any]) -> ThreadView:
    """A new, empty thread with an agent of the tenant (:class:`NotFound` for another tenant's)."""
    metadata = check_metadata(metadata, runtime.settings.max_thread_metadata_bytes)
    with runtime.db.transaction() as session:
        agent = agent_store.get_agent(session, principal.tenant_id, agent_id)
        thread = Thread(
            id=uuid.uuid4(),
            tenant_id=principal.tenant_id,
            agent_id=agent.id,
            created_by=principal.user_id,
            meta=metadata,
        )
        session.add(thread)
        session.flush()
        session.refresh(thread)
        return ThreadView(thread, "idle", None, 0)


def get_thread(runtime: Runtime, principal: Principal, thread_id: uuid.UUID) -> ThreadView:
    """A thread the caller may see."""
    with runtime.db.read() as session:
        [view] = store.views(session, [store.get_thread(session, principal, thread_id)])
        return view


def list_threads(
    runtime: Runtime, principal: Principal, page: PageRequest, kept: ThreadFilter = store.EVERY_THREAD
) -> Page[ThreadView]:
    """The threads the caller may see, newest first."""
    with runtime.db.read() as session:
        return store.list_threads(session, principal, page, kept)


def _require_owner_or_manager(principal: Principal, thread: Thread) -> None:
    if not (principal.is_manager or thread.created_by == principal.user_id):
        raise Forbidden("only the thread's creator, an owner or an admin may change or delete it")


def update_thread(runtime: Runtime, principal: Principal, thread_id: uuid.UUID, metadata: Any) -> ThreadView:
    """Replace a thread's metadata (its creator, an owner or an admin)."""
    metadata = check_metadata(metadata, runtime.settings.max_thread_metadata_bytes)
    with runtime.db.transaction() as session:
        thread = store.get_thread(session, principal, thread_id, for_update=True)
        _require_owner_or_manager(principal, thread)
        thread.meta = metadata
        thread.updated_at = datetime.now(UTC)
        session.flush()
        [view] = store.views(session, [thread])
        return view


def delete_thread(runtime: Runtime, principal: Principal, thread_id: uuid.UUID) -> None:
    """Remove a thread with its runs, messages, events, approvals and scratch files (its creator, an owner or an
    admin); :class:`Conflict` while a run of it is active."""
    with runtime.db.transaction() as session:
        thread = store.get_thread(session, principal, thread_id, for_update=True)
        _require_owner_or_manager(principal, thread)
        active = store.active_runs(session, thread.id)
        if active:
            raise Conflict(f"thread {thread_id} has an active run ({active[0].id}); cancel it first")
        store.remove(session, thread)
    # Its streams (waiting for a next run that will never come) read that the thread is gone, and end.
    runtime.publisher.publish([], threads=[thread_id])


def fork_thread(runtime: Runtime, principal: Principal, thread_id: uuid.UUID, up_to_seq: int | None) -> ThreadView:
    """A new thread of the same agent and metadata whose conversation is the first messages of this one, up to
    ``up_to_seq`` (default: all), shared and not copied; its scratch files start as a copy of this one's."""
    with runtime.db.transaction() as session:
        parent = store.get_thread(session, principal, thread_id, for_update=True)
        active = store.active_runs(session, parent.id)
        if active:
            raise Conflict(f"thread {thread_id} has an active run ({active[0].id}); fork it once that run has ended")
        lineage = store.Lineage.of(session, parent)
        last = _last_conversation_seq(session, lineage)
        up_to = last if up_to_seq is None else up_to_seq
        _check_fork_point(session, lineage, up_to, last)
        fork = Thread(
            id=uuid.uuid4(),
            tenant_id=parent.tenant_id,
            agent_id=parent.agent_id,
            created_by=principal.user_id,
            meta=dict(parent.meta),
            base_seq=up_to,
            base_count=store.conversation_count(session, lineage, up_to),
        )
        session.add(fork)
        session.flush()
        store.insert_fork(session, parent, lineage, fork, up_to)
        session.refresh(fork)
        return ThreadView(fork, "idle", None, fork.base_count)


def _last_conversation_seq(session: Any, lineage: store.Lineage) -> int:
    last = session.scalar(select(MessageRow.seq).where(lineage.messages()).order_by(MessageRow.seq.desc()).limit(1))
    return 0 if last is None else int(last)


def _check_fork_point(session: Any, lineage: store.Lineage, up_to: int, last: int) -> None:
    """A fork point names a message of the conversation, and does not separate a tool call from its result."""
    if last == 0:
        if up_to != 0:
            raise InvalidInput.field("up_to_seq", "the thread has no messages yet; leave up_to_seq out")
        return
    if not 1 <= up_to <= last:
        raise InvalidInput.field("up_to_seq", f"must be between 1 and {last}, the conversation's last seq")
    message = store.message_at(session, lineage, up_to)
    if message is None:
        raise InvalidInput.field("up_to_seq", f"{up_to} is not the seq of a message of the conversation")
    following = store.following(session, lineage, up_to)
    if following is not None and following.role == "tool":
        raise InvalidInput.field(
            "up_to_seq",
            f"message {up_to} is followed by the results of its tool calls ({following.seq}); fork after them",
        )


def create_run(
    runtime: Runtime,
    principal: Principal,
    thread_id: uuid.UUID,
    messages: list[Message],
    strategy: Strategy = "reject",
    *,
    agent_id: uuid.UUID | None = None,
    trace_id: str | None = None,
) -> Run:
    """Start a run on a thread, by ``strategy`` while another is active; enqueued after commit when it may start.

    Raises:
        NotFound: the caller may not see the thread (or its agent is gone).
        InvalidInput: ``agent_id`` is given and is not the thread's agent.
        ThreadBusy: a run is active and the strategy is ``reject``.
    """
    with unit_of_work(runtime) as work:
        session = work.session
        thread, agent = store.take_position(session, principal, thread_id)  # the thread locked until commit
        if agent_id is not None and agent_id != thread.agent_id:
            raise InvalidInput.field(
                "agent_id", f"thread {thread_id} belongs to agent {thread.agent_id}, not {agent_id}"
            )
        # Locked until commit, and followed: a run ending meanwhile waits, then sees the new run and enqueues it.
        active = store.follow_active(session, thread)
        if active and strategy == "reject":
            raise ThreadBusy(thread.id, active[0])
        if strategy == "interrupt":
            for run in store.active_runs(session, thread.id):  # the ones just locked
                transitions.cancel(work, run)
            active = []
        position, stored = thread.run_seq, input_json(messages)  # the input is stored as messages when it starts
        values = new_run(principal, agent, thread_id=thread.id, thread_position=position, input=stored, event_seq=1)
        run = session.scalars(insert(Run).returning(Run), [values]).one()
        work.numbered(run, [("run.queued", {"reason": "created", "thread_id": str(thread.id)})])
        detail = {"agent_id": str(run.agent_id), "thread_id": str(thread.id), "multitask_strategy": strategy}
        created = AuditRecord.by_user(principal, "run.create", ("run", str(run.id)), "success", detail, trace_id)
        insert_audit_events(session, [created])
        if not active:
            work.enqueue_after_commit(run)
        work.wake_thread(thread.id)
    return run


def list_messages(runtime: Runtime, principal: Principal, thread_id: uuid.UUID, page: PageRequest) -> Page[MessageRow]:
    """The thread's conversation by ``seq``."""
    with runtime.db.read() as session:
        thread = store.get_thread(session, principal, thread_id)
        return store.conversation_page(session, store.Lineage.of(session, thread), page)


def list_runs(runtime: Runtime, principal: Principal, thread_id: uuid.UUID, page: PageRequest) -> Page[Run]:
    """The thread's runs, newest first."""
    with runtime.db.read() as session:
        thread = store.get_thread(session, principal, thread_id)
        return run_store.list_thread_runs(session, thread.id, page)


def run_from(runtime: Runtime, principal: Principal, thread_id: uuid.UUID, position: int) -> store.RunPlace | None:
    """The thread's first run at ``position`` or after (``None``: none yet), for its event stream.

    Raises:
        NotFound: the caller may not see the thread (or it was deleted).
    """
    with runtime.db.read() as session:
        return store.run_from(session, principal, thread_id, position)


def run_events_after(
    runtime: Runtime, principal: Principal, thread_id: uuid.UUID, run_id: uuid.UUID, after: int, limit: int = 500
) -> tuple[list[Event], str]:
    """The events after ``after`` of a run of a thread the caller may see (whoever started the run), and the run's
    state, read first: once it is final, every event of the run is committed and among those read.

    Raises:
        NotFound: the caller may not see the thread (or it was deleted).
    """
    with runtime.db.transaction() as session:
        run = store.thread_run(session, principal, thread_id, run_id)
        if run is None:
            raise NotFound(f"thread {thread_id} not found")
        logged = event_store.events_of(session, run, after, limit)
        return [Event(run.id, *entry) for entry in logged], run.state
