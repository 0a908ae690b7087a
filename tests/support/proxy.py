"""A TCP proxy in front of a real server that records each request's head and can cut every open connection: a
dropped connection, as a flaky network or a restarted load balancer makes one, for clients that must reconnect."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class CuttingProxy:
    """Forwards ``127.0.0.1:port`` to ``upstream``; :meth:`cut` closes every connection open through it."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.requests: list[str] = []  # each connection's first bytes: the request line and headers
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Close every connection open now, both ways, without ending an HTTP response properly."""
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        """Stop listening and cut what is open."""
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
            with self._lock:
                self._open += [downstream, upstream]
            threading.Thread(target=self._pump, args=(downstream, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, is_request: bool) -> None:
        first = is_request
        try:
            while data := source.recv(65536):
                if first:
                    self.requests.append(data.decode("latin-1").split("\r\n\r\n")[0])
                    first = False
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


@contextmanager
def cutting_proxy(upstream: str) -> Iterator[CuttingProxy]:
    """A :class:`CuttingProxy` for the duration of the block."""
    proxy = CuttingProxy(upstream)
    try:
        yield proxy
    finally:
        proxy.close()
