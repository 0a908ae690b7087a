"""Human-in-the-loop: matching calls wait for a human; decided calls get the human's decision applied.

In the ``plan`` phase a call that matches an interrupt rule, has no decision yet and would otherwise run is
registered as pending; the loop then suspends the whole batch. On resume the worker loads the run's decided
approvals into the state's private area (``approval_decisions``) before ``before_run``, and this middleware
applies each one when the batch is re-driven:

- ``approve``: run the call as the model asked;
- ``edit``: run it with the human's arguments (checked again against the schema and the rule's scope);
- ``reject``: do not run it; an error result carrying the human's message;
- ``respond``: do not run it; the human's message is the result.

Switching interrupts off (``HANGO_INTERRUPTS_ENABLED=false``) keeps this middleware in the stack with
``interrupts=False``: it raises no new interrupt, but it still applies every stored decision. A run suspended
before the switch, whose decisions are stored but not yet applied, must never resume with them ignored: a rejected
or answered call would run as the model asked, and an edited one with the model's arguments. Failing such runs
instead would throw away decisions a human already made, so hango applies them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from hango.agent.interrupts import InterruptRule
from hango.agent.messages import ToolResult
from hango.agent.middleware.base import Chain, Middleware, PendingCall, ToolCallRequest, ToolHandler
from hango.agent.state import LoopState
from hango.errors import HangoError

log = logging.getLogger(__name__)
DECISIONS_KEY = "approval_decisions"


class UnappliedDecisions(HangoError):
    """A loop carries human decisions but its chain has nothing that would apply them."""


def rejection_text(message: str) -> str:
    """The error result of a rejected call; the human's message appears verbatim."""
    return f"A human reviewer rejected this tool call: {message}"


class HumanInTheLoop(Middleware):
    """Suspend calls that match the rules; apply human decisions to calls that have one.

    Args:
        rules: the interrupt rules by tool name; an ``edit`` is checked against its rule's scope even when
            interrupts are off.
        interrupts: whether a matching call without a decision waits for a human (``True``) or runs (``False``).
    """

    name = "human_in_the_loop"

    def __init__(self, rules: Mapping[str, InterruptRule], *, interrupts: bool = True) -> None:
        self.rules = dict(rules)
        self.interrupts = interrupts

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Apply a decision, register a pending call, or pass the call on."""
        decision = request.scope.state.private.get(DECISIONS_KEY, {}).get(request.call.id)
        if request.phase == "execute":
            _consume(request, request.call.id)
        if decision is not None:
            return handler(request) if request.phase == "plan" else self._apply(request, decision, handler)
        rule = self.rules.get(request.call.name)
        if not self.interrupts or rule is None or not rule.matches(request.call.input):
            return handler(request)
        if request.phase == "execute":
            # Planning registers every matching call, so this means the batch was not planned: refuse safely.
            return ToolResult(request.call.id, "this call needs a human decision and has none", is_error=True)
        planned = handler(request)
        if planned.is_error:
            return planned  # refused further in (not allowed, unknown, invalid): nothing for a human to decide
        request.scope.pending.append(PendingCall(request.call, rule.allowed_decisions))
        return ToolResult(request.call.id, "awaiting a human decision")

    def _apply(self, request: ToolCallRequest, decision: Mapping[str, Any], handler: ToolHandler) -> ToolResult:
        kind = decision["decision"]
        call = request.call
        log.info(
            "applying approval decision",
            extra={
                "tool": call.name,
                "tool_call_id": call.id,
                "decision": kind,
                "decided_by": decision.get("decided_by"),
            },
        )
        if kind == "approve":
            return handler(request)
        if kind == "edit":
            return self._edited(request, dict(decision.get("args") or {}), handler)
        if kind == "reject":
            return ToolResult(call.id, rejection_text(decision.get("message", "")), is_error=True)
        return ToolResult(call.id, decision.get("message", ""))

    def _edited(self, request: ToolCallRequest, args: dict[str, Any], handler: ToolHandler) -> ToolResult:
        # The API checked these already; checking again here means no path can hand the tool unchecked input.
        rule = self.rules.get(request.call.name)
        if request.tool is not None and request.tool.argument_errors(args):
            return ToolResult(request.call.id, "the edited arguments do not fit the tool's schema", is_error=True)
        if rule is not None and rule.when and not rule.matches(args):
            return ToolResult(request.call.id, "the edited arguments leave the scope of the rule", is_error=True)
        edited = dataclasses.replace(request.call, input=args)
        return handler(dataclasses.replace(request, call=edited))


def _consume(request: ToolCallRequest, call_id: str) -> None:
    """Forget a call's decision as it executes; the state is saved atomically with the batch's results."""
    private = request.scope.state.private
    decisions = private.get(DECISIONS_KEY, {})
    decisions.pop(call_id, None)
    if not decisions:
        private.pop(DECISIONS_KEY, None)


def load_decisions(state: LoopState, decisions: Mapping[str, Mapping[str, Any]]) -> None:
    """Put a resumed loop's decisions into its private area; must run before ``before_run``.

    Only decisions for calls still unanswered count: a decided call whose result is stored has been consumed.
    """
    unanswered = set(state.unanswered_calls())
    live = {call_id: dict(decision) for call_id, decision in decisions.items() if call_id in unanswered}
    if live:
        state.private[DECISIONS_KEY] = live


def require_decisions_applied(chain: Chain, state: LoopState) -> None:
    """Refuse to drive a loop whose loaded decisions the chain would ignore (the slot removed in code).

    Without the human-in-the-loop middleware the suspended batch would be re-driven as the model asked it: a
    rejected call would run. Failing the run says why instead.

    Raises:
        UnappliedDecisions: when ``state`` carries decisions and no middleware of ``chain`` applies them.
    """
    if DECISIONS_KEY in state.private and not any(isinstance(m, HumanInTheLoop) for m in chain.middlewares):
        raise UnappliedDecisions(
            "the run has human decisions to apply but its middleware stack has no human_in_the_loop slot; "
            "switch interrupts off with HANGO_INTERRUPTS_ENABLED=false instead of removing the slot"
        )
