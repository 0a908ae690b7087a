"""A tenant's MCP server for tests: streamable HTTP on 127.0.0.1, served by uvicorn in a thread of the test process,
answering only requests that carry its API key (``X-Api-Key``); any other request is a 401 before MCP sees it.

Its tools: ``search`` (read-only, titled), ``drop`` (destructive, open-world) and ``plain`` (no annotations). It
records the API keys it was sent, so a test can tell which headers reached it.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.responses import PlainTextResponse

from tests.support.processes import free_port, wait_until

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
TOOL_NAMES = ("search", "drop", "plain")


@dataclass
class KeyedServer:
    """The running server: its URL, the key it wants, and the keys it was sent."""

    url: str
    key: str
    keys_seen: list[str] = field(default_factory=list)


def _tools() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("tenant-docs")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, title="Search the docs"))
    def search(query: str) -> str:
        """Search the documentation."""
        return f"no page mentions {query}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=True))
    def drop(page: str) -> str:
        """Delete a page."""
        return f"dropped {page}"

    @server.tool()
    def plain(value: int) -> str:
        """Echo a number."""
        return str(value)

    return server


def _guarded(inner: Any, served: KeyedServer) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"x-api-key", b"").decode("latin-1")
            served.keys_seen.append(given)
            if given != served.key:
                await PlainTextResponse("an API key is required", status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    return app


@contextmanager
def keyed_mcp_server(key: str) -> Iterator[KeyedServer]:
    """Serve the tools at ``http://127.0.0.1:PORT/mcp`` for the duration of the block."""
    port = free_port()
    served = KeyedServer(f"http://127.0.0.1:{port}/mcp", key)
    inner = _tools().streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(_guarded(inner, served), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"mcp-keyed-{port}", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=30)
        assert server.started, "the MCP server did not start"
        yield served
    finally:
        server.should_exit = True
        thread.join(timeout=30)
