"""Thousands of SSE clients in one process of their own (asyncio), driven by the stream benchmark over a pipe.

Each client is a raw HTTP/1.1 connection that notes the monotonic time (the same clock in every process of the
machine) at which each event type first reached it since the last :class:`Mark`. Running the clients apart from
the process that sends the decision keeps their reading off its interpreter lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from hango.server import raise_open_files_limit


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
    """Wait up to ``timeout`` seconds for every open stream to see ``event``; answered with the arrival times
    (``None`` for a stream that did not see it) and how many streams are open."""

    event: str
    timeout: float


@dataclass
class _Stream:
    seen: dict[str, float] = field(default_factory=dict)
    closed: bool = False


class _Clients:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.streams: list[_Stream] = []
        self.tasks: set[asyncio.Task[None]] = set()

    async def open(self, command: Open) -> int:
        fresh = [_Stream() for _ in range(command.count)]
        self.streams.extend(fresh)
        for stream in fresh:
            task = asyncio.create_task(self._follow(command.path, stream))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        await self._until(fresh, command.ready, 120)
        return sum(command.ready in stream.seen for stream in fresh)

    async def collect(self, command: Collect) -> tuple[list[float | None], int]:
        live = [stream for stream in self.streams if not stream.closed]
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
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)
        except OSError:
            stream.closed = True
            return
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.token}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        )
        writer.write(request.encode())
        try:
            status = await reader.readline()
            if b" 200 " not in status:
                return
            while True:
                line = await reader.readline()
                if not line:
                    return
                if line.startswith(b"event: "):
                    name = line[7:].strip().decode()
                    stream.seen.setdefault(name, time.monotonic())
                    if name == "run.finished":
                        return
        except (OSError, asyncio.IncompleteReadError):
            return
        finally:
            stream.closed = True
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


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
