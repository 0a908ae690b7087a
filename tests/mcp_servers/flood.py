"""An MCP server that floods: stdout without end, or a result as big as asked.

Tools:
    ``flood()``: writes ``x`` to stdout without end and without a newline, so the client's current line never ends
    (stdio; over HTTP it is an error result). The server exits once the client closes the pipe.
    ``big(size)``: a text result of exactly ``size`` bytes (``0123456789`` repeated), for the result size cap.

Environment:
    ``RECORD_FILE``: where every ``tools/call`` is recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.flood [--http PORT]``.
"""

from __future__ import annotations

import os
import sys

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tests.mcp_servers._common import new_server, serve, serve_stdio_on

CHUNK = b"x" * 65536
DIGITS = "0123456789"

server = new_server("flood")
# stdout's file descriptor while serving stdio: flood() writes there. None over HTTP, where there is no such wire.
stdio_wire: int | None = None


@server.tool(structured_output=False)
async def flood() -> str:
    """Write to stdout without end and without a newline."""
    if stdio_wire is None:
        raise ToolError("flood writes to stdout: serve stdio to use it")
    await anyio.to_thread.run_sync(flood_forever, stdio_wire)
    raise AssertionError("flood_forever returned")


def flood_forever(descriptor: int) -> None:
    """Write ``x`` until the reader goes away, then leave: a server that cannot speak has nothing more to do."""
    try:
        while True:
            os.write(descriptor, CHUNK)
    except OSError:
        os._exit(0)


@server.tool(structured_output=False)
def big(size: int) -> str:
    """A text result of exactly ``size`` bytes."""
    if size < 0:
        raise ToolError("size must be 0 or more")
    return (DIGITS * (size // len(DIGITS) + 1))[:size]


async def serve_on_stdout(mcp_server: MCPServer) -> None:
    """Serve stdio on the process's stdout itself, so that ``flood`` can write on the wire."""
    global stdio_wire
    stdio_wire = sys.stdout.fileno()
    await serve_stdio_on(mcp_server, sys.stdout)


if __name__ == "__main__":
    serve(server, __doc__, stdio=serve_on_stdout)
