"""Server-Sent Events: the line parser of the event-stream format, and a stream that reconnects after a drop.

The parser follows the WHATWG rules hango's streams need: ``field: value`` lines, ``data`` lines joined with a
newline, a blank line dispatching the event, ``:`` comments (keep-alives) ignored, ``id`` remembered as the resume
point and ``retry`` as the reconnection delay.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import httpx

from hango.client.errors import ProblemError, TransportError
from hango.client.types import Event

DEFAULT_RETRY_SECONDS = 2.0
# Statuses worth reconnecting after: the server is restarting, or full for now (429/503 carry Retry-After).
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclass
class SseParser:
    """Turns the lines of an event stream into events, keeping the last id and the server's retry delay."""

    last_id: str | None = None
    retry_seconds: float | None = None
    _type: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None  # the id of the event being read; the resume point only once the event is complete

    def __post_init__(self) -> None:
        self._id = self.last_id

    def feed(self, line: str) -> Event | None:
        """Take one line (without its end); returns the event a blank line completes, else ``None``."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_seconds = int(value) / 1000
        return None

    def discard_partial(self) -> None:
        """Forget an event not yet complete: one cut short by a dropped connection is never dispatched."""
        self._type, self._data, self._id = "", [], self.last_id

    def _dispatch(self) -> Event | None:
        kind, data, self.last_id = self._type or "message", self._data, self._id
        self._type, self._data = "", []
        if not data:
            return None
        text = "\n".join(data)
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = text
        return Event(id=self.last_id, type=kind, data=decoded)


Opener = Callable[[str | None], AbstractContextManager[httpx.Response]]


@dataclass
class ReconnectingStream:
    """Iterates a stream's events, reconnecting with ``Last-Event-ID`` when the connection drops.

    A dropped connection (a network error, a read timeout, a body cut short) or a retryable status is retried
    ``max_retries`` times in a row, waiting the server's ``retry:`` delay (or ``Retry-After``), doubled at each
    further failure; an event received resets the count. The iteration ends when the server ends the stream
    normally, or after an event ``is_last`` accepts (a run's ``run.finished``).
    """

    open: Opener
    last_id: str | None = None
    max_retries: int = 5
    is_last: Callable[[Event], bool] = lambda event: False
    sleep: Callable[[float], None] = time.sleep
    reconnects: int = 0

    def __iter__(self) -> Generator[Event, None, None]:
        parser = SseParser(last_id=self.last_id)
        failures = 0
        while True:
            try:
                for event in self._connect(parser):
                    failures = 0
                    yield event
                    if self.is_last(event):
                        return
                return  # the server ended the stream normally
            except _Dropped as dropped:
                failures += 1
                if failures > self.max_retries:
                    raise dropped.error from dropped
                delay = dropped.wait or parser.retry_seconds or DEFAULT_RETRY_SECONDS
                self.sleep(delay * 2 ** (failures - 1))
                self.reconnects += 1

    def _connect(self, parser: SseParser) -> Iterator[Event]:
        try:
            with self.open(parser.last_id) as response:
                if response.status_code in RETRYABLE_STATUSES:
                    response.read()
                    raise _Dropped(ProblemError.from_response(response), _retry_after(response))
                if response.status_code >= 400:
                    response.read()
                    raise ProblemError.from_response(response)
                yield from _events(parser, response.iter_lines())
        except httpx.TransportError as error:
            raise _Dropped(TransportError(f"event stream interrupted: {error}")) from error


def _events(parser: SseParser, lines: Iterable[str]) -> Iterator[Event]:
    parser.discard_partial()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


def _retry_after(response: httpx.Response) -> float | None:
    header = response.headers.get("Retry-After", "")
    return float(header) if header.isdigit() else None


class _Dropped(Exception):
    """A connection lost or refused for now: worth another try."""

    def __init__(self, error: Exception, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait
