"""Server-Sent Events responses: the framing, the resume point, the connection the process's reader writes live
events to, and the OpenAPI of a refused stream."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from flask import Response, request, stream_with_context

from hango.api.patterns import whole_numbers_up_to
from hango.kernel.errors import InvalidInput
from hango.processes.green import monkey_patched
from hango.streams.live import Wire

MAX_SEQ = 2**63 - 1  # event numbers are PostgreSQL bigints


class Framed(Protocol):
    """An event that knows its SSE frame."""

    @property
    def frame(self) -> str: ...


def event_stream(
    items: Iterable[Framed | None], close: Callable[[], None], send_directly: Callable[[Wire], None] | None = None
) -> Response:
    """A ``text/event-stream`` response of ``items`` (``None`` is an idle keep-alive); ``close`` runs when the
    response ends, even if its body was never iterated (a client gone before the first byte). ``send_directly``
    is given the response's wire where the server has one (:func:`gunicorn_wire`)."""
    wire = gunicorn_wire() if send_directly is not None else None
    if send_directly is not None and wire is not None:
        send_directly(wire)

    def generate() -> Iterator[str]:
        yield "retry: 2000\n\n"
        for item in items:
            yield ": keep-alive\n\n" if item is None else item.frame

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    response = Response(stream_with_context(generate()), mimetype="text/event-stream", headers=headers)
    response.call_on_close(close)
    return response


class GunicornWire:
    """The client connection of a streamed response under gunicorn's gevent worker (:class:`hango.streams.live.Wire`).

    gunicorn writes the headers and every body item the stream yields. Between two items, while the stream's
    greenlet waits, everything gunicorn was given has been sent, so bytes written here land between two of its
    chunks: they only need the same framing, an HTTP/1.1 chunk (``SIZE CRLF data CRLF``), or nothing for HTTP/1.0,
    whose body ends when the connection closes.
    """

    def __init__(self, sock: Any, *, chunked: bool) -> None:
        self._sock = sock
        self._chunked = chunked
        self._pending = b""
        self._broken = False

    def send_now(self, frame: bytes) -> bool:
        """Send ``frame`` without waiting (gevent's ``timeout=0.0``: a full socket buffer raises, it never waits
        for room); the rest is kept for :meth:`flush`."""
        if self._pending or self._broken:
            return False
        data = b"%X\r\n%s\r\n" % (len(frame), frame) if self._chunked else frame
        try:
            sent = self._sock.send(data, 0, timeout=0.0)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._broken = True
            return False
        if sent == len(data):
            return True
        self._pending = data[sent:]
        return False

    def flush(self) -> bool:
        """Send what :meth:`send_now` left, waiting for room as gunicorn would; ``False`` once the client is gone."""
        if self._pending and not self._broken:
            try:
                self._sock.sendall(self._pending)
            except OSError:
                self._broken = True
            self._pending = b""
        return not self._broken


def gunicorn_wire() -> GunicornWire | None:
    """The wire of this request's response, where the process's reader may write to it: a plain HTTP/1.x ``GET``
    served by gunicorn under gevent (the reader then runs on the same hub as the stream). ``None`` elsewhere (the
    Flask test client, a ``HEAD``, TLS), and the stream writes everything itself."""
    environ = request.environ
    sock = environ.get("gunicorn.socket")
    protocol = environ.get("SERVER_PROTOCOL")
    plain = sock is not None and not isinstance(sock, ssl.SSLSocket) and request.method == "GET"
    if not (plain and protocol in ("HTTP/1.0", "HTTP/1.1") and monkey_patched()):
        return None
    return GunicornWire(sock, chunked=protocol == "HTTP/1.1")


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


def stream_responses(description: str, examples: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI responses of an event stream: the stream (``examples``: some events' data), and its refusals."""
    data = {"type": "object", "description": "an event's data: members by event type, as api.md lists them"}
    stream = {"description": description, "content": {"text/event-stream": {"schema": data, "examples": examples}}}
    return {"200": stream, **refusals()}


# 1 to 19 ASCII digits within a bigint: 18 digits or fewer, 19 with a leading zero, or a number up to MAX_SEQ.
LAST_EVENT_ID: dict[str, Any] = {
    "in": "header",
    "name": "Last-Event-ID",
    "required": False,
    "description": "resume after this event (the id: of the last event received); a malformed id is a 400",
    "schema": {"type": "string", "pattern": f"^(?:[0-9]{{1,18}}|0[0-9]{{18}}|{whole_numbers_up_to(MAX_SEQ)})$"},
}


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
