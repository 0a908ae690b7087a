"""Keyset pagination: cursors and the one query helper every list endpoint uses.

A cursor names the sort key of a page's last item in a spelling whose grammar is regular, so that the OpenAPI
document can state exactly which cursors are well formed (:func:`cursor_pattern`) and every text matching it is a
position in the list: a time is its microseconds since the Unix epoch, a UUID its 32 hex digits, a sequence number
its decimal digits, joined by ``_``; a list ordered by one text key (file paths) uses that text itself.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

from sqlalchemy import Select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from hango.kernel.errors import InvalidInput

T = TypeVar("T")
KeyPart = datetime | uuid.UUID | int | str
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
SEPARATOR = "_"
NOT_A_CURSOR = "is not a cursor this list returned"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# At most 17 digits of microseconds (until the year 5138) and 18 of a sequence number (below the bigint maximum):
# every spelling the pattern admits parses into a value the database compares.
_PART_PATTERNS: dict[type, str] = {datetime: "[0-9]{1,17}", uuid.UUID: "[0-9a-fA-F]{32}", int: "[0-9]{1,18}"}


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


def cursor_pattern(kinds: Sequence[type]) -> str | None:
    """The regular expression (unanchored; ECMA-262 and Python alike) of the cursors of a list ordered by keys of
    these types; ``None`` for a list ordered by one text key, whose cursor may be any text."""
    if list(kinds) == [str]:
        return None
    return SEPARATOR.join(_PART_PATTERNS[kind] for kind in kinds)


def encode_cursor(values: Sequence[KeyPart]) -> str:
    """Encode the sort key of the last item of a page."""
    return SEPARATOR.join(_encode(value) for value in values)


def _encode(value: KeyPart) -> str:
    if isinstance(value, datetime):
        return str((value - _EPOCH) // _MICROSECOND)
    if isinstance(value, uuid.UUID):
        return value.hex
    return str(value)


def decode_cursor(cursor: str, kinds: Sequence[type]) -> tuple[Any, ...]:
    """Decode a cursor back into typed key values, or raise a 400-class error naming ``cursor``."""
    pattern = cursor_pattern(kinds)
    if pattern is None:
        return (cursor,)
    if re.fullmatch(pattern, cursor, flags=re.ASCII) is None:
        raise InvalidInput.field("cursor", NOT_A_CURSOR)
    return tuple(_decode(kind, part) for kind, part in zip(kinds, cursor.split(SEPARATOR), strict=True))


def _decode(kind: type, part: str) -> Any:
    if kind is datetime:
        return _EPOCH + int(part) * _MICROSECOND
    if kind is uuid.UUID:
        return uuid.UUID(hex=part)
    return int(part)


def paginate(
    session: Session,
    statement: Select[T],
    keys: Sequence[InstrumentedAttribute[Any]],
    request: PageRequest,
    *,
    descending: bool = False,
) -> Page[T]:
    """Run ``statement`` ordered by ``keys`` and cut one page from it after the request's cursor.

    ``keys`` must identify a row uniquely (end them with the primary key) so no row is skipped or repeated. They are
    times, UUIDs and integers, or one text column alone (a cursor spells them as :func:`cursor_pattern` says).
    """
    key = tuple_(*keys)
    if request.cursor is not None:
        after = tuple_(*decode_cursor(request.cursor, [column.type.python_type for column in keys]))
        statement = statement.where(key < after if descending else key > after)
    order = [column.desc() for column in keys] if descending else list(keys)
    rows = list(session.scalars(statement.order_by(*order).limit(request.limit + 1)))
    items = rows[: request.limit]
    more = len(rows) > request.limit
    next_cursor = encode_cursor([getattr(items[-1], column.key) for column in keys]) if more else None
    return Page(items, next_cursor)
