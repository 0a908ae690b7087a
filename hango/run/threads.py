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

from sqlalchemy import bindparam, update
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
    if run.first_seq is not None:  # a resumed run: its input is stored already
        earlier = thread_store.start_of(session, run.thread_id, run.first_seq, window).earlier
        return ThreadHistory(earlier.messages, earlier.turns)
    inputs = [Message(role=item["role"], content=list(item["content"])) for item in run.input or []]
    start = thread_store.start_of(session, run.thread_id, None, window, thread_store.Starting(run.id, len(inputs)))
    earlier = start.earlier
    first = start.last_seq + 1
    # A call left unanswered in what a fork shares belongs to a run of another thread: the fork's run answers it.
    repairs = [(owner if seq > start.base_seq else run.id, message) for owner, seq, message in _repairs(earlier)]
    written = len(repairs) + len(inputs)
    # The run's own messages start at its input, or at a repair it owns (a fork's): what a resume reads as its own.
    theirs = sum(1 for owner, _ in repairs if owner != run.id)
    assert start.event_seq is not None
    counters = _started(session, run, (first + theirs, first + written - 1, start.event_seq), len(repairs))
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


# Built once: a thread run's first claim writes it when the start also answers calls left unanswered.
_STARTED = (
    update(Run)
    .where(Run.id == bindparam("run_id"))
    .values(
        first_seq=bindparam("first_seq"),
        message_seq=bindparam("last"),
        event_seq=Run.event_seq + bindparam("events"),
    )
)


def _started(session: Session, run: Run, numbers: tuple[int, int, int], repairs: int) -> RunCounters:
    """The claimed run as started (its row locked by the claim). ``numbers``: where its own messages start, the
    number they end at, and where its event numbers end as :func:`hango.store.threads.start_of` left them for its
    input. ``repairs`` answers to calls left unanswered move its numbers on in a statement of their own, and take
    as many more event numbers."""
    first_own, last, event_seq = numbers
    if repairs:
        parameters = {"run_id": run.id, "first_seq": first_own, "last": last, "events": repairs}
        session.execute(_STARTED, parameters, execution_options={"synchronize_session": False})
        event_seq += repairs
    # What the row now holds, without marking the loaded run changed (a flush would write it again).
    for name, value in (("first_seq", first_own), ("message_seq", last), ("event_seq", event_seq)):
        set_committed_value(run, name, value)
    set_committed_value(run, "input", None)
    return RunCounters(run.id, run.tenant_id, last, event_seq, run.created_by, run.thread_id)


def after_ended(work: Work, run: Run | RunCounters) -> None:
    """Once a run of a thread has ended: enqueue the thread's next run, after commit (its oldest active one, when
    it is queued; a run still waiting for approval keeps the others waiting). Only a run that another run was added
    after while it was active (``followed``) looks: for any other, there is none."""
    if run.thread_id is None or not run.followed:
        return
    following = thread_store.next_to_start(work.session, run.thread_id)
    if following is not None:
        work.enqueue_after_commit(following)
