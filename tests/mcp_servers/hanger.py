"""An MCP server whose call never returns, and that records the cancellation it receives.

Tools:
    ``hang()``: never returns. Records ``{"event": "hanging", "request_id"}`` when it starts and
    ``{"event": "hang_ended", "request_id"}`` when its task is cancelled (for any reason: the protocol's
    cancellation, a closed HTTP request, the server's shutdown).
    ``ok()``: answers ``ok from process PID``: the server still serves other calls while one hangs.

Each ``notifications/cancelled`` the server receives is recorded as ``{"event": "cancelled", "request_id",
"reason"}``, the request id as the client sent it: a test matches it with the ``request_id`` of the call's lines.
Over stdio, and over HTTP with the handshake (protocol 2025-11-25 and before), the SDK's client cancels this way;
over HTTP at protocol 2026-07-28 a client cancels by closing the request, which shows as ``hang_ended`` alone.

Environment:
    ``RECORD_FILE``: where the calls and these events are recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.hanger [--http PORT]``.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context

from tests.mcp_servers._common import new_server, record, serve


async def record_cancellations(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: records each ``notifications/cancelled`` (the SDK has already cancelled the call's task)."""
    if ctx.method == "notifications/cancelled":
        params = ctx.params or {}
        record({"event": "cancelled", "request_id": params.get("requestId"), "reason": params.get("reason")})
    return await call_next(ctx)


server = new_server("hanger", middleware=[record_cancellations])


@server.tool(structured_output=False)
async def hang(ctx: Context) -> str:
    """Never return."""
    request_id = ctx.request_context.request_id
    record({"event": "hanging", "request_id": request_id})
    try:
        await anyio.sleep_forever()
    finally:
        record({"event": "hang_ended", "request_id": request_id})
    raise AssertionError("sleep_forever returned")


@server.tool(structured_output=False)
def ok() -> str:
    """Answer, naming this server's process."""
    return f"ok from process {os.getpid()}"


if __name__ == "__main__":
    serve(server, __doc__)
