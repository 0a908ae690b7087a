"""A TCP proxy in front of Redis that signals a process group the moment given bytes cross it.

A fault test arms it with a pattern (a Celery publish of a run's task, or a broker's reply carrying one) and a
process group: when the pattern shows in the bytes of one direction, the group gets the signal (SIGKILL: the process
dies there; SIGSTOP: it freezes there) and those bytes are never forwarded, nor anything after them on that
connection. So a client is stopped exactly between two Redis commands, or right after Redis handed it a message.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from hango.platform.queue import RUN_TASK

# How much of a connection's recent bytes a pattern may span (a task message is a few kilobytes).
_WINDOW = 256 * 1024


def run_task_publish(queue: str) -> re.Pattern[bytes]:
    """A client's ``LPUSH`` of a run's task message onto ``queue`` (Celery's publish on the Redis transport)."""
    return re.compile(rb"LPUSH\r\n\$\d+\r\n" + re.escape(queue.encode()) + rb"\r\n\$\d+\r\n[^\r]*" + _task_name())


def run_task_delivery(queue: str) -> re.Pattern[bytes]:
    """Redis's reply to a ``BRPOP`` that hands a consumer a run's task message from ``queue``."""
    return re.compile(rb"\*2\r\n\$\d+\r\n" + re.escape(queue.encode()) + rb"\r\n\$\d+\r\n[^\r]*" + _task_name())


def _task_name() -> bytes:
    return re.escape(f'"{RUN_TASK}"'.encode())


@dataclass(frozen=True)
class _Trap:
    pattern: re.Pattern[bytes]
    process_group: int
    signal: signal.Signals
    replies: bool  # watch what Redis sends (else what clients send)


class Tripwire:
    """Forwards ``127.0.0.1:<port>`` to a Redis server; :meth:`arm` sets the trap, :attr:`fired` tells it sprang."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        self.fired = threading.Event()
        self.fired_at: float | None = None  # time.monotonic() of the signal
        self._trap: _Trap | None = None
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, name="tripwire", daemon=True).start()

    def arm(
        self, pattern: re.Pattern[bytes], process_group: int, sig: signal.Signals, *, replies: bool = False
    ) -> None:
        """Signal ``process_group`` with ``sig`` the first time ``pattern`` crosses (in Redis's replies when
        ``replies``, else in the clients' commands); it fires once."""
        with self._lock:
            self._trap = _Trap(pattern, process_group, sig, replies)

    def close(self) -> None:
        """Stop listening and close every connection."""
        self._listener.close()
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            _close(sock)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._upstream)
            except OSError:  # Redis is down: so is this connection
                _close(client)
                continue
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, replies: bool) -> None:
        recent = b""
        try:
            while data := source.recv(65536):
                recent = (recent + data)[-_WINDOW:]
                if self._springs(recent, replies):
                    break  # the matched bytes, and all after them, stay here
                target.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(target)

    def _springs(self, recent: bytes, replies: bool) -> bool:
        with self._lock:
            trap = self._trap
            if trap is None or trap.replies != replies or not trap.pattern.search(recent):
                return False
            self._trap = None
        os.killpg(trap.process_group, trap.signal)
        self.fired_at = time.monotonic()
        self.fired.set()
        return True


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def tripwire(upstream_port: int) -> Iterator[Tripwire]:
    """A :class:`Tripwire` for the duration of the block."""
    proxy = Tripwire(upstream_port)
    try:
        yield proxy
    finally:
        proxy.close()
