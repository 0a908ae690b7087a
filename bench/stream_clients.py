"""Thousands of SSE clients in one process of their own (asyncio), driven by the stream benchmark over a pipe.

Each client is a raw HTTP/1.1 connection that notes the monotonic time (the same clock in every process of the
machine) at which each event type first reached it since the last :class:`Mark`. Running the clients apart from
the process that sends the decision keeps their reading off its interpreter lock.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from hango.processes.server import raise_open_files_limit


@dataclass(frozen=True)
class Open:
    """Open ``count`` streams of ``path``; answered once every one of them has seen ``ready`` (an event type)."""

    path: str
    count: int
    ready: str


@dataclass(frozen=True)
class Mark:
    """Forget what was seen so far; answered at once."""


@dataclass(frozen=True)
class Collect:
    """Wait up to ``timeout`` seconds for every open stream (of ``path`` only, when given) to see ``event``;
    answered with the arrival times (``None`` for a stream that did not see it) and how many streams are open."""

    event: str
    timeout: float
    path: str | None = None


@dataclass
class _Stream:
    path: str
    seen: dict[str, float] = field(default_factory=dict)
    closed: bool = False


class _Clients:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.streams: list[_Stream] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def open(self, command: Open) -> int:
        fresh = [_Stream(command.path) for _ in range(command.count)]
        self.streams.extend(fresh)
        for stream in fresh:
            task = asyncio.create_task(self._follow(command.path, stream))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        await self._until(fresh, command.ready, 120)
        return sum(command.ready in stream.seen for stream in fresh)

    async def collect(self, command: Collect) -> tuple[list[float | None], int]:
        live = [s for s in self.streams if not s.closed and command.path in (None, s.path)]
        await self._until(live, command.event, command.timeout)
        return [stream.seen.get(command.event) for stream in live], len(live)

    def mark(self) -> None:
        self.streams = [stream for stream in self.streams if not stream.closed]
        for stream in self.streams:
            stream.seen.clear()

    async def _until(self, streams: list[_Stream], event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(event in s.seen or s.closed for s in streams):
            await asyncio.sleep(0.01)

    async def _follow(self, path: str, stream: _Stream) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.create_connection(lambda: _Reader(stream), "127.0.0.1", self.port)
        except OSError:
            stream.closed = True
            return
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        )
        transport.write(request.encode())
        await protocol.done


class _Reader(asyncio.Protocol):
    """Notes when each ``event:`` line arrives, scanning the raw bytes (chunk sizes and all): the least work a
    client can do per event, so that the figures are the server's."""

    def __init__(self, stream: _Stream) -> None:
        self.stream = stream
        self.tail = b""
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        lines = (self.tail + data).split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            if line.startswith(b"HTTP/1.1 ") and b" 200 " not in line:
                self._close()
                return
            if line.startswith(b"event: "):
                name = line[7:].strip().decode()
                self.stream.seen.setdefault(name, now)
                if name == "run.finished":
                    self._close()
                    return

    def connection_lost(self, exc: Exception | None) -> None:
        self.stream.closed = True
        if not self.done.done():
            self.done.set_result(None)

    def _close(self) -> None:
        self.stream.closed = True
        if self.transport is not None:
            self.transport.close()


def serve(pipe: Connection, port: int, token: str) -> None:
    """The client process: answer the pipe's commands until it closes."""
    raise_open_files_limit()  # a socket per stream
    asyncio.run(_serve(pipe, port, token))


async def _serve(pipe: Connection, port: int, token: str) -> None:
    clients = _Clients(port, token)
    loop = asyncio.get_running_loop()
    while True:
        try:
            command: Any = await loop.run_in_executor(None, pipe.recv)
        except EOFError:
            return
        if isinstance(command, Open):
            pipe.send(await clients.open(command))
        elif isinstance(command, Mark):
            clients.mark()
            pipe.send(None)
        elif isinstance(command, Collect):
            pipe.send(await clients.collect(command))
