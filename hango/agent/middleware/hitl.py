"""Human-in-the-loop: matching calls wait for a human; decided calls get the human's decision applied.

Before a batch runs, its calls are reviewed: a call that matches an interrupt rule, has no decision yet and
would otherwise run (no layer refuses it, its arguments fit the tool) is held as pending; the loop then suspends
the whole batch. On resume the worker loads the run's decided approvals into the state (``LoopState.decisions``)
before ``before_run``, and this middleware applies each one when the batch is re-driven:

- ``approve``: run the call as the model asked;
- ``edit``: run it with the human's arguments (checked again against the schema and the rule's scope);
- ``reject``: do not run it; an error result carrying the human's message;
- ``respond``: do not run it; the human's message is the result;
- ``expire`` (nobody decided before the deadline of a rule with ``on_expiry: reject``): do not run it; the error
  result :data:`EXPIRED_REJECTION`.

An approved call runs at most once unless its tool says it may run again. Its approval's ``execution`` becomes
``executing`` in a transaction of its own that commits before the tool starts, and ``done`` with the batch's
results. A loop that finds a call still ``executing`` knows a worker died while it ran: an ``idempotent`` tool
runs again (with the same ``idempotency_key``, the approval id), any other is answered :data:`OUTCOME_UNKNOWN`
and the model decides what to do.

A held call that a live standing approval (a grant) covers is marked ``granted``: the loop records it as decided
by the grant and it waits for nobody, but it runs as an approved call. A grant never applies where the rule does
not allow ``approve``, nor under a quorum (``approvals_required`` above 1).

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

from hango.agent.interrupts import InterruptRule
from hango.agent.messages import ToolResult
from hango.agent.middleware.base import Chain, Middleware, ToolCallRequest, ToolHandler, Verdict
from hango.agent.state import Decision, GrantLookup, LoopState, PendingCall, StandingApproval
from hango.agent.tools.base import ToolSignal
from hango.kernel.errors import HangoError

log = logging.getLogger(__name__)
OUTCOME_UNKNOWN = "outcome unknown: the worker stopped while this call ran"
EXPIRED_REJECTION = "approval expired: no reviewer decided in time"


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

    def review_tool_call(self, request: ToolCallRequest) -> Verdict:
        """Hold a matching call without a decision for a human; a call that could not run anyway is not held."""
        call = request.call
        if call.id in request.scope.state.decisions or not self.interrupts:
            return None
        rule = self.rules.get(call.name)
        if rule is None or not rule.matches(call.input):
            return None
        if request.tool is None or request.tool.argument_errors(call.input):
            return None  # answered with an error when it runs: nothing for a human to decide
        return PendingCall(
            call,
            rule.allowed_decisions,
            reviewers=rule.reviewers,
            approvals_required=rule.approvals_required,
            granted=_granted(request, rule),
            ttl=rule.ttl,
            on_expiry=rule.on_expiry,
            description=rule.description,
            tool_shown=request.tool.shown,
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Apply a decision, or refuse a held call that has none; pass any other call on."""
        decision = request.scope.state.decisions.pop(request.call.id, None)
        if decision is not None:
            return self._apply(request, decision, handler)
        if self.review_tool_call(request) is not None:
            # Review holds every such call, so this means the batch was not reviewed: refuse safely.
            return ToolResult(request.call.id, "this call needs a human decision and has none", is_error=True)
        return handler(request)

    def _apply(self, request: ToolCallRequest, decision: Decision, handler: ToolHandler) -> ToolResult:
        call = request.call
        log.info(
            "applying approval decision",
            extra={
                "tool": call.name,
                "tool_call_id": call.id,
                "decision": decision.kind,
                "decided_by": decision.decided_by,
            },
        )
        if decision.kind == "reject":
            return ToolResult(call.id, rejection_text(decision.message), is_error=True)
        if decision.kind == "respond":
            return ToolResult(call.id, decision.message)
        if decision.kind == "expire":
            return ToolResult(call.id, EXPIRED_REJECTION, is_error=True)
        if decision.execution == "executing" and not (request.tool is not None and request.tool.idempotent):
            log.warning("an approved call was running when its worker stopped", extra={"tool": call.name})
            request.scope.state.executions[decision.approval_id] = "outcome_unknown"
            return ToolResult(call.id, OUTCOME_UNKNOWN, is_error=True)
        keyed = dataclasses.replace(
            request, context=dataclasses.replace(request.context, idempotency_key=decision.approval_id)
        )
        if decision.kind == "edit":
            return self._edited(keyed, decision, handler)
        return _executed(keyed, decision, handler)

    def _edited(self, request: ToolCallRequest, decision: Decision, handler: ToolHandler) -> ToolResult:
        # The API checked these already; checking again here means no path can hand the tool unchecked input.
        args = dict(decision.args or {})
        rule = self.rules.get(request.call.name)
        if request.tool is not None and request.tool.argument_errors(args):
            return ToolResult(request.call.id, "the edited arguments do not fit the tool's schema", is_error=True)
        if rule is not None and rule.when and not rule.matches(args):
            return ToolResult(request.call.id, "the edited arguments leave the scope of the rule", is_error=True)
        edited = dataclasses.replace(request.call, input=args)
        return _executed(dataclasses.replace(request, call=edited), decision, handler)


def _executed(request: ToolCallRequest, decision: Decision, handler: ToolHandler) -> ToolResult:
    """Run an approved call once its ``executing`` mark has committed; it is ``done`` when its batch's results are
    (a call stopped by its deadline included: its error result is written with the others).

    A delegating call whose child waits for a human (a :class:`ToolSignal`) has not finished: it stays
    ``executing`` and runs again, resuming its child, when the batch does.
    """
    executions = request.scope.state.executions
    request.scope.services.execution_started(decision.approval_id)
    executions[decision.approval_id] = "done"
    try:
        return handler(request)
    except ToolSignal:
        del executions[decision.approval_id]
        raise


def _granted(request: ToolCallRequest, rule: InterruptRule) -> StandingApproval | None:
    """The standing approval of a held call, where one may apply: never beyond the rule's decisions, never where
    the rule asks for several reviewers' approvals, and only one whose creator the rule lets decide."""
    if "approve" not in rule.allowed_decisions or rule.approvals_required > 1 or request.tool is None:
        return None
    lookup = GrantLookup(request.call, request.tool.with_defaults(request.call.input), rule.reviewers)
    return request.scope.services.standing_approval(lookup)


def load_decisions(state: LoopState, decisions: Mapping[str, Decision]) -> None:
    """Put a resumed loop's decisions into its state; must run before ``before_run``.

    Only decisions for calls still unanswered count: a decided call whose result is stored has been consumed.
    """
    unanswered = set(state.unanswered_calls())
    state.decisions = {call_id: decision for call_id, decision in decisions.items() if call_id in unanswered}


def require_decisions_applied(chain: Chain, state: LoopState) -> None:
    """Refuse to drive a loop whose loaded decisions the chain would ignore (the slot removed in code).

    Without the human-in-the-loop middleware the suspended batch would be re-driven as the model asked it: a
    rejected call would run. Failing the run says why instead.

    Raises:
        UnappliedDecisions: when ``state`` carries decisions and no middleware of ``chain`` applies them.
    """
    if state.decisions and not any(isinstance(m, HumanInTheLoop) for m in chain.middlewares):
        raise UnappliedDecisions(
            "the run has human decisions to apply but its middleware stack has no human_in_the_loop slot; "
            "switch interrupts off with HANGO_INTERRUPTS_ENABLED=false instead of removing the slot"
        )
