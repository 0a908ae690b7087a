"""The tool allowlist: the model is offered, and may run, only the agent's configured tools."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from hango.agent.messages import AssistantTurn, ToolResult
from hango.agent.middleware.base import (
    REFUSED,
    Middleware,
    ModelCall,
    ModelHandler,
    ToolCallRequest,
    ToolHandler,
    Verdict,
)


class ToolAllowlist(Middleware):
    """Refuse any call to a tool outside the allowlist with an error result the model can read."""

    name = "tool_allowlist"

    def __init__(self, allowed: Iterable[str]) -> None:
        self.allowed = frozenset(allowed)

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        """Offer only allowed tools."""
        tools = [tool for tool in call.request.tools if tool.name in self.allowed]
        return handler(dataclasses.replace(call, request=dataclasses.replace(call.request, tools=tools)))

    def review_tool_call(self, request: ToolCallRequest) -> Verdict:
        """A call outside the allowlist will be refused: no human is asked about it."""
        return REFUSED if request.call.name not in self.allowed else None

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Run allowed tools; answer others with an error."""
        if request.call.name not in self.allowed:
            return ToolResult(request.call.id, f"tool {request.call.name!r} is not available to this agent", True)
        return handler(request)
