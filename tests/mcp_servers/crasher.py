"""An MCP server that dies in the middle of a call.

Tools:
    ``crash()``: ends its own process at once (``os._exit``), while the call is in flight: no answer ever comes.
    ``ok()``: answers ``ok from process PID``, so a test can tell a server started again from the one that died.

Environment:
    ``CRASH_EXIT_CODE``: the exit status of ``crash`` (default 3).
    ``RECORD_FILE``: where every ``tools/call`` is recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.crasher [--http PORT]``.
"""

from __future__ import annotations

import os

from tests.mcp_servers._common import new_server, serve

server = new_server("crasher")


@server.tool(structured_output=False)
def crash() -> str:
    """Crash the server process in the middle of this call."""
    os._exit(int(os.environ.get("CRASH_EXIT_CODE", "3")))


@server.tool(structured_output=False)
def ok() -> str:
    """Answer, naming this server's process."""
    return f"ok from process {os.getpid()}"


if __name__ == "__main__":
    serve(server, __doc__)
