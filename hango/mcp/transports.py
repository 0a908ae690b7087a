"""The two ways hango reaches an MCP server, each bounded: a process of the operator's (stdio), or a URL (streamable
HTTP).

**stdio.** The SDK's own stdio client passes the server a fixed list of the worker's variables and buffers a line of
any length; this one gives the process only its configured ``env`` plus ``PATH``, ``HOME`` and ``LANG`` (never
hango's settings), caps a message at ``max_message_bytes`` (a server flooding its output without a newline ends its
session instead of the worker's memory), drops lines that are not JSON-RPC (logged, counted), sends its standard
error nowhere, and kills the process's whole group when the session ends, or (on Linux) the moment the worker's
process dies.

**Streamable HTTP.** A tenant's URL meets the webhooks' rules against server-side request forgery when the session
opens (:func:`hango.kernel.addresses.resolve`), and every request of the session connects to the address checked
then: a name that re-resolves elsewhere later changes nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import httpx2
import mcp_types
from anyio.abc import Process
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from hango.kernel.addresses import Target

log = logging.getLogger(__name__)
# The variables of the worker's environment a stdio server also gets, besides its own ``env``.
INHERITED = ("PATH", "HOME", "LANG")
_SETPRIV = shutil.which("setpriv")
_GRACE = 0.5


class MessageTooLarge(Exception):
    """A stdio server sent a line longer than the cap; its session ends."""


def stdio_environment(own: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """What a stdio server's process gets: ``PATH``, ``HOME`` and ``LANG`` from ``environ``, then its own ``env``."""
    inherited = {name: environ[name] for name in INHERITED if name in environ}
    return {**inherited, **own}


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: tuple[str, ...],
    env: Mapping[str, str],
    cwd: str | None,
    *,
    max_message_bytes: int,
    server: str,
    on_failure: Callable[[str], None] = lambda reason: None,
) -> AsyncIterator[TransportStreams]:
    """A server process and the two streams of its session; the process group is killed when the block ends."""
    process = await anyio.open_process(
        [*_dies_with_this_process(), command, *args],
        env=stdio_environment(env, os.environ),
        cwd=cwd,
        stderr=open(os.devnull, "wb"),  # noqa: SIM115 - the process owns it; closed with the process
        start_new_session=True,
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with read_writer:
            try:
                await _read_lines(process, read_writer, max_message_bytes, server)
            except MessageTooLarge as exc:
                log.warning("MCP server sent too large a message", extra={"mcp_server": server})
                on_failure(str(exc))
                with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await read_writer.send(exc)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass

    async def writer() -> None:
        assert process.stdin is not None
        async with write_reader:
            try:
                async for message in write_reader:
                    line = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(line.encode())
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await read_writer.aclose()

    async with anyio.create_task_group() as group:
        group.start_soon(reader)
        group.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
            group.cancel_scope.cancel()


def _dies_with_this_process() -> list[str]:
    """A prefix that has the kernel kill the server when the thread that started it ends (Linux's parent-death
    signal, set by util-linux's ``setpriv`` before it runs the command): a worker killed with SIGKILL, which runs no
    clean-up, then leaves no server behind. Elsewhere, nothing: the server sees its stdin close and ends on its own."""
    if sys.platform != "linux" or _SETPRIV is None:
        return []
    return [_SETPRIV, "--pdeathsig", "KILL", "--"]


async def _read_lines(
    process: Process, out: anyio.abc.ObjectSendStream[SessionMessage | Exception], cap: int, server: str
) -> None:
    assert process.stdout is not None
    buffer = b""
    dropped = 0
    async for chunk in process.stdout:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        if len(buffer) > cap or any(len(line) > cap for line in lines):
            raise MessageTooLarge(f"it sent a message over {cap} bytes; its session was ended")
        for line in lines:
            if not line.strip():
                continue
            try:
                message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                dropped += 1
                if dropped in (1, 10, 100, 1000):
                    log.warning("MCP server wrote lines that are not JSON-RPC", extra={"mcp_server": server})
                continue
            await out.send(SessionMessage(message))


async def _stop(process: Process) -> None:
    """Close the server's stdin, give it a moment, then kill its process group."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(_GRACE):
        while process.returncode is None:
            await anyio.sleep(0.02)
    if process.returncode is None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(2):
            await process.wait()
    with suppress(Exception):
        await process.aclose()


class BoundedTransport(httpx2.AsyncHTTPTransport):
    """Caps the body of every answer to a POST (one request's answer: a JSON message, or the SSE events of one
    request) at ``max_bytes``: a server answering without end ends its session, not the worker's memory. The
    session's long-lived GET stream is left alone (the SDK caps each of its events)."""

    def __init__(self, max_bytes: int, on_failure: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._max_bytes = max_bytes
        self._on_failure = on_failure

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send the request; a POST's answer is read through the cap."""
        response = await super().handle_async_request(request)
        if request.method == "POST":
            response.stream = _CappedStream(response.stream, self._max_bytes, self._on_failure)
        return response


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, stream: Any, max_bytes: int, on_failure: Callable[[str], None]) -> None:
        self._stream = stream
        self._max_bytes = max_bytes
        self._on_failure = on_failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._max_bytes:
                reason = f"it sent an answer over {self._max_bytes} bytes; its session was ended"
                self._on_failure(reason)
                raise MessageTooLarge(reason)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class PinnedAddress(BoundedTransport):
    """Connects every request for the target's host to the address checked when the session opened."""

    def __init__(self, target: Target, max_bytes: int, on_failure: Callable[[str], None], **kwargs: Any) -> None:
        super().__init__(max_bytes, on_failure, **kwargs)
        self._target = target

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send the request to the checked address, with the name in ``Host`` and for TLS."""
        if request.url.host != self._target.host:
            raise httpx2.ConnectError(f"refusing a request to another host than {self._target.host}")
        request.url = request.url.copy_with(host=str(self._target.address))
        request.headers["host"] = self._target.host_header()
        if request.url.scheme == "https":
            request.extensions["sni_hostname"] = self._target.host
        return await super().handle_async_request(request)


@asynccontextmanager
async def http_transport(
    url: str,
    headers: Mapping[str, str],
    target: Target | None,
    *,
    timeout: float,
    max_message_bytes: int,
    on_failure: Callable[[str], None],
) -> AsyncIterator[TransportStreams]:
    """A streamable HTTP session's streams, each answer capped; with a ``target``, pinned to its checked
    address."""
    transport = (
        PinnedAddress(target, max_message_bytes, on_failure)
        if target is not None
        else BoundedTransport(max_message_bytes, on_failure)
    )
    client = httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(timeout, read=max(timeout, 300.0)),
        transport=transport,
        trust_env=False,
    )
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams
