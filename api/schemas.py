"""Marshmallow schemas shared by every blueprint: list arguments and the list envelope."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.kernel.pagination import DEFAULT_LIMIT, MAX_LIMIT, NOT_A_CURSOR, PageRequest, cursor_pattern


def cursor_field(*kinds: type) -> fields.String:
    """``?cursor=`` of a list ordered by keys of these types: its pattern is the grammar of that list's cursors, and
    an empty value, as clients send for "no cursor", asks for the first page."""
    pattern = cursor_pattern(kinds)
    validators = [] if pattern is None else [validate.Regexp(f"^(?:{pattern})?$", error=NOT_A_CURSOR)]
    description = "next_cursor of the previous page; absent or empty: the first page"
    return fields.String(load_default=None, validate=validators, metadata={"description": description})


class JsonBoolean(fields.Boolean):
    """A body's ``true`` or ``false``, nothing else: marshmallow's Boolean also takes ``"yes"``, ``1`` and ``0``
    (``0 in {False}`` holds in Python), which the document's ``type: boolean`` does not."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


class ListArgs(ma.Schema):
    """``?limit=`` and ``?cursor=`` of every list endpoint (one ordered by creation time, then id)."""

    limit = fields.Integer(
        load_default=DEFAULT_LIMIT,
        validate=validate.Range(min=1, max=MAX_LIMIT),
        metadata={"description": f"items per page, 1 to {MAX_LIMIT}"},
    )
    cursor = cursor_field(datetime, uuid.UUID)


def page_request(args: dict[str, Any]) -> PageRequest:
    """The page request carried by parsed :class:`ListArgs`."""
    return PageRequest(limit=args["limit"], cursor=args["cursor"] or None)


def list_of(item: type[ma.Schema], name: str) -> type[ma.Schema]:
    """The ``{"items": [...], "next_cursor": ...}`` envelope around an item schema."""
    return ma.Schema.from_dict(
        {
            "items": fields.List(
                fields.Nested(item),
                required=True,
                metadata={"description": "this page's items, at most ?limit= of them, in the list's order"},
            ),
            "next_cursor": fields.String(
                allow_none=True,
                required=True,
                metadata={"description": "pass it as ?cursor= to get the next page; null on the last page"},
            ),
        },
        name=name,
    )


class NoQuery(ma.Schema):
    """No query parameters: an unknown one is a 400, as on every other route."""


class FieldProblem(ma.Schema):
    """One entry of a problem document's ``errors``."""

    field = fields.String(
        required=True,
        metadata={
            "description": "where the invalid value is: a dotted path into the body, with [n] for list items (e.g. "
            "decisions[1].args.content), or the name of a query parameter, a header (Last-Event-ID) or `body` for "
            "a body that cannot be read at all"
        },
    )
    message = fields.String(required=True, metadata={"description": "what is wrong with that value, in English"})


class Problem(ma.Schema):
    """An RFC 9457 problem document, the body of every error response."""

    class Meta:
        # Some problems carry extra members (``remaining``, ``checks``); RFC 9457 allows them.
        unknown = ma.INCLUDE

    type = fields.String(
        required=True,
        metadata={
            "description": "urn:hango:problem:<kind>, the kind of problem a client branches on: validation, "
            "unauthorized, forbidden, not-found, conflict, partial-decision, not-awaiting-approval, stale-approval, "
            "already-voted, payload-too-large, too-many-streams, stream-capacity-full, unavailable, mcp-unavailable or "
            "internal"
        },
    )
    title = fields.String(required=True, metadata={"description": "a short, fixed summary of the kind, e.g. Not found"})
    status = fields.Integer(required=True, metadata={"description": "the HTTP status code of the response"})
    detail = fields.String(
        required=True, metadata={"description": "what went wrong with this request, in English, for a person"}
    )
    errors = fields.List(
        fields.Nested(FieldProblem),
        metadata={"description": "400 only: every invalid field of the request, each with its own message"},
    )
    server = fields.String(
        metadata={"description": "502 mcp-unavailable only: the name of the MCP server that did not answer"}
    )


PROBLEM_CONTENT_TYPE = "application/problem+json"
# When each problem status is answered; the type URNs are api.md's.
PROBLEM_STATUSES: dict[int, str] = {
    400: "Malformed, mistyped or unknown input, each field named in errors (urn:hango:problem:validation).",
    401: "No token, or an unknown or revoked one (urn:hango:problem:unauthorized).",
    403: "The caller's role does not allow this (urn:hango:problem:forbidden).",
    404: "Nothing by that id is visible to the caller; another tenant's is never revealed "
    "(urn:hango:problem:not-found).",
    409: "The request clashes with the current state (urn:hango:problem:conflict, …:not-awaiting-approval, "
    "…:partial-decision with remaining).",
    413: "The body is over HANGO_MAX_BODY_BYTES (urn:hango:problem:payload-too-large).",
    415: "The body is not application/json (urn:hango:problem:validation).",
    502: "An MCP server did not answer within HANGO_MCP_TIMEOUT, refused, or answered wrongly; server names it "
    "(urn:hango:problem:mcp-unavailable).",
    500: "An unexpected failure; it is logged and nothing about it is revealed (urn:hango:problem:internal).",
}


def refusal(status: int, example: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI response of a problem status with an example of this operation's problem document, for
    ``blp.doc(responses=...)``."""
    content = {"schema": Problem, "example": example}
    return {"description": PROBLEM_STATUSES[status], "content": {PROBLEM_CONTENT_TYPE: content}}
