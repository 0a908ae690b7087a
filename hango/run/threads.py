"""A thread's runs on the worker's side: where a run starts in its thread's conversation, and which run starts next.

A run of a thread is created with its input kept on its row. When a worker claims it (which only the thread's
oldest active run can be: :data:`hango.store.runs.FIRST_OF_THREAD`), the run before it has ended, so the claim's
transaction can put the run in the conversation: the calls the run before left unanswered are answered
``tool call interrupted`` (a message of that run), then the input is stored, numbered thread-wide after the last
message. Nothing of the conversation is copied: the loop reads the earlier messages, or only the last of them when
the agent sets a history window.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, null, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from hango.agent.messages import Message, ToolResult
from hango.agent.middleware.repair import INTERRUPTED
from hango.kernel.models import Run
from hango.platform.work import Work
from hango.store import threads as thread_store
from hango.store.messages import insert_messages, message_json, to_message
from hango.store.runs import RunCounters


@dataclass(frozen=True)
class ThreadHistory:
    """What a thread's run sees before its own messages: the earlier conversation as read (all of it, or the last
    messages a window may show), and how many assistant turns the whole of it holds."""

    messages: list[Message]
    turns: int
    # At a run's first claim, its own messages as just stored (its input): nothing to read back.
    own: list[Message] | None = None


def input_json(messages: list[Message]) -> list[dict[str, Any]]:
    """A thread run's input as its row keeps it until the run starts."""
    return [{"role": message.role, "content": message.content} for message in messages]


def begin(work: Work, run: Run, window: int | None) -> ThreadHistory:
    """Read the earlier conversation of a claimed thread run; at its first claim, also answer the calls the run
    before left unanswered and store the run's input after them (numbered thread-wide, with their events)."""
    session = work.session
    assert run.thread_id is not None
    start = thread_store.start_of(session, run.thread_id, run.first_seq, window)
    earlier = start.earlier
    if run.first_seq is not None:  # a resumed run: its input is stored already
        return ThreadHistory(earlier.messages, earlier.turns)
    first = start.last_seq + 1
    # A call left unanswered in what a fork shares belongs to a run of another thread: the fork's run answers it.
    repairs = [(owner if seq > start.base_seq else run.id, message) for owner, seq, message in _repairs(earlier)]
    inputs = [Message(role=item["role"], content=list(item["content"])) for item in run.input or []]
    written = len(repairs) + len(inputs)
    # The run's own messages start at its input, or at a repair it owns (a fork's): what a resume reads as its own.
    theirs = sum(1 for owner, _ in repairs if owner != run.id)
    counters = _started(session, run, first + theirs, first + written - 1, written)
    rows = [
        *(
            insert_messages(session, _owner(run, owner), [message], None, first + index, run.thread_id)[0]
            for index, (owner, message) in enumerate(repairs)
        ),
        *insert_messages(session, counters, inputs, None, first + len(repairs), run.thread_id),
    ]
    work.numbered(counters, [("message.created", message_json(row)) for row in rows])
    stored = [to_message(row) for row in rows]
    return ThreadHistory([*earlier.messages, *stored[:theirs]], earlier.turns, own=stored[theirs:])


def _repairs(earlier: thread_store.Earlier) -> list[tuple[uuid.UUID, int, Message]]:
    """The answers to the calls the conversation's last assistant message left unanswered (its run was cancelled
    or failed), each with the run that message belongs to and its number."""
    answered: set[str] = set()
    for index in range(len(earlier.messages) - 1, -1, -1):
        message = earlier.messages[index]
        if message.role == "assistant":
            dangling = [call.id for call in message.tool_calls if call.id not in answered]
            if not dangling:
                return []
            content = [ToolResult(call_id, INTERRUPTED, is_error=True).block() for call_id in dangling]
            return [(earlier.run_ids[index], message.seq or 0, Message(role="tool", content=content))]
        answered |= message.tool_result_ids
    return []


def _owner(run: Run, run_id: uuid.UUID) -> RunCounters:
    """What inserting a message of another run of the same thread (and tenant) needs to know of it."""
    return RunCounters(run_id, run.tenant_id, 0, 0, run.created_by, run.thread_id)


# Built once: every thread run's first claim writes it.
_STARTED = (
    update(Run)
    .where(Run.id == bindparam("run_id"))
    .values(
        first_seq=bindparam("first_seq"),
        message_seq=bindparam("last"),
        input=null(),
        event_seq=Run.event_seq + bindparam("events"),
    )
    .returning(Run.id, Run.tenant_id, Run.message_seq, Run.event_seq, Run.created_by, Run.thread_id)
)


def _started(session: Session, run: Run, first_own: int, last: int, events: int) -> RunCounters:
    """Mark the claimed run started at ``first_own`` with its messages numbered up to ``last``, taking ``events``
    event numbers (its row is locked by the claim)."""
    parameters = {"run_id": run.id, "first_seq": first_own, "last": last, "events": events}
    row = session.execute(_STARTED, parameters, execution_options={"synchronize_session": False}).one()
    # What the row now holds, without marking the loaded run changed (a flush would write it again).
    for name, value in (("first_seq", first_own), ("message_seq", last), ("event_seq", row.event_seq)):
        set_committed_value(run, name, value)
    set_committed_value(run, "input", None)
    return RunCounters(*row)


def after_ended(work: Work, thread_id: uuid.UUID | None) -> None:
    """Once a run of a thread has ended: enqueue the thread's next run, after commit (its oldest active one, when
    it is queued; a run still waiting for approval keeps the others waiting)."""
    if thread_id is None:
        return
    following = thread_store.next_to_start(work.session, thread_id)
    if following is not None:
        work.enqueue_after_commit(following)
