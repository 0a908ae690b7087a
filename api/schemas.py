"""Marshmallow schemas shared by every blueprint: list arguments and the list envelope."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.pagination import DEFAULT_LIMIT, MAX_LIMIT, PageRequest


class ListArgs(ma.Schema):
    """``?limit=`` and ``?cursor=`` of every list endpoint."""

    limit = fields.Integer(
        load_default=DEFAULT_LIMIT,
        validate=validate.Range(min=1, max=MAX_LIMIT),
        metadata={"description": f"items per page, 1 to {MAX_LIMIT}"},
    )
    cursor = fields.String(load_default=None, metadata={"description": "next_cursor of the previous page"})


def page_request(args: dict[str, Any]) -> PageRequest:
    """The page request carried by parsed :class:`ListArgs`."""
    return PageRequest(limit=args["limit"], cursor=args["cursor"])


def list_of(item: type[ma.Schema], name: str) -> type[ma.Schema]:
    """The ``{"items": [...], "next_cursor": ...}`` envelope around an item schema."""
    return ma.Schema.from_dict(
        {
            "items": fields.List(fields.Nested(item), required=True),
            "next_cursor": fields.String(allow_none=True, required=True),
        },
        name=name,
    )
