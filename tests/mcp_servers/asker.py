"""An MCP server that asks its client for sampling, elicitation and roots during a call, and reports the answers.

hango supports none of these requests and must decline each with the protocol's error; the tool's result then
says which error came back for which request.

Tools:
    ``ask()``: asks the client three things and answers a JSON object ``{"sampling": ..., "elicitation": ...,
    "roots": ...}``, each ``{"result": ...}`` (the client answered) or ``{"error": {"code", "message"}}`` (it
    declined, or did not answer within ``ASK_TIMEOUT``: the SDK's timeout error). How it asks follows the
    protocol version:

    - with the handshake (2025-11-25 and before): requests ``sampling/createMessage``, ``elicitation/create`` and
      ``roots/list`` to the client in the middle of the call, one after the other;
    - at 2026-07-28, which has no such requests: the first round answers an ``InputRequiredResult`` carrying the
      three requests, and the client's retry gets the report. A client that declines there raises on its side
      and never retries, so only ``{"event": "asked"}`` is recorded.

    Each round records ``{"event": "asked"}`` and then ``{"event": "answers", "answers": ...}`` as it learns them.

Environment:
    ``ASK_TIMEOUT``: seconds to wait for each answer with the handshake (default 10).
    ``RECORD_FILE``: where every ``tools/call`` and these events are recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.asker [--http PORT]``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    InputResponses,
    ListRootsRequest,
    ListRootsResult,
    Result,
    SamplingMessage,
    TextContent,
)

from tests.mcp_servers._common import new_server, record, serve

server = new_server("asker")

QUESTIONS: dict[str, tuple[CreateMessageRequest | ElicitRequest | ListRootsRequest, type[Result]]] = {
    "sampling": (
        CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text="Say hello."))],
                max_tokens=16,
            )
        ),
        CreateMessageResult,
    ),
    "elicitation": (
        ElicitRequest(
            params=ElicitRequestFormParams(
                message="What is your name?",
                requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
            )
        ),
        ElicitResult,
    ),
    "roots": (ListRootsRequest(), ListRootsResult),
}


@server.tool(structured_output=False)
async def ask(ctx: Context) -> str | InputRequiredResult:
    """Ask the client for a sampling, an elicitation and its roots; report what came back."""
    if ctx.session.can_send_request:
        return report(await ask_in_call(ctx))
    if ctx.input_responses is None:
        record({"event": "asked"})
        return InputRequiredResult(
            input_requests={key: request for key, (request, _) in QUESTIONS.items()}, request_state="asked"
        )
    return report(answered_in_retry(ctx.input_responses))


async def ask_in_call(ctx: Context) -> dict[str, Any]:
    """Each question as a request of its own in the middle of the call (protocol versions with the handshake)."""
    record({"event": "asked"})
    timeout = float(os.environ.get("ASK_TIMEOUT", "10"))
    metadata = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    answers: dict[str, Any] = {}
    for key, (request, result_type) in QUESTIONS.items():
        try:
            result = await ctx.session.send_request(request, result_type, timeout, metadata)
        except MCPError as exc:
            answers[key] = {"error": {"code": exc.error.code, "message": exc.error.message}}
        else:
            answers[key] = {"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}
    return answers


def answered_in_retry(responses: InputResponses) -> dict[str, Any]:
    """The answers a client sent with its retry (protocol 2026-07-28)."""
    return {
        key: {"result": response.model_dump(mode="json", by_alias=True, exclude_none=True)}
        for key, response in responses.items()
    }


def report(answers: dict[str, Any]) -> str:
    """Record the answers and say them."""
    record({"event": "answers", "answers": answers})
    return json.dumps(answers, sort_keys=True)


if __name__ == "__main__":
    serve(server, __doc__)
