"""The client's event-stream parser and its reconnecting stream, over canned responses (no server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import httpx
import pytest

from hango.client import ProblemError, TransportError
from hango.client.sse import ReconnectingStream, SseParser


def _feed(text: str, parser: SseParser | None = None) -> list[dict[str, object]]:
    parser = parser or SseParser()
    return [dict(event) for line in text.split("\n") if (event := parser.feed(line)) is not None]


def test_the_parser_reads_ids_types_json_and_multi_line_data_and_skips_comments() -> None:
    parser = SseParser()
    text = 'retry: 1500\n\n: keep-alive\n\nid: 7\nevent: run.queued\ndata: {"a":\ndata: 1}\n\ndata: plain\n\n'
    assert _feed(text, parser) == [
        {"id": "7", "type": "run.queued", "data": {"a": 1}},
        {"id": "7", "type": "message", "data": "plain"},  # the last id stays the resume point
    ]
    assert parser.retry_seconds == 1.5
    assert parser.last_id == "7"


def test_an_event_cut_short_is_never_dispatched() -> None:
    parser = SseParser()
    assert _feed("id: 1\nevent: a\ndata: 1", parser) == []  # no blank line yet: the connection dropped
    assert parser.last_id is None  # the resume point is the last complete event
    parser.discard_partial()
    assert _feed("\n", parser) == []


class Server:
    """Canned answers, one per connection; records each connection's ``Last-Event-ID``."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.asked: list[str | None] = []

    @contextmanager
    def open(self, last_id: str | None) -> Iterator[httpx.Response]:
        self.asked.append(last_id)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        yield answer

    def opener(self, last_id: str | None) -> AbstractContextManager[httpx.Response]:
        return self.open(last_id)


class CutStream(httpx.SyncByteStream):
    """A body that sends ``data`` and then breaks, as a dropped connection does."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_a_dropped_stream_is_reopened_after_its_last_id_waiting_the_servers_retry() -> None:
    first = httpx.Response(200, stream=CutStream(b"retry: 250\n\nid: 1\nevent: a\ndata: 1\n\nid: 2\nevent: b\ndata:"))
    second = httpx.Response(200, content=b"id: 2\nevent: b\ndata: 2\n\nid: 3\nevent: run.finished\ndata: {}\n\n")
    server, slept = Server(first, httpx.ConnectError("refused"), second), []
    stream = ReconnectingStream(server.opener, "0", is_last=lambda e: e["type"] == "run.finished", sleep=slept.append)
    assert [(e["id"], e["type"]) for e in stream] == [("1", "a"), ("2", "b"), ("3", "run.finished")]
    assert server.asked == ["0", "1", "1"]
    assert slept == [0.25, 0.5]  # the server's retry, doubled at the second failure in a row


def test_reconnecting_gives_up_after_the_bound_and_a_refusal_is_not_retried() -> None:
    server = Server(*[httpx.ConnectError("refused")] * 3)
    stream = ReconnectingStream(server.opener, max_retries=2, sleep=lambda seconds: None)
    with pytest.raises(TransportError):
        list(stream)
    assert len(server.asked) == 3

    refused = httpx.Response(401, json={"type": "urn:hango:problem:unauthorized", "title": "t", "detail": "d"})
    with pytest.raises(ProblemError) as error:
        list(ReconnectingStream(Server(refused).opener, sleep=lambda seconds: None))
    assert error.value.status == 401


def test_a_stream_the_server_ends_normally_is_not_reopened() -> None:
    server = Server(httpx.Response(200, content=b"id: 9\nevent: approval.requested\ndata: {}\n\n"))
    assert [e["id"] for e in ReconnectingStream(server.opener)] == ["9"]
    assert server.asked == [None]
