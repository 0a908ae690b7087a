"""Runs: create, list, read, cancel; their messages; and their live event stream (SSE)."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from flask import Response
from marshmallow import fields, validate

from hango.api import sse
from hango.api.audit import audit_written, audited
from hango.api.context import principal, services, trace_id
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, cursor_field, list_of, page_request
from hango.kernel.models import RUN_STATES, Run
from hango.kernel.pagination import Page
from hango.run import service
from hango.streams.live import open_stream

blp = Blueprint("runs", __name__, url_prefix="/v1", description="Runs, their messages and their events")


class TextBlock(ma.Schema):
    type = fields.String(required=True, validate=validate.Equal("text"))
    text = fields.String(required=True)


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
    "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}},
}


class InputMessage(ma.Schema):
    role = fields.String(required=True, validate=validate.OneOf(["user", "assistant"]))
    content = Content(required=True, metadata={"oneOf": [{"type": "string"}, {"type": "array", "items": TEXT_BLOCK}]})


class RunCreate(ma.Schema):
    agent_id = fields.UUID(required=True)
    input = fields.String(validate=validate.Length(max=1_000_000))
    messages = fields.List(fields.Nested(InputMessage), validate=validate.Length(min=1, max=1000))


class RunSchema(ma.Schema):
    id = fields.UUID(required=True)
    agent_id = fields.UUID(required=True)
    state = fields.String(required=True)
    created_by = fields.UUID(required=True)
    created_at = fields.DateTime(required=True)
    started_at = fields.DateTime(allow_none=True)
    finished_at = fields.DateTime(allow_none=True)
    awaiting_since = fields.DateTime(allow_none=True)
    error = fields.String(allow_none=True)
    turn = fields.Integer(required=True)
    usage = fields.Method("_usage", metadata={"description": "tokens used by the run's model calls"})

    def _usage(self, run: Run) -> dict[str, int]:
        return {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens}


class MessageOut(ma.Schema):
    seq = fields.Integer(required=True)
    role = fields.String(required=True)
    content = fields.List(fields.Dict(), required=True)
    subagent_call_id = fields.UUID(allow_none=True, required=True)


class RunListArgs(ListArgs):
    state = fields.String(load_default=None, validate=validate.OneOf(RUN_STATES))


class MessageListArgs(ListArgs):
    cursor = cursor_field(int)  # messages are ordered by seq


class EventArgs(ma.Schema):
    after = fields.Integer(load_default=None, validate=validate.Range(min=0, max=sse.MAX_SEQ))


RunList = list_of(RunSchema, "RunList")
MessageList = list_of(MessageOut, "MessageList")


@blp.route("/runs", methods=["POST"])
@blp.problems(404)
@blp.arguments(RunCreate)
@blp.response(202, RunSchema)
@audited("run.create", "run")
def create_run(body: dict[str, Any]) -> Run:
    """Start a run of an agent; it is queued and a worker picks it up."""
    messages = service.input_messages(body.get("input"), body.get("messages"))
    run = service.create_run(services().runtime, principal(), body["agent_id"], messages, trace_id())
    audit_written()  # with the run, in its transaction; a refusal above is audited by the hook
    return run


@blp.route("/runs", methods=["GET"])
@blp.arguments(RunListArgs, location="query")
@blp.response(200, RunList)
def list_runs(args: dict[str, Any]) -> Page[Run]:
    """Runs visible to the caller (a member sees their own), newest first."""
    return service.list_runs(services().runtime, principal(), page_request(args), args["state"])


@blp.route("/runs/<uuid:run_id>", methods=["GET"])
@blp.problems(404)
@blp.response(200, RunSchema)
def get_run(run_id: uuid.UUID) -> Run:
    """One run."""
    return service.get_run(services().runtime, principal(), run_id)


@blp.route("/runs/<uuid:run_id>/cancel", methods=["POST"])
@blp.problems(404, 409)
@blp.response(200, RunSchema)
@audited("run.cancel", "run", target_arg="run_id")
def cancel_run(run_id: uuid.UUID) -> Run:
    """Cancel a queued, running or awaiting_approval run (its creator, owner, admin); 409 once it has finished."""
    return service.cancel_run(services().runtime, principal(), run_id)


@blp.route("/runs/<uuid:run_id>/messages", methods=["GET"])
@blp.problems(404)
@blp.arguments(MessageListArgs, location="query")
@blp.response(200, MessageList)
def list_messages(args: dict[str, Any], run_id: uuid.UUID) -> Page[Any]:
    """The run's messages by ``seq`` (the run's and its subagents', one sequence)."""
    return service.list_messages(services().runtime, principal(), run_id, page_request(args))


@blp.route("/runs/<uuid:run_id>/events", methods=["GET"])
@blp.problems(404)
@blp.arguments(EventArgs, location="query")
@blp.headers(sse.LAST_EVENT_ID)
@blp.doc(responses=sse.stream_responses("the run's events"))
def stream_events(args: dict[str, Any], run_id: uuid.UUID) -> Response:
    """Server-Sent Events: the stored log from the start (or after ``Last-Event-ID`` / ``?after=``), then live.

    The stream stays open while the run is queued, running or awaiting_approval (a suspension is not an end: the
    client sees ``approval.requested``, ``approval.decided`` and the resumed run on one connection), and ends after
    ``run.finished``. It is re-authorised at every keep-alive: a revoked token or a removed membership closes it.
    """
    after = sse.last_event_id(args.get("after") or 0)
    # Refusals (404, 429, 503) are raised here, so they are responses and not broken streams.
    events = open_stream(services().runtime, services().live, principal(), run_id, after)
    return sse.event_stream(events, events.close, events.send_directly)
