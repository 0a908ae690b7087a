"""An MCP server that prints lines that are not JSON-RPC on stdout: before it answers anything, and between messages.

The lines, in turn: plain text, a JSON object that is no JSON-RPC message, a JSON array, a JSON-RPC response to a
request nobody sent, and a line cut in the middle of a JSON object. Over HTTP (``--http``) it serves cleanly:
the garbage is a stdio matter.

Tools:
    ``echo(text)``: answers ``text``.

Environment:
    ``GARBAGE_LINES``: how many garbage lines come at start and before each message (default 2).
    ``RECORD_FILE``: where every ``tools/call`` is recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.garbage [--http PORT]``.
"""

from __future__ import annotations

import io
import itertools
import os
import sys

from mcp.server.mcpserver import MCPServer

from tests.mcp_servers._common import new_server, serve, serve_stdio_on

GARBAGE = (
    "this line is not JSON-RPC",
    '{"hello": "a JSON object, but no JSON-RPC message"}',
    "[1, 2, 3]",
    '{"jsonrpc": "2.0", "id": "nobody-asked", "result": {}}',
    '{"jsonrpc": "2.0", "id": 1, "res',
)

server = new_server("garbage")


class GarblingStdout(io.TextIOWrapper):
    """The server's stdout, where garbage lines come before every message the SDK writes."""

    def __init__(self, lines_per_gap: int) -> None:
        super().__init__(sys.stdout.buffer, encoding="utf-8")
        self.lines_per_gap = lines_per_gap
        self.garbage = itertools.cycle(GARBAGE)

    def write(self, text: str) -> int:
        """Garbage first, then the message."""
        self.write_garbage()
        return super().write(text)

    def write_garbage(self) -> None:
        """The next few garbage lines."""
        for line in itertools.islice(self.garbage, self.lines_per_gap):
            super().write(line + "\n")


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Answer with the text given."""
    return text


async def serve_garbled(mcp_server: MCPServer) -> None:
    """Serve stdio with garbage before the first message and between all of them."""
    stdout = GarblingStdout(int(os.environ.get("GARBAGE_LINES", "2")))
    stdout.write_garbage()
    stdout.flush()
    await serve_stdio_on(mcp_server, stdout)


if __name__ == "__main__":
    serve(server, __doc__, stdio=serve_garbled)
