"""Threads: conversations that go on across runs, one run at a time; their runs, messages, forks and events."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from flask import Response, request
from marshmallow import fields, pre_load, validate

from hango.api import examples, sse
from hango.api.audit import audit_target, audit_written, audited
from hango.api.context import principal, services, trace_id
from hango.api.parsing import Blueprint
from hango.api.runs import EventArgs, MessageOut, RunInput, RunSchema
from hango.api.schemas import ListArgs, cursor_field, list_of, page_request, refusal
from hango.kernel.errors import InvalidInput
from hango.kernel.pagination import Page
from hango.run import service as run_service
from hango.services import threads
from hango.store.threads import THREAD_STATUSES, ThreadFilter, ThreadView
from hango.streams.threads import open_thread_stream

blp = Blueprint("threads", __name__, url_prefix="/v1", description="Threads: conversations across runs")
METADATA_PREFIX = "metadata."


class ThreadCreate(ma.Schema):
    agent_id = fields.UUID(
        required=True, metadata={"description": "the agent the thread talks to, of the caller's tenant (404 otherwise)"}
    )
    metadata = fields.Raw(
        load_default=dict,
        metadata={
            "type": "object",
            "description": "your own labels, a JSON object of at most HANGO_MAX_THREAD_METADATA_BYTES (16 KiB) as "
            "JSON; filter on them with ?metadata.KEY=VALUE",
        },
    )


class ThreadUpdate(ma.Schema):
    metadata = fields.Raw(
        required=True, metadata={"type": "object", "description": "the new metadata, replacing the old whole"}
    )


class ThreadSchema(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the thread's id"})
    agent_id = fields.UUID(required=True, metadata={"description": "the agent every run of the thread runs"})
    created_by = fields.UUID(required=True, metadata={"description": "the user who created the thread"})
    created_at = fields.DateTime(required=True, metadata={"description": "when the thread was created (UTC)"})
    updated_at = fields.DateTime(
        required=True, metadata={"description": "when a run was last started on it or its metadata changed (UTC)"}
    )
    status = fields.String(
        required=True,
        metadata={
            "enum": list(THREAD_STATUSES),
            "description": "interrupted (a run awaits approval), busy (a run is queued or running), error (its last "
            "run that ended failed; cancelled runs do not count) or idle",
        },
    )
    metadata = fields.Dict(required=True, attribute="meta", metadata={"description": "the thread's metadata"})
    last_run_id = fields.UUID(
        required=True, allow_none=True, metadata={"description": "the thread's newest run; null before its first"}
    )
    message_count = fields.Integer(
        required=True,
        metadata={"description": "the messages of its conversation (a fork's shared ones included, subagents' not)"},
    )


class ThreadListArgs(ListArgs):
    status = fields.String(
        load_default=None,
        validate=validate.OneOf(THREAD_STATUSES),
        metadata={"description": "only threads with this status"},
    )
    agent_id = fields.UUID(load_default=None, metadata={"description": "only threads with this agent"})

    @pre_load
    def _without_metadata_filters(self, data: Any, **_: Any) -> dict[str, Any]:
        # ?metadata.KEY=VALUE filters are read by the view: their names are the caller's keys.
        return {key: data[key] for key in data if not key.startswith(METADATA_PREFIX)}


class ThreadRunCreate(RunInput):
    """The input of a thread's run, and what to do while another is active."""


class ForkCreate(ma.Schema):
    up_to_seq = fields.Integer(
        load_default=None,
        metadata={
            "description": "the fork's conversation is the messages up to this seq (between 1 and the last; not "
            "between a tool call and its results); default: the whole conversation"
        },
    )


class ThreadMessage(ma.Schema):
    seq = fields.Integer(required=True, metadata={"description": "the message's place in the thread, thread-wide"})
    run_id = fields.UUID(required=True, metadata={"description": "the run that stored the message"})
    role = fields.String(required=True, metadata={"description": "user, assistant or tool"})
    content = MessageOut().fields["content"]


class ThreadMessageArgs(ListArgs):
    cursor = cursor_field(int)  # ordered by seq


ThreadList = list_of(ThreadSchema, "ThreadList")
ThreadMessageList = list_of(ThreadMessage, "ThreadMessageList")
ThreadRunList = list_of(RunSchema, "ThreadRunList")


def _metadata_filters() -> dict[str, str]:
    filters: dict[str, str] = {}
    for name, value in request.args.items(multi=True):
        if name.startswith(METADATA_PREFIX):
            key = name[len(METADATA_PREFIX) :]
            if not key or "\x00" in key:
                raise InvalidInput.field(name, "name a metadata key without a NUL: ?metadata.KEY=VALUE")
            filters[key] = value  # a NUL in a value is refused with every query argument
    return filters


@blp.route("/threads", methods=["POST"])
@blp.problems(404)
@blp.arguments(ThreadCreate, example=examples.THREAD_CREATE)
@blp.response(201, ThreadSchema, example={**examples.THREAD, "status": "idle", "last_run_id": None, "message_count": 0})
@audited("thread.create", "thread")
def create_thread(body: dict[str, Any]) -> ThreadView:
    """Create a thread with an agent of the tenant: a conversation that goes on across its runs.

    Anyone in the tenant may create one (a member then sees it among their own). Start runs on it with POST
    /v1/threads/{thread_id}/runs. Audited as thread.create.
    """
    view = threads.create_thread(services().runtime, principal(), body["agent_id"], body["metadata"])
    audit_target("thread", view.thread.id, agent_id=str(view.thread.agent_id))
    return view


@blp.route("/threads", methods=["GET"])
@blp.arguments(ThreadListArgs, location="query")
@blp.response(200, ThreadList, example=examples.THREADS)
def list_threads(args: dict[str, Any]) -> Page[ThreadView]:
    """Threads visible to the caller (a member sees their own), newest first.

    Filters: ?status=, ?agent_id=, and ?metadata.KEY=VALUE for each metadata key to match (compared as text).
    """
    kept = ThreadFilter(args["status"], args["agent_id"], _metadata_filters())
    return threads.list_threads(services().runtime, principal(), page_request(args), kept)


@blp.route("/threads/<uuid:thread_id>", methods=["GET"])
@blp.problems(404)
@blp.response(200, ThreadSchema, example=examples.THREAD)
def get_thread(thread_id: uuid.UUID) -> ThreadView:
    """One thread.

    Its status, metadata, newest run and message count. Everyone in the tenant may read any thread except that a
    member sees only the threads they created: another member's, like another tenant's, is a 404.
    """
    return threads.get_thread(services().runtime, principal(), thread_id)


@blp.route("/threads/<uuid:thread_id>", methods=["PATCH"])
@blp.problems(403, 404)
@blp.arguments(ThreadUpdate, example={"metadata": {"customer": "acme", "channel": "email"}})
@blp.response(200, ThreadSchema, example=examples.THREAD)
@audited("thread.update", "thread", target_arg="thread_id")
def update_thread(body: dict[str, Any], thread_id: uuid.UUID) -> ThreadView:
    """Replace a thread's metadata.

    The new metadata replaces the old one whole. Only the thread's creator, an owner or an admin may change it (403
    otherwise). Audited as thread.update.
    """
    return threads.update_thread(services().runtime, principal(), thread_id, body["metadata"])


@blp.route("/threads/<uuid:thread_id>", methods=["DELETE"])
@blp.problems(403, 404, 409)
@blp.response(204)
@blp.doc(
    responses={
        "409": refusal(
            409, examples.problem(409, "conflict", "Conflict", f"thread {examples.THREAD_ID} has an active run")
        )
    }
)
@audited("thread.delete", "thread", target_arg="thread_id")
def delete_thread(thread_id: uuid.UUID) -> None:
    """Delete a thread.

    Its runs, messages, events, approvals and scratch files go with it; its forks stay whole (the messages they
    share are kept for them until the last of them is deleted). Only its creator, an owner or an admin may delete
    it (403 otherwise); while one of its runs is queued, running or awaiting approval it is a 409. Audited as
    thread.delete.
    """
    threads.delete_thread(services().runtime, principal(), thread_id)


@blp.route("/threads/<uuid:thread_id>/runs", methods=["POST"])
@blp.problems(404, 409)
@blp.arguments(ThreadRunCreate, example=examples.THREAD_RUN_CREATE)
@blp.response(202, RunSchema, example=examples.THREAD_RUN)
@audited("run.create", "run")
def create_thread_run(body: dict[str, Any], thread_id: uuid.UUID) -> Any:
    """Start a run on a thread: the model sees the thread's conversation, then the new input.

    While a run of the thread is queued, running or awaiting approval, multitask_strategy decides: reject (the
    default) answers 409 urn:hango:problem:thread-busy with active_run_id; enqueue queues the run to start after the
    earlier ones, in order; interrupt cancels them in the transaction that creates the new run. Audited as
    run.create.
    """
    messages = run_service.input_messages(body.get("input"), body.get("messages"))
    run = threads.create_run(
        services().runtime, principal(), thread_id, messages, body["multitask_strategy"], trace_id=trace_id()
    )
    audit_written()
    return run


@blp.route("/threads/<uuid:thread_id>/runs", methods=["GET"])
@blp.problems(404)
@blp.arguments(ListArgs, location="query")
@blp.response(200, ThreadRunList, example=examples.page(examples.THREAD_RUN))
def list_thread_runs(args: dict[str, Any], thread_id: uuid.UUID) -> Any:
    """The thread's runs, newest first.

    Every run started on the thread, whoever started it; pages come with ?limit= and ?cursor=.
    """
    return threads.list_runs(services().runtime, principal(), thread_id, page_request(args))


@blp.route("/threads/<uuid:thread_id>/messages", methods=["GET"])
@blp.problems(404)
@blp.arguments(ThreadMessageArgs, location="query")
@blp.response(200, ThreadMessageList, example=examples.THREAD_MESSAGES)
def list_thread_messages(args: dict[str, Any], thread_id: uuid.UUID) -> Any:
    """The thread's conversation, by its thread-wide seq.

    Every message of its runs in order (subagents' inner messages excluded; they take numbers of their own, so seq
    can skip), after the messages a fork shares with the thread it was forked from. Each names the run that stored
    it. Keyset paged with ?limit= and ?cursor=.
    """
    return threads.list_messages(services().runtime, principal(), thread_id, page_request(args))


@blp.route("/threads/<uuid:thread_id>/fork", methods=["POST"])
@blp.problems(404, 409)
@blp.arguments(ForkCreate, required=False, example=examples.THREAD_FORK)
@blp.response(201, ThreadSchema, example=examples.THREAD)
@audited("thread.fork", "thread", target_arg="thread_id")
def fork_thread(body: dict[str, Any], thread_id: uuid.UUID) -> ThreadView:
    """Fork a thread at a message.

    The new thread has the same agent and metadata, and its conversation is this one's messages up to up_to_seq
    (default: all of them), shared rather than copied; its scratch files start as a copy of this one's. up_to_seq
    must be a message's seq and may not separate a tool call from its results (400); while a run of the thread is
    active it is a 409. Audited as thread.fork.
    """
    fork = threads.fork_thread(services().runtime, principal(), thread_id, body["up_to_seq"])
    audit_target("thread", thread_id, fork_id=str(fork.thread.id))
    return fork


@blp.route("/threads/<uuid:thread_id>/events", methods=["GET"])
@blp.problems(404)
@blp.arguments(EventArgs, location="query")
@blp.headers(sse.LAST_EVENT_ID)
@blp.doc(responses=sse.stream_responses("the events of the thread's runs, run after run", examples.THREAD_EVENTS))
def stream_thread_events(args: dict[str, Any], thread_id: uuid.UUID) -> Response:
    """Server-Sent Events: every event of the thread's runs, run after run in the order they were created, from
    the first (or after ``Last-Event-ID`` / ``?after=``), then live.

    Each event's data is the run event's data with ``run_id``; its ``id`` is the run's place in the thread times
    2^32 plus the event's number in the run, so ids increase across runs and resuming after one misses nothing.
    The stream stays open while the thread exists, idle or not: a run started later streams on the same
    connection. It is re-authorised at every keep-alive: a revoked token, a removed membership or the thread's
    deletion closes it. Anyone who can see the thread may follow it (otherwise 404); a user holding
    HANGO_MAX_STREAMS_PER_USER streams gets a 429, and a full process a 503, both with Retry-After.
    """
    after = sse.last_event_id(args.get("after") or 0)
    # Refusals (404, 429, 503) are raised here, so they are responses and not broken streams.
    events = open_thread_stream(services().runtime, services().live, principal(), thread_id, after)
    return sse.event_stream(events, events.close, events.send_directly)
