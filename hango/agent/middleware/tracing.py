"""Tracing: ``chat {model}`` and ``execute_tool {tool}`` spans, with the pause and the decision as span events.

The outermost middleware, so its spans cover everything the inner ones do, and the call it sees is the model's (an
edit replaces the arguments further in). Tool arguments are never recorded; for an ``edit`` only whether the
arguments changed is, judged by :func:`hango.agent.state.arguments_changed` as the audit row is.
"""

from __future__ import annotations

import uuid
from typing import Any

from opentelemetry.trace import SpanKind

from hango.agent.mcp import parse_name
from hango.agent.messages import AssistantTurn, ToolCall, ToolResult
from hango.agent.middleware.base import LoopScope, Middleware, ModelCall, ModelHandler, ToolCallRequest, ToolHandler
from hango.agent.state import AwaitingApproval, Outcome
from hango.kernel.telemetry import tracer


class Tracing(Middleware):
    """One span per model call and per executed tool call; a suspended call gets a span that says so."""

    name = "tracing"

    def __init__(self, model: dict[str, Any]) -> None:
        self.provider = str(model.get("provider", "unknown"))
        self.model = str(model.get("name") or self.provider)

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        """A ``chat`` span with the token usage."""
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
        }
        with tracer().start_as_current_span(f"chat {self.model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
            turn = handler(call)
            span.set_attribute("gen_ai.usage.input_tokens", turn.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", turn.usage.output_tokens)
            return turn

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """An ``execute_tool`` span for an executed call, with the human's decision when it had one."""
        decision = request.scope.state.decisions.get(request.call.id)
        with tracer().start_as_current_span(
            f"execute_tool {request.call.name}", attributes=_tool(request.call, request.context.run_id)
        ) as span:
            if decision is not None:
                event: dict[str, str | bool] = {
                    "hango.approval.decision": decision.kind,
                    "hango.approval.decided_by": decision.decided_by or "",
                    "hango.approval.args_changed": decision.changes_arguments(request.call.input),
                }
                span.add_event("tool.approval_decided", event)
            result = handler(request)
            span.set_attribute("hango.tool.outcome", "error" if result.is_error else "ok")
            return result

    def after_run(self, scope: LoopScope, outcome: Outcome) -> None:
        """A span for each of this loop's calls that now waits for a human (a child's calls get the child's)."""
        if not isinstance(outcome, AwaitingApproval):
            return
        for pending in outcome.pending:
            if pending.subagent_call_id is not None:
                continue
            call = pending.call
            with tracer().start_as_current_span(
                f"execute_tool {call.name}", attributes=_tool(call, scope.services.run_id)
            ) as span:
                span.add_event(
                    "tool.approval_requested",
                    {
                        "gen_ai.tool.name": call.name,
                        "gen_ai.tool.call.id": call.id,
                        "hango.approval.allowed_decisions": list(pending.allowed_decisions),
                    },
                )
                span.set_attribute("hango.tool.outcome", "awaiting_approval")


def _tool(call: ToolCall, run_id: uuid.UUID) -> dict[str, Any]:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        # Every hango tool is a function the agent's own process runs (no provider-side extension or datastore); an
        # MCP tool is a function on its server, named below.
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": call.id,
        "hango.run.id": str(run_id),
    }
    mcp = parse_name(call.name)
    if mcp is not None:
        attributes["hango.mcp.server"] = mcp.server
        attributes["hango.mcp.tool"] = mcp.tool
    return attributes
