"""Server-Sent Events responses: the framing, the resume point, and the OpenAPI of a refused stream."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from flask import Response, request, stream_with_context

from hango.errors import InvalidInput

MAX_SEQ = 2**63 - 1  # event numbers are PostgreSQL bigints


class Framed(Protocol):
    """An event that knows its SSE frame."""

    @property
    def frame(self) -> str: ...


def event_stream(items: Iterable[Framed | None], close: Callable[[], None]) -> Response:
    """A ``text/event-stream`` response of ``items`` (``None`` is an idle keep-alive); ``close`` runs when the
    response ends, even if its body was never iterated (a client gone before the first byte)."""

    def generate() -> Iterator[str]:
        yield "retry: 2000\n\n"
        for item in items:
            yield ": keep-alive\n\n" if item is None else item.frame

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    response = Response(stream_with_context(generate()), mimetype="text/event-stream", headers=headers)
    response.call_on_close(close)
    return response


def last_event_id(default: int) -> int:
    """The ``Last-Event-ID`` header as an event number, or ``default`` without one.

    Raises:
        InvalidInput: the header is not the id of an event (1 to 19 ASCII digits within a bigint).
    """
    header = request.headers.get("Last-Event-ID")
    if header is None:
        return default
    text = header.strip()
    # ASCII digits that fit a bigint: ``str.isdigit`` alone admits "²" and other digits int() refuses.
    if not (text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_SEQ):
        raise InvalidInput.field("Last-Event-ID", "must be the id of an event this stream sent")
    return int(text)


def refusal(description: str) -> dict[str, Any]:
    """The OpenAPI of a refused stream: a problem document, and when to try again."""
    return {
        "description": description,
        "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
        "content": {"application/problem+json": {"schema": {"type": "object"}}},
    }


def refusals() -> dict[str, Any]:
    """The 429 and 503 of a stream that could not be admitted."""
    return {
        "429": refusal(
            "urn:hango:problem:too-many-streams: the user already holds HANGO_MAX_STREAMS_PER_USER open streams"
        ),
        "503": refusal(
            "urn:hango:problem:stream-capacity-full: this server process streams to as many clients as it keeps "
            "connections for (HANGO_MAX_STREAMS_PER_PROCESS)"
        ),
    }
