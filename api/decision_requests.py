"""The body of ``POST /v1/runs/{id}/approvals``, read once at the edge into the decision service's command
(:mod:`hango.services.approvals.commands`): its schemas, and the reading.

A body that does not load is a :class:`~hango.services.approvals.commands.Malformed` command, which still carries
the calls the body names, read leniently: the service answers 404 and 403 before it says how the body is
malformed, and a caller who may not decide a call learns that first.
"""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import ValidationError, fields, validate, validates_schema

from hango.kernel.errors import InvalidInput
from hango.kernel.models import DECISIONS
from hango.kernel.validation import field_errors
from hango.services.approvals.commands import (
    NEEDS_MESSAGE,
    CallRef,
    DecisionCommand,
    DecisionRequest,
    Malformed,
    NamedCall,
    Remember,
)


class RememberSchema(ma.Schema):
    """``remember`` on an approve: a standing approval of the same tool for ``ttl``."""

    ttl = fields.String(
        required=True,
        validate=validate.Length(min=1, max=50),
        metadata={"description": "how long to remember, e.g. 1h (at most HANGO_GRANT_MAX_TTL)"},
    )
    when = fields.Dict(
        keys=fields.String(),
        allow_none=True,
        metadata={
            "description": "matchers as in an interrupt rule's `when`; omitted: exactly this call, every argument "
            "pinned (the tool's defaults filled in, no other argument allowed); null: every call of the tool"
        },
    )


class DecisionSchema(ma.Schema):
    """One decision of ``POST /v1/runs/{id}/approvals``."""

    tool_call_id = fields.String(
        validate=validate.Length(min=1, max=500), metadata={"description": "the call's id, compared exactly"}
    )
    approval_id = fields.UUID(metadata={"description": "the approval's id, in any UUID spelling"})
    decision = fields.String(
        required=True,
        validate=validate.OneOf(DECISIONS),
        metadata={
            "description": "approve (run the call), edit (run it with args instead), reject (do not run it; the "
            "model gets an error result carrying message) or respond (do not run it; message is its result)"
        },
    )
    args = fields.Dict(
        keys=fields.String(),
        metadata={"description": "edit only: the arguments that replace the call's, whole, checked by its tool"},
    )
    message = fields.String(
        validate=validate.Length(max=100_000),
        metadata={"description": "reject and respond only, and required there: not blank, at most 100,000 characters"},
    )
    arguments_sha256 = fields.String(
        validate=validate.Regexp(
            r"^[0-9a-f]{64}$", error="must be the hex SHA-256 of the arguments (64 lowercase hex digits)"
        ),
        metadata={"description": "the approval's arguments_sha256 as the reviewer saw it; another is a 409"},
    )
    remember = fields.Nested(
        RememberSchema, metadata={"description": "approve only: also create a standing approval (a grant)"}
    )

    @validates_schema
    def _coherent(self, data: dict[str, Any], **_: Any) -> None:
        if "tool_call_id" not in data and "approval_id" not in data:
            raise ValidationError("name the call with tool_call_id or approval_id", "tool_call_id")
        kind = data["decision"]
        if kind == "edit" and "args" not in data:
            raise ValidationError("an edit needs args (they replace the arguments whole)", "args")
        if kind != "edit" and "args" in data:
            raise ValidationError("only an edit takes args", "args")
        if kind in NEEDS_MESSAGE and not (data.get("message") or "").strip():
            raise ValidationError(f"a {kind} needs a message", "message")
        if kind not in NEEDS_MESSAGE and "message" in data:
            raise ValidationError("only reject and respond take a message", "message")

    @validates_schema
    def _remember_approves(self, data: dict[str, Any], **_: Any) -> None:
        if "remember" in data and data.get("decision") != "approve":
            raise ValidationError("only an approve can be remembered", "remember")


class DecisionsSchema(ma.Schema):
    """The body of ``POST /v1/runs/{id}/approvals``."""

    decisions = fields.List(
        fields.Nested(DecisionSchema),
        required=True,
        validate=validate.Length(min=1, max=1000),
        metadata={
            "description": "1 to 1000 decisions, one per call; together they must cover every pending call of the "
            "run that the caller may decide (409 partial-decision otherwise)"
        },
    )


_DECISIONS = DecisionsSchema()  # loading is stateless: one instance serves every request


def read_request(body: Any) -> DecisionRequest | Malformed:
    """The command of a request body (``InvalidInput``: the edge could not decode it; None: no body)."""
    if isinstance(body, InvalidInput):
        return Malformed((), body)
    named = named_calls(body)
    try:
        loaded: dict[str, Any] = _DECISIONS.load(body if body is not None else {})
    except ValidationError as exc:
        errors = field_errors(exc.normalized_messages())  # type: ignore[no-untyped-call]
        detail = "; ".join(f"{e.field}: {e.message}" for e in errors[:5])
        return Malformed(named, InvalidInput(detail, errors))
    return DecisionRequest(named, tuple(_command(item) for item in loaded["decisions"]))


def named_calls(body: Any) -> tuple[NamedCall, ...]:
    """Every call a (possibly invalid) body names, each reference parsed as a valid one would be."""
    items = body.get("decisions") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return ()
    return tuple(_named(item) for item in items if isinstance(item, dict))


def _named(item: dict[str, Any]) -> NamedCall:
    ref = CallRef(approval_uuid(item.get("approval_id")), _string(item.get("tool_call_id")))
    decision = item.get("decision") if item.get("decision") in DECISIONS else None
    return NamedCall(ref, decision, item.get("args") if decision == "edit" else None)


def approval_uuid(value: Any) -> uuid.UUID | None:
    """An approval id as a UUID, whatever its spelling (the parser marshmallow's UUID field uses); None when it is
    not one."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _command(item: dict[str, Any]) -> DecisionCommand:
    remember = item.get("remember")
    return DecisionCommand(
        ref=CallRef(item.get("approval_id"), item.get("tool_call_id")),
        kind=item["decision"],
        args=item.get("args"),
        message=item.get("message", ""),
        arguments_sha256=item.get("arguments_sha256"),
        remember=None
        if remember is None
        else Remember(remember["ttl"], remember.get("when"), exact="when" not in remember),
    )
