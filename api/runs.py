"""Runs: create, list, read, cancel; their messages; and their live event stream (SSE)."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from flask import Response
from marshmallow import fields, validate

from hango.api import examples, sse
from hango.api.audit import audit_written, audited
from hango.api.context import principal, services, trace_id
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, cursor_field, list_of, page_request
from hango.kernel.models import RUN_STATES, Run
from hango.kernel.pagination import Page
from hango.run import service
from hango.services import threads
from hango.streams.live import open_stream

blp = Blueprint("runs", __name__, url_prefix="/v1", description="Runs, their messages and their events")


class TextBlock(ma.Schema):
    type = fields.String(required=True, validate=validate.Equal("text"), metadata={"description": "always text"})
    text = fields.String(required=True, metadata={"description": "the block's text"})


class Content(fields.Field):  # type: ignore[type-arg]
    """A message's content: a string, or a list of text blocks."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return fields.List(fields.Nested(TextBlock))._deserialize(value, attr, data, **kwargs)
        raise ma.ValidationError("must be a string or a list of text blocks")


TEXT_BLOCK = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "text"],
    "properties": {
        "type": {"type": "string", "enum": ["text"], "description": "always text"},
        "text": {"type": "string", "description": "the block's text"},
    },
}


class InputMessage(ma.Schema):
    role = fields.String(
        required=True,
        validate=validate.OneOf(["user", "assistant"]),
        metadata={"description": "who said it: the user or the assistant"},
    )
    content = Content(
        required=True,
        metadata={
            "description": "the message's text, or a list of text blocks",
            "oneOf": [{"type": "string"}, {"type": "array", "items": TEXT_BLOCK}],
        },
    )


class RunInput(ma.Schema):
    input = fields.String(
        validate=validate.Length(max=1_000_000),
        metadata={"description": "the user's message, at most 1,000,000 characters; give input or messages, not both"},
    )
    messages = fields.List(
        fields.Nested(InputMessage),
        validate=validate.Length(min=1, max=1000),
        metadata={"description": "the conversation so far, 1 to 1000 messages, ending with a user message"},
    )
    multitask_strategy = fields.String(
        load_default="reject",
        validate=validate.OneOf(threads.STRATEGIES),
        metadata={
            "description": "on a thread, what to do while a run of it is active: reject (the default: 409 "
            "thread-busy), enqueue (start after every earlier run, in order) or interrupt (cancel the active runs)"
        },
    )


class RunCreate(RunInput):
    agent_id = fields.UUID(
        required=True,
        metadata={
            "description": "the agent to run, of the caller's tenant (404 otherwise); the run keeps a snapshot "
            "of its configuration"
        },
    )
    thread_id = fields.UUID(
        load_default=None,
        metadata={
            "description": "run on this thread (the same as POST /v1/threads/{thread_id}/runs); agent_id must then "
            "be the thread's (400 otherwise)"
        },
    )


class RunSchema(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the run's id"})
    agent_id = fields.UUID(required=True, metadata={"description": "the agent the run was started from"})
    thread_id = fields.UUID(
        required=True, allow_none=True, metadata={"description": "the thread the run belongs to; null for none"}
    )
    state = fields.String(
        required=True,
        metadata={
            "description": "queued, running, awaiting_approval (suspended until its pending calls are decided), or "
            "one of the final states succeeded, failed and cancelled"
        },
    )
    created_by = fields.UUID(required=True, metadata={"description": "the user who started the run"})
    created_at = fields.DateTime(required=True, metadata={"description": "when the run was created (UTC)"})
    started_at = fields.DateTime(
        allow_none=True, metadata={"description": "when a worker first took the run; null while it is queued"}
    )
    finished_at = fields.DateTime(
        allow_none=True, metadata={"description": "when the run reached a final state; null until then"}
    )
    awaiting_since = fields.DateTime(
        allow_none=True, metadata={"description": "when the run began waiting for decisions; null unless it waits"}
    )
    error = fields.String(
        allow_none=True,
        metadata={
            "description": "why a failed run failed, in words (exactly `approval expired` when a deadline failed "
            "it); null otherwise"
        },
    )
    turn = fields.Integer(
        required=True, metadata={"description": "the model turns the run's own loop has taken (subagents' excluded)"}
    )
    usage = fields.Method(
        "_usage",
        metadata={
            "description": "tokens used by the run's model calls, subagents' included: input_tokens and "
            "output_tokens, integers"
        },
    )

    def _usage(self, run: Run) -> dict[str, int]:
        return {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens}


class MessageOut(ma.Schema):
    seq = fields.Integer(
        required=True,
        metadata={"description": "the message's place in the run, from 1, one sequence shared with its subagents"},
    )
    role = fields.String(
        required=True,
        metadata={"description": "user, assistant (text and tool_use blocks) or tool (the results of one batch)"},
    )
    content = fields.List(
        fields.Dict(),
        required=True,
        metadata={
            "description": 'blocks: {"type": "text", "text"}, {"type": "tool_use", "id", "name", "input"} (the '
            'model\'s own input, even after an edit) or {"type": "tool_result", "tool_use_id", "content", "is_error"}'
        },
    )
    subagent_call_id = fields.UUID(
        allow_none=True,
        required=True,
        metadata={"description": "the subagent call whose loop wrote the message; null: the run's own loop"},
    )


class RunListArgs(ListArgs):
    state = fields.String(
        load_default=None,
        validate=validate.OneOf(RUN_STATES),
        metadata={"description": "only runs in this state; absent: every state"},
    )


class MessageListArgs(ListArgs):
    cursor = cursor_field(int)  # messages are ordered by seq


class EventArgs(ma.Schema):
    after = fields.Integer(
        load_default=None,
        validate=validate.Range(min=0, max=sse.MAX_SEQ),
        metadata={"description": "start after this event id, for clients that cannot send Last-Event-ID (which wins)"},
    )


RunList = list_of(RunSchema, "RunList")
MessageList = list_of(MessageOut, "MessageList")


@blp.route("/runs", methods=["POST"])
@blp.problems(404, 409)
@blp.arguments(
    RunCreate,
    examples={
        "input": {"summary": "One message of text", "value": examples.RUN_CREATE_INPUT},
        "messages": {"summary": "A conversation so far, ending with the user", "value": examples.RUN_CREATE_MESSAGES},
    },
)
@blp.response(202, RunSchema, example=examples.RUN_QUEUED)
@audited("run.create", "run")
def create_run(body: dict[str, Any]) -> Run:
    """Start a run of an agent; it is queued and a worker picks it up.

    Anyone in the tenant may start one (a member then sees it among their own runs). The run keeps a snapshot of
    the agent's configuration, so that a later change to the agent does not change it. The answer is the run in
    state queued; follow it with GET /v1/runs/{run_id}/events or by polling. Give input or messages, not both
    (400); an agent outside the tenant is a 404. With thread_id it is POST /v1/threads/{thread_id}/runs (a 409
    thread-busy while a run of the thread is active, by default). Audited as run.create.
    """
    messages = service.input_messages(body.get("input"), body.get("messages"))
    if body["thread_id"] is not None:
        runtime, strategy = services().runtime, body["multitask_strategy"]
        run = threads.create_run(
            runtime, principal(), body["thread_id"], messages, strategy, agent_id=body["agent_id"], trace_id=trace_id()
        )
    else:
        run = service.create_run(services().runtime, principal(), body["agent_id"], messages, trace_id())
    audit_written()  # with the run, in its transaction; a refusal above is audited by the hook
    return run


@blp.route("/runs", methods=["GET"])
@blp.arguments(RunListArgs, location="query")
@blp.response(200, RunList, example=examples.RUNS)
def list_runs(args: dict[str, Any]) -> Page[Run]:
    """Runs visible to the caller (a member sees their own), newest first.

    Owners and admins see every run of the tenant, a member only those they started. ?state= keeps the runs in one
    state; pages come with ?limit= and ?cursor=.
    """
    return service.list_runs(services().runtime, principal(), page_request(args), args["state"])


@blp.route("/runs/<uuid:run_id>", methods=["GET"])
@blp.problems(404)
@blp.response(200, RunSchema, example=examples.RUN_AWAITING)
def get_run(run_id: uuid.UUID) -> Run:
    """One run.

    Its state, times, error and token usage. Owners and admins may read any run of the tenant, a member only their
    own: another member's run, like another tenant's, is a 404.
    """
    return service.get_run(services().runtime, principal(), run_id)


@blp.route("/runs/<uuid:run_id>/cancel", methods=["POST"])
@blp.problems(404, 409)
@blp.response(200, RunSchema, example=examples.RUN_CANCELLED)
@audited("run.cancel", "run", target_arg="run_id")
def cancel_run(run_id: uuid.UUID) -> Run:
    """Cancel a queued, running or awaiting_approval run (its creator, owner, admin); 409 once it has finished.

    Takes no body. The answer is the run in state cancelled; a running loop stops at its next step, and the pending
    approvals of a suspended run become cancelled in the same transaction. A run the caller cannot see (a member:
    another's) is a 404; one already succeeded, failed or cancelled is a 409. Audited as run.cancel.
    """
    return service.cancel_run(services().runtime, principal(), run_id)


@blp.route("/runs/<uuid:run_id>/messages", methods=["GET"])
@blp.problems(404)
@blp.arguments(MessageListArgs, location="query")
@blp.response(200, MessageList, example=examples.MESSAGES)
def list_messages(args: dict[str, Any], run_id: uuid.UUID) -> Page[Any]:
    """The run's messages by ``seq`` (the run's and its subagents', one sequence).

    The conversation as stored: the input, each model turn with its tool calls (as the model wrote them, even when a
    reviewer edited them), and each batch's tool results. Anyone who can see the run may read them; otherwise 404.
    """
    return service.list_messages(services().runtime, principal(), run_id, page_request(args))


@blp.route("/runs/<uuid:run_id>/events", methods=["GET"])
@blp.problems(404)
@blp.arguments(EventArgs, location="query")
@blp.headers(sse.LAST_EVENT_ID)
@blp.doc(responses=sse.stream_responses("the run's events", examples.RUN_EVENTS))
def stream_events(args: dict[str, Any], run_id: uuid.UUID) -> Response:
    """Server-Sent Events: the stored log from the start (or after ``Last-Event-ID`` / ``?after=``), then live.

    The stream stays open while the run is queued, running or awaiting_approval (a suspension is not an end: the
    client sees ``approval.requested``, ``approval.decided`` and the resumed run on one connection), and ends after
    ``run.finished``. It is re-authorised at every keep-alive: a revoked token or a removed membership closes it.
    Anyone who can see the run may follow it (otherwise 404); a user holding HANGO_MAX_STREAMS_PER_USER streams
    gets a 429, and a full process a 503, both with Retry-After.
    """
    after = sse.last_event_id(args.get("after") or 0)
    # Refusals (404, 429, 503) are raised here, so they are responses and not broken streams.
    events = open_stream(services().runtime, services().live, principal(), run_id, after)
    return sse.event_stream(events, events.close, events.send_directly)
