"""Approvals: the decisions API and the approval lists."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

import marshmallow as ma
from flask import Response, request
from marshmallow import fields, missing, validate

from hango.agent.interrupts import REVIEWER_ROLES
from hango.api import examples, sse
from hango.api.audit import audit_written, audited
from hango.api.context import principal, services, trace_id
from hango.api.decision_requests import DecisionsSchema, read_request
from hango.api.parsing import Blueprint, request_json
from hango.api.runs import RunSchema
from hango.api.schemas import PROBLEM_CONTENT_TYPE, ListArgs, NoQuery, Problem, list_of, page_request
from hango.kernel.errors import InvalidInput
from hango.kernel.models import APPROVAL_STATES, EXECUTIONS, VOTES
from hango.kernel.pagination import Page
from hango.services import approvals, reviewing
from hango.services.approvals.commands import Request
from hango.services.previews import Preview
from hango.store.approvals import approval_json
from hango.streams.live import open_approval_stream

blp = Blueprint("approvals", __name__, url_prefix="/v1", description="Human-in-the-loop approvals")


class ApprovalVote(ma.Schema):
    user_id = fields.UUID(required=True, metadata={"description": "the reviewer who voted"})
    vote = fields.String(
        required=True, validate=validate.OneOf(VOTES), metadata={"description": "approve, or reject (which is final)"}
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when the vote was cast"})


class Reviewers(ma.Schema):
    roles = fields.List(
        fields.String(validate=validate.OneOf(REVIEWER_ROLES)),
        metadata={"description": "roles whose holders may decide (owner, admin)"},
    )
    users = fields.List(fields.UUID(), metadata={"description": "ids of users who may decide, whatever their role"})


class McpAnnotations(ma.Schema):
    readOnlyHint = fields.Boolean(metadata={"description": "the tool says it only reads"})
    destructiveHint = fields.Boolean(metadata={"description": "the tool says it may destroy or overwrite"})
    idempotentHint = fields.Boolean(metadata={"description": "the tool says a repeated call changes nothing more"})
    openWorldHint = fields.Boolean(metadata={"description": "the tool says it reaches the world outside"})


class McpTool(ma.Schema):
    server = fields.String(required=True, metadata={"description": "the MCP server the tool comes from"})
    tool = fields.String(required=True, metadata={"description": "the tool's own name on that server"})
    title = fields.String(allow_none=True, required=True, metadata={"description": "the tool's title, if it has one"})
    description = fields.String(required=True, metadata={"description": "what the server says the tool does"})
    annotations = fields.Nested(
        McpAnnotations,
        required=True,
        metadata={
            "description": "the tool's annotations as the run pinned them: hints, believed for the default rule only "
            "where the server is trusted"
        },
    )
    trusted = fields.Boolean(required=True, metadata={"description": "whether the server was trusted when pinned"})


class Approval(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the approval's id"})
    run_id = fields.UUID(required=True, metadata={"description": "the run whose call waits"})
    thread_id = fields.UUID(
        required=True, allow_none=True, metadata={"description": "the thread the run belongs to; null for none"}
    )
    tool_call_id = fields.String(required=True, metadata={"description": "the id of the call, as the model gave it"})
    tool_name = fields.String(required=True, metadata={"description": "the tool the call asks to run"})
    arguments = fields.Dict(required=True, metadata={"description": "the call's arguments as the model wrote them"})
    arguments_sha256 = fields.String(
        required=True, metadata={"description": "hex SHA-256 of the RFC 8785 canonical JSON of arguments"}
    )
    allowed_decisions = fields.List(
        fields.String(),
        required=True,
        metadata={"description": "the decisions the call's rule allows, among approve, edit, reject and respond"},
    )
    state = fields.String(
        required=True,
        metadata={
            "description": "pending (waiting for a decision), decided, expired (its deadline passed) or cancelled "
            "(its run was cancelled)"
        },
    )
    subagent_call_id = fields.UUID(
        allow_none=True,
        required=True,
        metadata={"description": "the subagent call whose loop made the call; null: the run's own loop"},
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when the call began to wait"})
    expires_at = fields.DateTime(
        required=True,
        metadata={
            "description": "the deadline: created_at plus the rule's ttl, or HANGO_APPROVAL_TTL without one (moved "
            "by an escalation)"
        },
    )
    decision = fields.String(
        allow_none=True,
        required=True,
        metadata={"description": "approve, edit, reject or respond; null until decided (and while a quorum votes)"},
    )
    decision_args = fields.Dict(
        allow_none=True, required=True, metadata={"description": "an edit's replacement arguments; null otherwise"}
    )
    decision_message = fields.String(
        allow_none=True,
        required=True,
        metadata={"description": "a reject's or respond's message, given to the model verbatim; null otherwise"},
    )
    decided_by = fields.UUID(
        allow_none=True,
        required=True,
        metadata={"description": "who decided (a grant's creator for a standing approval); null until decided"},
    )
    decided_at = fields.DateTime(allow_none=True, required=True, metadata={"description": "when; null until decided"})
    execution = fields.String(
        required=True,
        validate=validate.OneOf(EXECUTIONS),
        metadata={
            "description": "where an approved call stands: executing commits before the tool starts, done with its "
            "result; outcome_unknown when its worker stopped mid-call and the tool is not idempotent"
        },
    )
    grant_id = fields.UUID(
        allow_none=True, required=True, metadata={"description": "the standing approval that approved the call"}
    )
    on_expiry = fields.Raw(
        required=True,
        metadata={
            "description": 'what the deadline does, from the call\'s rule: "fail" (the run), "reject" (the call, the '
            'run goes on) or {"escalate": {"roles", "users"}, "ttl"} (other reviewers, once)'
        },
    )
    escalated_at = fields.DateTime(
        allow_none=True, required=True, metadata={"description": "when the first deadline escalated the call"}
    )
    description = fields.String(
        allow_none=True,
        required=True,
        metadata={"description": "why the call waits, in the words of the rule that held it; null: it gives none"},
    )
    reviewers = fields.Nested(
        Reviewers,
        allow_none=True,
        required=True,
        metadata={"description": "who may decide, from the call's rule; null: every owner and admin"},
    )
    approvals_required = fields.Integer(
        required=True, metadata={"description": "distinct approving reviewers the call needs (1: a plain decision)"}
    )
    votes = fields.List(
        fields.Nested(ApprovalVote),
        required=True,
        metadata={"description": "a quorum's votes so far, oldest first (a reject's message is decision_message)"},
    )
    mcp = fields.Nested(
        McpTool,
        allow_none=True,
        required=True,
        metadata={"description": "an MCP call's server and tool, as the run pinned them; null for any other tool"},
    )
    definition_sha256 = fields.String(
        allow_none=True,
        required=True,
        metadata={
            "description": "an MCP call's tool definition digest (SHA-256 of the RFC 8785 canonical JSON of the "
            "tool as its server listed it): an approved call is sent only while the server lists the same; null "
            "for any other tool"
        },
    )


class DecidedApproval(Approval):
    remembered_grant_id = fields.UUID(
        allow_none=True, required=True, metadata={"description": "the grant this decision's `remember` created"}
    )


class DecisionResult(ma.Schema):
    run = fields.Nested(
        RunSchema,
        required=True,
        metadata={"description": "the run as this request committed it: queued once every call is decided"},
    )
    approvals = fields.List(
        fields.Nested(DecidedApproval),
        required=True,
        metadata={"description": "the approvals this request named, as it left them"},
    )


class ApprovalArgs(ListArgs):
    state = fields.String(
        load_default="pending",
        validate=validate.OneOf([*APPROVAL_STATES, "all"]),
        metadata={"description": "only approvals in this state; all: every state. Default pending"},
    )


class TenantApprovalArgs(ApprovalArgs):
    order = fields.String(
        load_default="oldest",
        validate=validate.OneOf(["oldest", "newest"]),
        metadata={
            "description": "oldest (default): the oldest requested first, the reviewers' queue; newest: the most "
            "recently requested first, for what was decided lately without reading the whole history"
        },
    )


ApprovalList = list_of(Approval, "ApprovalList")


def _problem(description: str) -> dict[str, Any]:
    return {"description": description, "content": {PROBLEM_CONTENT_TYPE: {"schema": Problem}}}


def _page(page: Page[Any]) -> dict[str, Any]:
    ttl = services().settings.approval_ttl
    return {"items": [approval_json(row, ttl) for row in page.items], "next_cursor": page.next_cursor}


def _command() -> Request:
    """The request's command, built here; a malformed body is a command too, and the service judges it a 400
    only after the 404 and 403 checks."""
    try:
        body = request_json(request, services().settings.max_json_depth)
    except InvalidInput as error:
        return read_request(error)
    return read_request(None if body is missing else body)


@blp.route("/runs/<uuid:run_id>/approvals", methods=["POST"])
@blp.problems(400, 403, 404, 409)
@blp.doc(
    requestBody={
        "required": True,
        "content": {"application/json": {"schema": DecisionsSchema, "examples": examples.DECISIONS}},
    },
    responses={
        "403": _problem(
            "urn:hango:problem:forbidden: a member; the run's creator when the tenant forbids self-approval; a caller "
            "not among the reviewers of an approval the request names"
        ),
        "409": _problem(
            "…:not-awaiting-approval (decided, expired or cancelled meanwhile), …:partial-decision (remaining: pending "
            "calls that wait on the caller and were not named), …:stale-approval (arguments_sha256 of other "
            "arguments), …:already-voted (the caller's second vote on a quorum approval); nothing is stored"
        ),
    },
)
@blp.response(200, DecisionResult, example=examples.DECISION_RESULT)
@audited("approval.decide", "run", target_arg="run_id")
def decide(run_id: uuid.UUID) -> dict[str, Any]:
    """Decide every pending call of a suspended run (owner, admin; never a member, the run's creator included).

    One request names each pending call the caller may decide (by tool_call_id or approval_id) with approve, edit,
    reject or respond, as each call's rule allows; an approve may also remember, creating a grant. The checks come in
    this order: a run the caller cannot see is a 404; a member, a creator the tenant forbids to self-approve, or a
    caller outside a call's reviewers a 403; a malformed body or a decision the rule refuses a 400; a run no longer
    awaiting approval, a call left out, a changed arguments_sha256 or a second vote on a quorum a 409. Any refusal
    stores nothing. On success the run is queued again once every call is decided (a quorum's approve before the
    last one leaves it waiting). Each approval named is audited as approval.decide.
    """
    # The service writes this request's audit rows, refusals included, in its own transaction (a run the caller
    # cannot see is the exception: the audit hook writes its row).
    decided = approvals.decide(services().runtime, principal(), run_id, _command(), trace_id())
    audit_written()
    ttl = services().settings.approval_ttl
    items = [
        {**approval_json(row, ttl), "remembered_grant_id": decided.remembered.get(row.id)} for row in decided.approvals
    ]
    return {"run": decided.run, "approvals": items}


@blp.route("/runs/<uuid:run_id>/approvals", methods=["GET"])
@blp.problems(404)
@blp.arguments(ApprovalArgs, location="query")
@blp.response(200, ApprovalList, example=examples.APPROVALS)
def list_run_approvals(args: dict[str, Any], run_id: uuid.UUID) -> dict[str, Any]:
    """A run's approvals (anyone who can see the run), oldest first; ``?state=`` defaults to ``pending``.

    Each approval is one call that waited, or waits, for a human: its arguments, the decisions its rule allows, its
    deadline and, once decided, the decision. ?state=all lists every state. A run the caller cannot see (a member:
    another's) is a 404.
    """
    page = approvals.list_for_run(services().runtime, principal(), run_id, args["state"], page_request(args))
    return _page(page)


class ApprovalEventArgs(ma.Schema):
    after = fields.Integer(
        load_default=None,
        validate=validate.Range(min=0, max=sse.MAX_SEQ),
        metadata={"description": "start after this event id, for clients that cannot send Last-Event-ID (which wins)"},
    )


@blp.route("/approvals/events", methods=["GET"])
@blp.arguments(ApprovalEventArgs, location="query")
@blp.headers(sse.LAST_EVENT_ID)
@blp.doc(responses=sse.stream_responses("the tenant's approval events", examples.APPROVAL_EVENTS))
def stream_approval_events(args: dict[str, Any]) -> Response:
    """Server-Sent Events: the tenant's live approval queue (a member's: the approvals of their own runs).

    ``approval.requested``, ``approval.decided``, ``approval.expired`` and ``approval.cancelled``, each carrying
    the approval as the lists show it. Reconnecting with ``Last-Event-ID`` (or ``?after=``, for clients that
    cannot set headers) replays what was missed, for at least ``HANGO_APPROVAL_TTL``. Re-authorised at every
    keep-alive, like a run's stream. Anyone in the tenant may follow it; a user holding HANGO_MAX_STREAMS_PER_USER
    streams gets a 429, and a full process a 503, both with Retry-After.
    """
    after = sse.last_event_id(args.get("after") or 0)
    stream = open_approval_stream(services().runtime, services().live, principal(), after)
    return sse.event_stream(stream, stream.close, stream.send_directly)


@blp.route("/approvals", methods=["GET"])
@blp.arguments(TenantApprovalArgs, location="query")
@blp.response(200, ApprovalList, example=examples.APPROVALS)
def list_approvals(args: dict[str, Any]) -> dict[str, Any]:
    """The tenant's approval queue, oldest first (a member sees the approvals of their own runs).

    By default the pending approvals of every run the caller can see, the oldest waiting first: the reviewers'
    queue. ?state= picks another state, or all; ?order=newest lists the most recently requested first; pages come
    with ?limit= and ?cursor=.
    """
    newest = args["order"] == "newest"
    found = approvals.list_for_tenant(services().runtime, principal(), args["state"], page_request(args), newest)
    return _page(found)


class ApprovalPreview(ma.Schema):
    """What an approval's call would make of its file, worked out by the server with the tool's own code."""

    approval_id = fields.UUID(required=True, metadata={"description": "the approval previewed"})
    tool_name = fields.String(required=True, metadata={"description": "the tool the call asks to run"})
    kind = fields.String(
        required=True,
        validate=validate.OneOf(["file", "none"]),
        metadata={
            "description": "file: a write_file or edit_file call, previewed below; none: the tool changes no file "
            "the server can show (note says so), and every other member is null or false"
        },
    )
    file_path = fields.String(
        allow_none=True, required=True, metadata={"description": "the path as the call wrote it (null: not a string)"}
    )
    path = fields.String(
        allow_none=True,
        required=True,
        metadata={
            "description": "the normalised path the tool will write (. and .. resolved, repeated / collapsed); null "
            "when the tool refuses the path"
        },
    )
    path_differs = fields.Boolean(
        required=True, metadata={"description": "path is not file_path: the call names the file by another spelling"}
    )
    storage = fields.String(
        allow_none=True,
        required=True,
        validate=validate.OneOf(["agent", "run"]),
        metadata={
            "description": "agent: /memories/ or /skills/, which persist across the agent's runs; run: the run's "
            "scratch space; null without a path"
        },
    )
    exists = fields.Boolean(
        allow_none=True, required=True, metadata={"description": "whether the file exists now; null without a path"}
    )
    error = fields.String(
        allow_none=True,
        required=True,
        metadata={
            "description": "the error result the tool would answer instead of changing the file (its arguments' "
            "schema, a path escaping /, old_string not found or not unique, a budget); null when it would succeed"
        },
    )
    diff = fields.String(
        allow_none=True,
        required=True,
        metadata={
            "description": "unified diff of the file as it is now (/dev/null when it does not exist) against what the "
            "call would make it, 3 lines of context; empty when nothing changes; null on an error or when too large"
        },
    )
    too_large = fields.Boolean(
        required=True,
        metadata={
            "description": "the change is over HANGO_PREVIEW_MAX_LINES or HANGO_PREVIEW_MAX_BYTES and was not diffed"
        },
    )
    note = fields.String(
        allow_none=True,
        required=True,
        metadata={"description": "why there is no diff to show, in words a reviewer reads (no preview, too large)"},
    )
    as_of = fields.String(
        required=True,
        validate=validate.OneOf(["now", "decision"]),
        metadata={
            "description": "now: worked out on the files as they are now, with the call's arguments; decision: kept "
            "when a reviewer approved or edited the call, worked out then with the arguments that run (an edit's "
            "own), so a call that has since written its file still shows the change the reviewer saw"
        },
    )


def _preview_json(approval_id: uuid.UUID, preview: Preview) -> dict[str, Any]:
    return {"approval_id": approval_id, **asdict(preview), "path_differs": preview.path_differs}


@blp.route("/approvals/<uuid:approval_id>", methods=["GET"])
@blp.problems(404)
@blp.arguments(NoQuery, location="query")
@blp.response(200, Approval, example=examples.APPROVAL)
def get_approval(_: dict[str, Any], approval_id: uuid.UUID) -> dict[str, Any]:
    """One approval in any state, as the lists show it (a member: their own runs' only; otherwise 404).

    Anyone who can see the approval's run may read it, whatever its state: a link to an approval keeps working after
    it was decided, expired or cancelled.
    """
    row = reviewing.get_approval(services().runtime, principal(), approval_id)
    return approval_json(row, services().settings.approval_ttl)


@blp.route("/approvals/<uuid:approval_id>/preview", methods=["GET"])
@blp.problems(404)
@blp.arguments(NoQuery, location="query")
@blp.response(200, ApprovalPreview, example=examples.PREVIEW)
def preview_approval(_: dict[str, Any], approval_id: uuid.UUID) -> dict[str, Any]:
    """What the call would make of its file, computed by the server (anyone who can see the approval).

    For ``write_file`` and ``edit_file``: the path as written and the normalised path the tool will write, whether
    that file is the agent's (persists across runs) or the run's scratch, whether it exists, and the unified diff
    of the file now against what the call would make it, or the error the tool would answer instead. The tool's
    own code normalises the path, resolves its storage and applies the edit, on the files as they are now, with
    the call's arguments as the model wrote them; nothing is written. Other tools: ``kind`` ``none``.

    A decided approval that a reviewer approved or edited answers the preview kept at decision time (``as_of``
    ``decision``), worked out then with the arguments that run; any other is worked out now (``as_of`` ``now``).
    """
    row, preview = reviewing.preview(services().runtime, principal(), approval_id)
    return _preview_json(row.id, preview)
