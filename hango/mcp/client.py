"""The MCP sessions of one process, and the two things hango asks of a server: its tools, and a call.

hango's code is synchronous (Celery's prefork children, Flask); the MCP SDK is asynchronous. Each process keeps one
event loop in a daemon thread, started at first use (after any fork), and every session lives there in a task of
its own, which opened it and closes it (anyio's scopes must be left by the task that entered them). A caller hands
the loop a coroutine and waits for it with a deadline.

Sessions are reused: a stdio server is one process per tenant and server, serving every call of that tenant in
this worker process, started again when it died; at most ``HANGO_MCP_MAX_PROCESSES`` live at once (the least
recently used idle one stops for a new one). Streamable HTTP sessions are reused the same way, at most
``HANGO_MCP_MAX_HTTP_SESSIONS`` of them.

Every failure is a value or a :class:`McpUnavailable`, never a stalled caller: opening a session and listing are
bounded by ``HANGO_MCP_TIMEOUT``, a call by the timeout it is given (``HANGO_TOOL_TIMEOUT``), after which the SDK
sends ``notifications/cancelled``. Requests a server makes of hango (sampling, elicitation, roots) get the
protocol's error: hango gives the SDK no callback for them. Log lines name the server and the tool, never headers
or environment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult, Implementation

from hango.kernel.addresses import RefusedUrl, resolve
from hango.kernel.config import Settings
from hango.kernel.errors import HangoError
from hango.mcp.config import ServerSpec
from hango.mcp.transports import MessageTooLarge, http_transport, stdio_transport

log = logging.getLogger(__name__)
T = TypeVar("T")
IDEMPOTENCY_KEY = "io.hango/idempotency-key"
# What a session may still take after its own deadline to answer its caller (tear-down, a late cancellation).
_GRACE = 5.0
_PAGES = 100


class McpUnavailable(HangoError):
    """A server could not be reached, refused the session, or answered wrongly. The message names the server and
    says why, in words safe to show (never a header, a variable or a resolved internal address)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"MCP server {server} is unavailable: {reason}")
        self.server = server
        self.reason = reason


@dataclass(frozen=True)
class CallOutcome:
    """A call's result as the model reads it."""

    text: str
    is_error: bool = False


@dataclass
class _Session:
    """One open session, owned by its task on the loop."""

    key: tuple[uuid.UUID, str]
    spec: ServerSpec
    client: Client | None = None
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    in_use: int = 0
    last_used: float = field(default_factory=time.monotonic)
    # Why its transport gave up, in words safe to show (a message over the size cap); None while it holds.
    failure: str | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and not (self.ended.is_set() or self.closing.is_set())


class McpClients:
    """The MCP sessions of this process, and the operator's servers (from ``HANGO_MCP_CONFIG``)."""

    def __init__(self, settings: Settings, operator: Mapping[str, ServerSpec]) -> None:
        self.settings = settings
        self.operator = dict(operator)
        self._lock = threading.Lock()
        self._pid = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: dict[tuple[uuid.UUID, str], _Session] = {}
        self._opening: dict[tuple[uuid.UUID, str], asyncio.Future[_Session]] = {}
        self._recent: dict[tuple[uuid.UUID, str], tuple[float, list[dict[str, Any]] | McpUnavailable]] = {}

    # The caller's side: synchronous, bounded.

    def recent_tools(self, tenant_id: uuid.UUID, server: ServerSpec, max_age: float) -> list[dict[str, Any]]:
        """:meth:`list_tools`, or its answer (a failure included) of less than ``max_age`` seconds ago: for what
        only shows the tools (an agent's effective rules), never for what runs them.

        Raises:
            McpUnavailable: as :meth:`list_tools` did.
        """
        key = (tenant_id, server.identity())
        kept = self._recent.get(key)
        if kept is None or time.monotonic() - kept[0] > max_age:
            try:
                answer: list[dict[str, Any]] | McpUnavailable = self.list_tools(tenant_id, server)
            except McpUnavailable as exc:
                answer = exc
            kept = (time.monotonic(), answer)
            self._recent[key] = kept
        if isinstance(kept[1], McpUnavailable):
            raise kept[1]
        return kept[1]

    def list_tools(
        self, tenant_id: uuid.UUID, server: ServerSpec, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """The server's tools exactly as it lists them now (every member it sent, camelCase as on the wire).

        Opening a session and listing each take at most ``HANGO_MCP_TIMEOUT``, and the listing at most ``timeout``
        when that is shorter.

        Raises:
            McpUnavailable: no answer in time, a refused session or URL, a malformed answer.
        """
        limit = self.settings.mcp_timeout.total_seconds()
        if timeout is not None:
            limit = min(limit, timeout)
        return self._wait(self._list(tenant_id, server, limit), 2 * limit + _GRACE, server.name)

    def call_tool(
        self,
        tenant_id: uuid.UUID,
        server: ServerSpec,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float,
        idempotency_key: str | None = None,
    ) -> CallOutcome:
        """Call a tool; every failure (unavailable, crashed, timed out, malformed) is an error outcome. The call
        takes at most ``timeout`` once its session is open (opening one takes at most ``HANGO_MCP_TIMEOUT``)."""
        try:
            return self._wait(
                self._call(tenant_id, server, tool, dict(arguments), timeout, idempotency_key),
                timeout + self.settings.mcp_timeout.total_seconds() + _GRACE,
                server.name,
            )
        except McpUnavailable as exc:
            return CallOutcome(f"{exc}", is_error=True)

    def close(self) -> None:
        """End every session (processes stopped) and the loop; for tests and a process's shutdown."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None or self._pid != os.getpid():
            return
        future = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        with suppress(Exception):
            future.result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)

    def _wait(self, coroutine: Coroutine[Any, Any, T], limit: float, server: str) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._running_loop())
        try:
            return future.result(timeout=limit)
        except TimeoutError:
            future.cancel()
            raise McpUnavailable(server, f"no answer within {limit:g}s") from None
        except BaseException:
            future.cancel()  # a deadline of the caller's (a signal) ends the call on the loop too
            raise

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                # A forked child inherits the parent's objects but not its thread: start its own loop.
                self._pid = os.getpid()
                self._sessions = {}
                self._opening = {}
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="hango-mcp", daemon=True).start()
            return self._loop

    # The loop's side.

    async def _list(self, tenant_id: uuid.UUID, server: ServerSpec, limit: float) -> list[dict[str, Any]]:
        session = await self._session(tenant_id, server)
        session.in_use += 1
        try:
            with anyio.fail_after(limit):
                return await _all_tools(_client(session))
        except TimeoutError:
            raise McpUnavailable(server.name, f"did not list its tools within {limit:g}s") from None
        except McpUnavailable:
            raise
        except Exception as exc:
            session.closing.set()  # whatever went wrong, the next request opens a new session
            log.warning("mcp listing failed", extra={"mcp_server": server.name, "error": type(exc).__name__})
            raise McpUnavailable(server.name, f"listing its tools failed ({_reason(exc)})") from None
        finally:
            _release(session)

    async def _call(
        self,
        tenant_id: uuid.UUID,
        server: ServerSpec,
        tool: str,
        arguments: dict[str, Any],
        timeout: float,
        idempotency_key: str | None,
    ) -> CallOutcome:
        session = await self._session(tenant_id, server)
        session.in_use += 1
        meta = {IDEMPOTENCY_KEY: idempotency_key} if idempotency_key else None
        try:
            with anyio.fail_after(timeout + _GRACE):
                result = await _client(session).call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=timeout,
                    meta=meta,  # type: ignore[arg-type]
                )
        except TimeoutError:
            return CallOutcome(_timed_out(server.name, tool, timeout), is_error=True)
        except Exception as exc:
            if _is_timeout(exc):
                return CallOutcome(_timed_out(server.name, tool, timeout), is_error=True)
            if _breaks_session(exc):
                session.closing.set()  # a crashed or confused server gets a new session at the next call
            reason = session.failure or _reason(exc)
            log.warning("mcp call failed", extra={"mcp_server": server.name, "tool": tool, "error": type(exc).__name__})
            return CallOutcome(f"MCP server {server.name} failed the call to {tool}: {reason}", is_error=True)
        finally:
            _release(session)
        return _outcome(result, self.settings.max_tool_result_bytes)

    async def _session(self, tenant_id: uuid.UUID, server: ServerSpec) -> _Session:
        key = (tenant_id, server.identity())
        existing = self._sessions.get(key)
        if existing is not None and existing.alive:
            existing.last_used = time.monotonic()
            return existing
        opening = self._opening.get(key)
        if opening is None:
            opening = asyncio.get_running_loop().create_future()
            self._opening[key] = opening
            owner = asyncio.get_running_loop().create_task(self._open(key, server, opening))
            # Opening (a process's start, a connection, the handshake) is bounded; the owner is cancelled at the
            # deadline, inside whatever it awaits, so every scope it entered unwinds in its own task.
            limit = self.settings.mcp_timeout.total_seconds()
            asyncio.get_running_loop().call_later(limit, lambda: opening.done() or owner.cancel())
        return await asyncio.shield(opening)

    async def _open(self, key: tuple[uuid.UUID, str], server: ServerSpec, opened: asyncio.Future[_Session]) -> None:
        """The task that owns one session: opens it, serves until told to close or the server goes, closes it."""
        session = _Session(key, server)
        try:
            await self._make_room(server.transport)
            async with self._client(server, session) as client:
                session.client = client
                self._sessions[key] = session
                self._opening.pop(key, None)
                opened.set_result(session)
                await _until_closed(session)
        except (Exception, asyncio.CancelledError) as exc:
            reason = _opening_reason(exc, limit=self.settings.mcp_timeout.total_seconds())
            if not opened.done():
                self._opening.pop(key, None)
                log.warning("mcp session refused", extra={"mcp_server": server.name, "error": type(exc).__name__})
                opened.set_exception(McpUnavailable(server.name, reason))
            else:
                log.warning("mcp session ended", extra={"mcp_server": server.name, "error": type(exc).__name__})
        finally:
            session.ended.set()
            if self._sessions.get(key) is session:
                del self._sessions[key]

    def _client(self, server: ServerSpec, session: _Session) -> Client:
        limit = self.settings.mcp_timeout.total_seconds()
        return Client(
            self._transport(server, session),
            mode="auto",
            cache=None,
            read_timeout_seconds=limit,
            client_info=Implementation(name="hango", version=_version()),
        )

    def _transport(self, server: ServerSpec, session: _Session) -> Any:
        def failed(reason: str) -> None:
            session.failure = reason

        if server.command is not None:
            return stdio_transport(
                server.command,
                server.args,
                server.env,
                server.cwd,
                max_message_bytes=_message_cap(self.settings),
                server=server.name,
                on_failure=failed,
            )
        assert server.url is not None
        target = None
        if server.scope == "tenant":
            try:
                target = resolve(
                    server.url,
                    allow_private=self.settings.mcp_allow_private_urls,
                    max_length=self.settings.mcp_max_url_length,
                )
            except RefusedUrl as exc:
                log.warning("mcp url refused", extra={"mcp_server": server.name, **exc.log_fields()})
                raise McpUnavailable(server.name, f"its URL {exc}") from None
        return http_transport(
            server.url,
            server.headers,
            target,
            timeout=self.settings.mcp_timeout.total_seconds(),
            max_message_bytes=_message_cap(self.settings),
            on_failure=failed,
        )

    async def _make_room(self, transport: str) -> None:
        """Stop the least recently used idle sessions of a transport when this process holds its cap of them:
        ``HANGO_MCP_MAX_PROCESSES`` stdio servers, ``HANGO_MCP_MAX_HTTP_SESSIONS`` streamable HTTP ones."""
        same = [s for s in self._sessions.values() if s.alive and s.spec.transport == transport]
        if transport == "stdio":
            cap, what = self.settings.mcp_max_processes, "MCP server processes (HANGO_MCP_MAX_PROCESSES)"
        else:
            cap, what = self.settings.mcp_max_http_sessions, "MCP HTTP sessions (HANGO_MCP_MAX_HTTP_SESSIONS)"
        idle = sorted((s for s in same if s.in_use == 0), key=lambda s: s.last_used)
        for session in idle[: max(0, len(same) - cap + 1)]:
            session.closing.set()
            await session.ended.wait()
        if len(same) - len(idle) >= cap:
            raise McpUnavailable("", f"this process already holds {cap} {what}, all busy")

    async def _close_all(self) -> None:
        sessions = list(self._sessions.values())
        for session in sessions:
            session.closing.set()
        for session in sessions:
            with anyio.move_on_after(5):
                await session.ended.wait()


async def _until_closed(session: _Session) -> None:
    """Wait until the session is told to close: by the cap on processes, by a failed request, or at shutdown."""
    await session.closing.wait()


async def _all_tools(client: Client) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += [tool.model_dump(mode="json", by_alias=True, exclude_unset=True) for tool in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise McpUnavailable("", f"its tool list has more than {_PAGES} pages")


def _client(session: _Session) -> Client:
    if session.client is None or session.ended.is_set():
        raise McpUnavailable(session.spec.name, "its session ended")
    return session.client


def _release(session: _Session) -> None:
    session.in_use -= 1
    session.last_used = time.monotonic()


def _outcome(result: CallToolResult, cap: int) -> CallOutcome:
    """A call's result as text: text blocks joined; ``structuredContent`` as compact JSON only when there is no
    text; image, audio and resource blocks one line each; cut at ``cap`` UTF-8 bytes with a note."""
    texts: list[str] = []
    others: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "unknown")
        if kind == "text":
            texts.append(str(getattr(block, "text", "")))
        else:
            others.append(_block_line(block))
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False))
    text = "\n".join(texts + others)
    return CallOutcome(_capped(text, cap), is_error=bool(result.is_error))


def _block_line(block: Any) -> str:
    kind = getattr(block, "type", "unknown")
    mime = getattr(block, "mime_type", None)
    data = getattr(block, "data", None)
    if kind == "resource":
        resource = getattr(block, "resource", None)
        mime = getattr(resource, "mime_type", None)
        data = getattr(resource, "text", None) or getattr(resource, "blob", None)
        return f"[resource {getattr(resource, 'uri', '')} {mime or 'unknown type'}, {len(data or '')} characters]"
    if kind == "resource_link":
        return f"[resource link {getattr(block, 'uri', '')} {mime or 'unknown type'}]"
    size = len(data) * 3 // 4 if isinstance(data, str) else 0
    return f"[{kind} {mime or 'unknown type'}, {size} bytes]"


def _capped(text: str, cap: int) -> str:
    encoded = text.encode()
    if len(encoded) <= cap:
        return text
    kept = encoded[:cap].decode(errors="ignore")
    return f"{kept}\n[result cut: it had {len(encoded)} bytes, over the limit of {cap} (HANGO_MAX_TOOL_RESULT_BYTES)]"


def _message_cap(settings: Settings) -> int:
    """The longest line a stdio server may send: a capped result's worth with room for JSON escapes and more."""
    return max(4 * settings.max_tool_result_bytes, 1_048_576)


def _timed_out(server: str, tool: str, timeout: float) -> str:
    return (
        f"MCP tool {tool} of server {server} did not answer within {timeout:.3g}s (HANGO_TOOL_TIMEOUT); the call "
        "was cancelled, and what it did before is not known"
    )


def _breaks_session(exc: BaseException) -> bool:
    """Whether a failed request leaves the session unusable: anything but an error the server answered with."""
    return not isinstance(exc, MCPError) or exc.code == CONNECTION_CLOSED


def _is_timeout(exc: BaseException) -> bool:
    return "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, McpUnavailable):
        return exc.reason
    if isinstance(exc, MessageTooLarge):
        return str(exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _opening_reason(exc: BaseException, *, limit: float) -> str:
    if isinstance(exc, McpUnavailable):
        return exc.reason
    if isinstance(exc, TimeoutError | asyncio.CancelledError):
        return f"it did not start or answer within {limit:g}s (HANGO_MCP_TIMEOUT)"
    if isinstance(exc, FileNotFoundError | PermissionError):
        return "its command could not be started"
    return f"the session could not be opened ({_reason(exc)})"


def _version() -> str:
    from hango import __version__

    return __version__
