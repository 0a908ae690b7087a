"""Metrics: the latency of every model call and executed tool call, and the tokens the models reported.

The innermost middleware, so a model call's time is the provider's answer (retries included) and a tool call's
time is the tool's own work, without the review and guards of the outer layers. A call the allowlist refuses
never gets here: it ran nothing worth timing.
"""

from __future__ import annotations

import time

from hango.agent.instruments import UNKNOWN, instruments, provider_label
from hango.agent.messages import AssistantTurn, ToolResult
from hango.agent.middleware.base import Middleware, ModelCall, ModelHandler, ToolCallRequest, ToolHandler


class Metrics(Middleware):
    """Observes one histogram sample per model call and per executed tool call, and counts tokens."""

    name = "metrics"

    def __init__(self, provider: str) -> None:
        self.provider = provider_label(provider)

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        """Time the call; count its tokens when it answered."""
        meters = instruments()
        started = time.perf_counter()
        try:
            turn = handler(call)
        finally:
            meters.model_call_seconds.labels(provider=self.provider).observe(time.perf_counter() - started)
        meters.model_tokens.labels(provider=self.provider, type="input").inc(turn.usage.input_tokens)
        meters.model_tokens.labels(provider=self.provider, type="output").inc(turn.usage.output_tokens)
        return turn

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Time the call, labelled with the registered tool's name (``unknown`` for a name nobody registered)."""
        tool = request.tool.name if request.tool is not None else UNKNOWN
        with instruments().tool_call_seconds.labels(tool=tool).time():
            return handler(request)
