"""What the test MCP servers share: the command line (stdio, or ``--http PORT``) and the record of calls."""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TextIO

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

RECORD_FILE = "RECORD_FILE"


def record(entry: Mapping[str, Any]) -> None:
    """Append ``entry`` and this process's id as one JSON line to the file ``RECORD_FILE`` names (if any).

    One ``write`` to a file opened for appending: the lines of concurrent calls and processes never interleave, and
    a line is in the kernel's hands before the tool runs, so a process killed right after still leaves it.
    """
    path = os.environ.get(RECORD_FILE)
    if not path:
        return
    line = json.dumps({**entry, "pid": os.getpid()}, sort_keys=True) + "\n"
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


async def record_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: records each ``tools/call`` as it arrives, from its raw params, before anything checks it."""
    if ctx.method == "tools/call":
        params = ctx.params or {}
        record(
            {
                "event": "call",
                "tool": params.get("name"),
                "arguments": params.get("arguments") or {},
                "meta": params.get("_meta") or {},
                "request_id": ctx.request_id,
            }
        )
    return await call_next(ctx)


def new_server(name: str, *, middleware: Sequence[ServerMiddleware[Any]] = ()) -> MCPServer:
    """A server that records its calls (:func:`record_calls` outermost), logging only warnings."""
    return MCPServer(name, middleware=[record_calls, *middleware], log_level="WARNING")


def serve(
    server: MCPServer,
    description: str | None,
    *,
    stdio: Callable[[MCPServer], Awaitable[None]] | None = None,
    argv: Sequence[str] | None = None,
) -> None:
    """Serve stdio (through ``stdio`` when given), or streamable HTTP on 127.0.0.1 with ``--http PORT``."""
    parser = argparse.ArgumentParser(
        prog=f"python -m tests.mcp_servers.{server.name}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP at http://127.0.0.1:PORT/mcp")
    args = parser.parse_args(argv)
    if args.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    elif stdio is not None:
        anyio.run(stdio, server)
    else:
        server.run("stdio")


async def serve_stdio_on(server: MCPServer, stdout: TextIO) -> None:
    """Serve stdio with ``stdout`` as the wire, for servers that write on the wire themselves.

    The SDK's own stdio serving points file descriptor 1 at stderr while it runs, so that stray prints miss the
    wire; ``garbage`` and ``flood`` want exactly the opposite, hence streams of their own.
    """
    stdin = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8"))
    async with stdio_server(stdin, anyio.wrap_file(stdout)) as (read_stream, write_stream):
        # MCPServer has no public way to serve given streams; its low-level server does it.
        lowlevel = server._lowlevel_server
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
