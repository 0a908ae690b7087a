"""Keyset pagination: opaque cursors and the one query helper every list endpoint uses."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from hango.errors import InvalidInput
from hango.validation import load_json

T = TypeVar("T")
KeyPart = datetime | uuid.UUID | int | str
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@dataclass(frozen=True)
class PageRequest:
    """How many items to return and the opaque cursor to continue after (``None`` for the first page)."""

    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, with the cursor of the next page or ``None`` at the end."""

    items: list[T]
    next_cursor: str | None


def encode_cursor(values: Sequence[KeyPart]) -> str:
    """Encode the sort key of the last item of a page."""
    parts = [value.isoformat() if isinstance(value, datetime) else str(value) for value in values]
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, parsers: Sequence[Callable[[str], Any]]) -> tuple[Any, ...]:
    """Decode a cursor back into typed key values, or raise a 400-class error naming ``cursor``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        # A cursor is a flat list of strings: anything deeper, or holding what SQL cannot, was not ours.
        parts = load_json(base64.urlsafe_b64decode(padded.encode()), max_depth=1)
        if not isinstance(parts, list) or len(parts) != len(parsers):
            raise ValueError("wrong shape")
        return tuple(parse(str(part)) for parse, part in zip(parsers, parts, strict=True))
    except (InvalidInput, ValueError, TypeError, OverflowError, binascii.Error) as exc:
        raise InvalidInput.field("cursor", "is not a cursor this list returned") from exc


def _utc(text: str) -> datetime:
    # Converting to UTC raises OverflowError for a time past year 9999, which no database column holds.
    return datetime.fromisoformat(text).astimezone(UTC)


_PARSERS: dict[type, Callable[[str], Any]] = {datetime: _utc, uuid.UUID: uuid.UUID, int: int}


def paginate(
    session: Session,
    statement: Select[T],
    keys: Sequence[InstrumentedAttribute[Any]],
    request: PageRequest,
    *,
    descending: bool = False,
) -> Page[T]:
    """Run ``statement`` ordered by ``keys`` and cut one page from it after the request's cursor.

    ``keys`` must identify a row uniquely (end them with the primary key) so no row is skipped or repeated.
    """
    key = tuple_(*keys)
    if request.cursor is not None:
        parsers = [_PARSERS.get(column.type.python_type, str) for column in keys]
        after = tuple_(*decode_cursor(request.cursor, parsers))
        statement = statement.where(key < after if descending else key > after)
    order = [column.desc() for column in keys] if descending else list(keys)
    rows = list(session.scalars(statement.order_by(*order).limit(request.limit + 1)))
    items = rows[: request.limit]
    more = len(rows) > request.limit
    next_cursor = encode_cursor([getattr(items[-1], column.key) for column in keys]) if more else None
    return Page(items, next_cursor)
