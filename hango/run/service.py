"""Run services used by the API: create, read, list, cancel, and read the message and event logs."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import insert

from hango.agent.messages import Message, text_block
from hango.agent.spec import snapshot
from hango.kernel.auth import Principal
from hango.kernel.errors import InvalidInput
from hango.kernel.models import Agent, Run
from hango.kernel.models import Message as MessageRow
from hango.kernel.pagination import Page, PageRequest
from hango.platform.events import ApprovalNotice, Event
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import transitions
from hango.store import agents as agent_store
from hango.store import approval_events as approval_event_store
from hango.store import events as event_store
from hango.store import messages as message_store
from hango.store import runs as run_store
from hango.store.audit import AuditRecord, insert_audit_events
from hango.store.messages import insert_messages, message_json


def input_messages(text: str | None, messages: list[dict[str, Any]] | None) -> list[Message]:
    """The conversation a run starts from: ``input`` text, or ``messages`` ending with the user's turn."""
    if (text is None) == (messages is None):
        raise InvalidInput.field("input", "give either input or messages, not both or neither")
    if text is not None:
        return [Message(role="user", content=[text_block(text)])]
    assert messages is not None
    converted = [
        Message(
            role=item["role"],
            content=[text_block(item["content"])] if isinstance(item["content"], str) else item["content"],
        )
        for item in messages
    ]
    if not converted or converted[-1].role != "user":
        raise InvalidInput.field("messages", "must end with a user message")
    return converted


def new_run(principal: Principal, agent: Agent, **values: Any) -> dict[str, Any]:
    """The row of a new queued run of ``agent`` by ``principal``, with ``values`` (its counters, its thread)."""
    return {
        "id": uuid.uuid4(),
        "tenant_id": principal.tenant_id,
        "agent_id": agent.id,
        "agent_snapshot": snapshot(agent),
        "created_by": principal.user_id,
        "state": "queued",
        "queue_generation": 1,
        "state_json": {},
        **values,
    }


def create_run(
    runtime: Runtime, principal: Principal, agent_id: uuid.UUID, messages: list[Message], trace_id: str | None = None
) -> Run:
    """Snapshot the agent, store the run ``queued`` with its input and its ``run.create`` audit row, and enqueue it
    after commit (a refusal, such as an unknown agent, writes nothing: the API audits it)."""
    with unit_of_work(runtime) as work:
        agent = agent_store.get_agent(work.session, principal.tenant_id, agent_id)
        # A new run's counters start where its first events and messages end: no row to bump.
        values = new_run(principal, agent, message_seq=len(messages), event_seq=1 + len(messages))
        run = work.session.scalars(insert(Run).returning(Run), [values]).one()
        rows = insert_messages(work.session, run, messages, None, first_seq=1)
        events = [("run.queued", {"reason": "created"}), *(("message.created", message_json(row)) for row in rows)]
        work.numbered(run, events)
        created = AuditRecord.by_user(
            principal, "run.create", ("run", str(run.id)), "success", {"agent_id": str(run.agent_id)}, trace_id
        )
        insert_audit_events(work.session, [created])
        work.enqueue_after_commit(run)
    return run


def cancel_run(runtime: Runtime, principal: Principal, run_id: uuid.UUID) -> Run:
    """Cancel a run that has not finished; a running loop notices at its next step."""
    with unit_of_work(runtime) as work:
        return transitions.cancel(work, run_store.get_run(work.session, principal, run_id, for_update=True))


def get_run(runtime: Runtime, principal: Principal, run_id: uuid.UUID) -> Run:
    """A run visible to the caller."""
    with runtime.db.read() as session:
        return run_store.get_run(session, principal, run_id)


def list_runs(runtime: Runtime, principal: Principal, page: PageRequest, state: str | None) -> Page[Run]:
    """Visible runs, newest first."""
    with runtime.db.transaction() as session:
        return run_store.list_runs(session, principal, page, state)


def list_messages(runtime: Runtime, principal: Principal, run_id: uuid.UUID, page: PageRequest) -> Page[MessageRow]:
    """A visible run's messages by ``seq``."""
    with runtime.db.transaction() as session:
        return message_store.list_messages(session, principal, run_id, page)


def events_after(
    runtime: Runtime, principal: Principal, run_id: uuid.UUID, after: int, limit: int = 500
) -> tuple[list[Event], str]:
    """A visible run's events after ``after``, and the run's current state, read together."""
    with runtime.db.transaction() as session:
        run = run_store.get_run(session, principal, run_id)
        logged = event_store.events_of(session, run, after, limit)
        return [Event(run.id, *entry) for entry in logged], run.state


def approval_events_after(
    runtime: Runtime, principal: Principal, after: int, limit: int = 500
) -> tuple[list[ApprovalNotice], int]:
    """The tenant's approval events after ``after`` that the principal may see, and the number the read got to.

    The number counts the events the principal may not see too (a member's stream skips other members' runs),
    so a reader can tell a published event that directly follows from one after a gap.
    """
    with runtime.db.transaction() as session:
        # Numbers are given in commit order: every event up to ``reached`` is committed, and read below.
        reached = approval_event_store.last_seq(session, principal.tenant_id)
        rows = approval_event_store.visible_after(session, principal, after, limit)
    notices = [ApprovalNotice.from_row(row) for row in rows]
    if len(rows) == limit:  # a page: the rest of the log is read next time
        reached = notices[-1].seq
    return notices, max(reached, notices[-1].seq if notices else after)
