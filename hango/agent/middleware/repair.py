"""Repair of dangling tool calls left by a crash mid-batch."""

from __future__ import annotations

from hango.agent.messages import Message, ToolResult
from hango.agent.middleware.base import LoopScope, Middleware

INTERRUPTED = "tool call interrupted"
DECIDED_KEY = "decided_calls"


class RepairToolCalls(Middleware):
    """Give every truly dangling ``tool_use`` a synthetic error result, so the history is valid again.

    A call is dangling when no result answers it. Calls listed in the state's private area under
    ``decided_calls`` are not dangling: a human decided them and the loop is about to execute them.
    """

    name = "repair_tool_calls"

    def before_run(self, scope: LoopScope) -> None:
        """Answer dangling calls with "tool call interrupted" error results."""
        decided = set(scope.state.private.get(DECIDED_KEY, []))
        dangling = [call_id for call_id in scope.state.unanswered_calls() if call_id not in decided]
        if dangling:
            results = [ToolResult(call_id, INTERRUPTED, is_error=True).block() for call_id in dangling]
            scope.add_message(Message(role="tool", content=results))
