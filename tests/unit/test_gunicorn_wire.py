"""The wire the process's reader writes live events to: framed as gunicorn frames the rest of the body, never
waiting, and what a full socket buffer could not take sent, in order, by the stream's own flush.

gevent sockets without monkey-patching: the wire relies on gevent's ``send(..., timeout=0.0)``.
"""

from __future__ import annotations

import socket

import gevent
from gevent import socket as gsocket

from hango.api.sse import GunicornWire


def _read(sock: gsocket.socket, size: int) -> bytes:
    received = b""
    while len(received) < size:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def _dechunk(body: bytes) -> list[bytes]:
    chunks = []
    while body:
        size, _, rest = body.partition(b"\r\n")
        length = int(size, 16)
        assert rest[length : length + 2] == b"\r\n", "a chunk does not end where its size says"
        chunks.append(rest[:length])
        body = rest[length + 2 :]
    return chunks


def test_an_http_1_1_frame_is_one_chunk_and_an_http_1_0_frame_is_bare() -> None:
    ours, theirs = gsocket.socketpair()
    assert GunicornWire(ours, chunked=True).send_now(b"data: x\n\n")
    assert theirs.recv(100) == b"9\r\ndata: x\n\n\r\n"
    assert GunicornWire(ours, chunked=False).send_now(b"data: y\n\n")
    assert theirs.recv(100) == b"data: y\n\n"


def test_what_a_full_buffer_cannot_take_waits_for_flush_and_arrives_whole_and_in_order() -> None:
    ours, theirs = gsocket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    frames = [bytes([65 + index % 26]) * 20_000 for index in range(40)]
    wire = GunicornWire(ours, chunked=True)
    expected = sum(len(b"%X\r\n\r\n" % len(frame)) + len(frame) for frame in frames)
    reader = gevent.spawn(_read, theirs, expected)
    partial = 0
    for frame in frames:
        if not wire.send_now(frame):  # the stream, woken, flushes before it writes or waits again
            partial += 1
            assert wire.flush()
    assert partial > 0, "the socket buffer never filled: this test proves nothing"
    assert _dechunk(reader.get(timeout=10)) == frames


def test_a_gone_client_breaks_the_wire_without_raising() -> None:
    ours, theirs = gsocket.socketpair()
    theirs.close()
    wire = GunicornWire(ours, chunked=True)
    sent = [wire.send_now(b"data: x\n\n") for _ in range(3)]
    assert sent[-1] is False
    assert wire.flush() is False
