"""A real HTTP server on 127.0.0.1 that receives webhook deliveries, for the webhook tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        """The body, parsed."""
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed

    @property
    def type(self) -> str:
        """The event type the body names."""
        return str(self.json["type"])


@dataclass
class Receiver:
    """Answers each request with the next status of ``statuses`` (the last one once they run out) and keeps
    what it received. Requests for an event type in ``hold`` wait until :attr:`release` is set."""

    port: int = 0
    statuses: list[int] = field(default_factory=lambda: [200])
    hold: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)
    received: list[Received] = field(default_factory=list)
    answered: list[Received] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """Where webhooks should point."""
        return f"http://127.0.0.1:{self.port}/hook"

    def of_type(self, type_: str) -> list[Received]:
        """The requests received for one event type, in order."""
        with self._lock:
            return [request for request in self.received if request.type == type_]

    def take(self, request: Received) -> int:
        """Record a request; the status to answer it with."""
        with self._lock:
            self.received.append(request)
            index = len(self.received) - 1
            return self.statuses[min(index, len(self.statuses) - 1)]

    def done(self, request: Received) -> None:
        """Record that a request was answered."""
        with self._lock:
            self.answered.append(request)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
            status = receiver.take(request)
            if request.type in receiver.hold:
                receiver.release.wait(timeout=60)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            receiver.done(request)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@contextmanager
def receiving(statuses: list[int] | None = None, hold: set[str] | None = None) -> Iterator[Receiver]:
    """A receiver listening on a free loopback port for the duration of the block."""
    receiver = Receiver(statuses=statuses or [200], hold=hold or set())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
