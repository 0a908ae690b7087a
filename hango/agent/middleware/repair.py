"""Repair of dangling tool calls left by a crash mid-batch."""

from __future__ import annotations

from collections.abc import Iterable

from hango.agent.messages import Message, ToolResult
from hango.agent.middleware.base import LoopScope, Middleware

INTERRUPTED = "tool call interrupted"


class RepairToolCalls(Middleware):
    """Give every truly dangling ``tool_use`` a synthetic error result, so the history is valid again.

    A call is dangling when no result answers it. The calls of a suspended batch (the state's
    ``suspended_batch``: every decided call, and the siblings held back with them) are not dangling: the loop is
    about to re-drive them. Run before decisions are loaded, this hook would destroy the approvals it is given.
    """

    name = "repair_tool_calls"

    def __init__(self, resumable: Iterable[str] = ()) -> None:
        # Calls of these tools (the task tool) are re-driven instead: their child loop resumes where it stopped.
        self.resumable = frozenset(resumable)

    def before_run(self, scope: LoopScope) -> None:
        """Answer dangling calls with "tool call interrupted" error results."""
        held = set(scope.state.suspended_batch)
        held |= {
            call.id for message in scope.state.messages for call in message.tool_calls if call.name in self.resumable
        }
        dangling = [call_id for call_id in scope.state.unanswered_calls() if call_id not in held]
        if dangling:
            results = [ToolResult(call_id, INTERRUPTED, is_error=True).block() for call_id in dangling]
            scope.add_message(Message(role="tool", content=results))
