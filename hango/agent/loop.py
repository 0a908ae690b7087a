"""The agent loop as a resumable state machine.

``AgentLoop.run(state)`` drives model calls and tool batches until the model stops calling tools, the turn budget
runs out, the run is stopped, or (with human-in-the-loop) a batch suspends. It never blocks waiting for anything
outside; it returns a tagged :data:`~hango.agent.state.Outcome` and the caller owns the run's state transition.
Every assistant message that asks for tools is persisted as soon as it is produced; each batch's tool results are
persisted together, in the same transaction as the batch's filesystem changes, after the whole batch ran. A turn
that ends the loop (a final answer, or one whose batch must wait for a human) is handed back unsaved in the outcome:
the caller stores it in the transaction that ends the loop or suspends it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from hango.agent.files import FileSystem
from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult, Usage, unique_call_ids
from hango.agent.middleware.base import Chain, LoopScope, LoopServices, ModelCall, ToolCallRequest
from hango.agent.models.base import Model, ModelError, ModelRequest, ToolSpec
from hango.agent.state import AwaitingApproval, Decision, Done, Failed, LoopState, Outcome, PendingCall
from hango.agent.tools.base import DEFAULT_LIMITS, ToolContext, ToolLimits, ToolRegistry, ToolSignal, execute
from hango.kernel.errors import HangoError

log = logging.getLogger(__name__)


class RunStopped(HangoError):
    """The run was cancelled or this worker lost its lease; the loop stops without writing anything more."""


class GrantWithdrawn(HangoError):
    """A grant the loop found was revoked (or expired) before the call it covers was recorded approved."""


class SuspendBatch(ToolSignal):
    """Raised by a delegating tool whose child loop suspended; the parent's whole batch suspends with it."""

    def __init__(self, pending: Sequence[PendingCall]) -> None:
        super().__init__("a child loop is waiting for a human")
        self.pending = tuple(pending)


class BatchScope(Protocol):
    """One tool batch's transaction: the filesystem its tools use, and where its results are written."""

    files: FileSystem

    def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        """Record that a call finished (an event committed with the batch)."""
        ...

    def isolated(self, call: ToolCall, run: Callable[[], ToolResult], *, delegates: bool = False) -> ToolResult:
        """Run one call so that a storage failure or a ``ToolTimeout`` inside it undoes only that call, as an
        error result. A ``delegates`` call (a child loop, which writes in transactions of its own) runs before the
        batch's transaction has begun, and begins nothing: no session of the batch waits idle in a transaction for
        as long as the child takes."""
        ...

    def append(self, messages: list[Message], state: LoopState) -> list[Message]:
        """Persist messages (and the state) inside the batch's transaction."""
        ...


class LoopPort(Protocol):
    """The persistence the loop needs; the worker implements it on PostgreSQL with lease fencing."""

    def check_active(self) -> None:
        """Raise :class:`RunStopped` when the run may no longer advance."""
        ...

    def append(
        self,
        messages: list[Message],
        state: LoopState,
        usage: Usage | None = None,
        *,
        finished: Sequence[tuple[ToolCall, ToolResult]] = (),
    ) -> list[Message]:
        """Persist messages and the state in one transaction, with a ``tool.finished`` for each of ``finished`` (calls
        the messages answer); returns the messages with their ``seq``."""
        ...

    def tool_started(self, call: ToolCall, state: LoopState) -> None:
        """Record that a call is about to execute, with the state that names it announced, in one transaction."""
        ...

    def batch(self) -> AbstractContextManager[BatchScope]:
        """Open a tool batch's transaction; it commits when the block ends without error."""
        ...

    def record_granted(self, granted: Sequence[PendingCall], state: LoopState) -> dict[str, Decision]:
        """Store calls that standing approvals cover as decided approvals, with the state; their decisions by call
        id."""
        ...

    def files(self) -> AbstractContextManager[FileSystem]:
        """A read view of the run's filesystem, each read a statement of its own (reviews and the memory read)."""
        ...


def _waits(held: Sequence[PendingCall]) -> bool:
    """Whether a reviewed batch must wait for a human: some held call has no standing approval."""
    return any(pending.granted is None for pending in held)


@dataclass(frozen=True)
class LoopConfig:
    """What the agent snapshot fixes for this loop."""

    system_prompt: str
    tool_names: tuple[str, ...]
    max_turns: int
    max_tokens: int | None = None
    # A thread's history window: the model sees at most this many of the last messages (``None``: all of them).
    history_window: int | None = None


def history_window(messages: list[Message], most: int, own: int) -> list[Message]:
    """The longest suffix of ``messages`` of at most ``most`` messages that starts at a user message, so no tool
    result is separated from its call. When even the loop's own messages (from index ``own``, its input first) are
    more than that, they are all shown: a run never loses sight of its own input."""
    for index in range(max(0, len(messages) - most), len(messages)):
        if messages[index].role == "user":
            return messages[index:]
    return messages[min(own, len(messages)) :]


class AgentLoop:
    """One loop (a run, or later a subagent call) over its own persisted history."""

    def __init__(
        self,
        config: LoopConfig,
        model: Model,
        chain: Chain,
        tools: ToolRegistry,
        services: LoopServices,
        port: LoopPort,
        limits: ToolLimits = DEFAULT_LIMITS,
        taken_ids: set[str] | None = None,
    ) -> None:
        self._config = config
        self._limits = limits
        # The run's tool call ids outside this loop's history (shared with the run's other loops, and grown here).
        self._taken_ids = taken_ids if taken_ids is not None else set()
        self._model = model
        self._chain = chain
        self._tools = tools
        self._services = services
        self._port = port

    def run(self, state: LoopState) -> Outcome:
        """Advance from ``state`` until the loop ends or suspends.

        A resumed loop first re-drives the batch it stopped in — the calls ``before_run`` left unanswered (a
        suspended batch, or a ``task`` call whose child resumes) — through the tool chain, and only then calls the
        model again.
        """
        scope = LoopScope(self._services, state, [])
        self._chain.before_run(scope)
        self._flush(scope)
        try:
            outcome = self._resume(scope) or self._advance(scope)
        except ModelError as exc:
            outcome = Failed(str(exc))
        self._chain.after_run(scope, outcome)
        return outcome

    def _resume(self, scope: LoopScope) -> Outcome | None:
        unanswered = set(scope.state.unanswered_calls())
        if not unanswered:
            return None
        last = next(message for message in reversed(scope.state.messages) if message.role == "assistant")
        return self.run_batch(scope, [call for call in last.tool_calls if call.id in unanswered])

    def _advance(self, scope: LoopScope) -> Outcome:
        while True:
            self._port.check_active()
            if scope.state.turn >= self._config.max_turns:
                return Failed(f"the run reached its limit of {self._config.max_turns} turns")
            turn = self._call_model(scope)
            message = turn.message()
            scope.state.messages.append(message)
            held = self._review(scope, turn.tool_calls)
            if _waits(held):
                # The turn and its suspension commit together: the caller stores the message with the approvals.
                suspended = self._suspend(scope, turn.tool_calls, held)
                return dataclasses.replace(suspended, unsaved=(message,), usage=turn.usage)
            self._port.check_active()
            if not turn.tool_calls:
                # The last turn commits with the loop's end (the run's finish, a child's result).
                return Done(turn.text, unsaved=(message,), usage=turn.usage)
            [stored] = self._port.append([message], scope.state, turn.usage)
            scope.state.messages[-1] = stored
            outcome = self.run_batch(scope, turn.tool_calls, held)
            if outcome is not None:
                return outcome

    def _call_model(self, scope: LoopScope) -> AssistantTurn:
        state = scope.state
        shown = list(state.messages)
        if self._config.history_window is not None:
            shown = history_window(shown, self._config.history_window, state.earlier)
        request = ModelRequest(
            system=self._config.system_prompt,
            messages=shown,
            tools=self._tool_specs(),
            max_tokens=self._config.max_tokens,
            turns_before=state.conversation_turns - sum(1 for message in shown if message.role == "assistant"),
        )
        answered = self._chain.model_call(ModelCall(request, scope), lambda call: self._model.complete(call.request))
        return self._with_unique_ids(answered, scope.state.messages)

    def _review(self, scope: LoopScope, calls: Sequence[ToolCall]) -> list[PendingCall]:
        """The calls of a batch that must wait for a human (:meth:`Chain.review`); nothing runs here."""
        if not calls:
            return []
        with self._port.files() as files:
            reviewed = [self._chain.review(self._request(scope, call, files)) for call in calls]
        return [pending for pending in reviewed if pending is not None]

    def _with_unique_ids(self, turn: AssistantTurn, history: Sequence[Message]) -> AssistantTurn:
        unique = unique_call_ids(turn, history, self._taken_ids)
        self._taken_ids.update(call.id for call in unique.tool_calls)
        if unique is not turn:
            pairs = zip(turn.tool_calls, unique.tool_calls, strict=True)
            renamed = {given.id: kept.id for given, kept in pairs if given.id != kept.id}
            log.warning(
                "the model repeated tool call ids; renamed %s", renamed, extra={"run_id": str(self._services.run_id)}
            )
        return unique

    def _tool_specs(self) -> list[ToolSpec]:
        return [tool.spec() for name in self._config.tool_names if (tool := self._tools.get(name)) is not None]

    def run_batch(
        self, scope: LoopScope, calls: Sequence[ToolCall], held: Sequence[PendingCall] | None = None
    ) -> Outcome | None:
        """Run one batch through the tool chain and persist its results together; ``None`` to keep looping.

        The batch is reviewed first (:meth:`Chain.review`) unless the caller just did (``held``); if any call needs
        a human, the loop suspends before a single call ran. Calls that standing approvals cover are recorded as
        decided first.
        """
        held = self._review(scope, calls) if held is None else held
        if _waits(held):
            return self._suspend(scope, calls, held)
        if held and not self._record_granted(scope, calls, held):
            return self.run_batch(scope, calls)  # a grant went away meanwhile: review the batch again
        self._port.check_active()
        with self._port.batch() as batch:
            results: dict[str, ToolResult] = {}
            waiting: list[PendingCall] = []
            # Delegating calls (children) run first: if one suspends, no other call of the batch has run.
            for call in sorted(calls, key=lambda call: not self._delegates(call)):
                if waiting and not self._delegates(call):
                    break
                try:
                    results[call.id] = self._execute_one(scope, call, batch)
                except SuspendBatch as suspended:
                    waiting.extend(suspended.pending)
            if waiting:
                return self._suspend(scope, calls, waiting)
            # The results and every call's tool.finished commit here: the batch is over, nothing of it is held.
            scope.state.suspended_batch = []
            scope.state.announced = []
            blocks = [results[call.id].block() for call in calls]
            [message] = batch.append([Message(role="tool", content=blocks)], scope.state)
        scope.state.messages.append(message)
        return None

    def _record_granted(self, scope: LoopScope, calls: Sequence[ToolCall], granted: Sequence[PendingCall]) -> bool:
        """Store the batch's granted calls as decided approvals, and the batch as held, in one transaction;
        ``False`` when a grant was withdrawn meanwhile and nothing was stored.

        From then on the batch is re-driven like one a human decided: a crash cannot drop the approvals, and an
        approved call runs once (its ``execution``) whatever happens to the worker.
        """
        scope.state.suspended_batch = [call.id for call in calls]
        try:
            decided = self._port.record_granted(granted, scope.state)
        except GrantWithdrawn:
            scope.state.suspended_batch = []
            return False
        scope.state.decisions.update(decided)
        return True

    @staticmethod
    def _suspend(scope: LoopScope, calls: Sequence[ToolCall], pending: Sequence[PendingCall]) -> AwaitingApproval:
        # The whole batch waits; the state remembers it so that repair leaves it alone on resume.
        scope.state.suspended_batch = [call.id for call in calls]
        return AwaitingApproval(pending=tuple(pending), batch=tuple(scope.state.suspended_batch))

    def _delegates(self, call: ToolCall) -> bool:
        tool = self._tools.get(call.name)
        return tool is not None and tool.delegates

    def _execute_one(self, scope: LoopScope, call: ToolCall, batch: BatchScope) -> ToolResult:
        self._announce(scope.state, call)
        request = self._request(scope, call, batch.files)
        run = partial(self._chain.tool_call, request, self._execute)
        result = batch.isolated(call, run, delegates=self._delegates(call))
        batch.tool_finished(call, result)
        return result

    def _announce(self, state: LoopState, call: ToolCall) -> None:
        """Emit a call's ``tool.started`` unless it was announced already: a re-driven batch runs a ``task`` call
        whose child suspended again, and a batch re-driven after a crash runs its calls again, but each call starts
        once in the run's log, whatever happens to its batch."""
        if call.id in state.announced:
            return
        state.announced.append(call.id)
        self._port.tool_started(call, state)

    def _request(self, scope: LoopScope, call: ToolCall, files: FileSystem) -> ToolCallRequest:
        services = self._services
        context = ToolContext(
            tenant_id=services.tenant_id,
            agent_id=services.agent_id,
            run_id=services.run_id,
            tool_call_id=call.id,
            files=files,
            subagent_call_id=services.subagent_call_id,
            extras=services.extras,
            limits=self._limits,
        )
        return ToolCallRequest(call, self._tools.get(call.name), context, scope)

    @staticmethod
    def _execute(request: ToolCallRequest) -> ToolResult:
        if request.tool is None:
            return ToolResult(request.call.id, f"unknown tool {request.call.name!r}", is_error=True)
        return execute(request.tool, request.context, request.call)

    def _flush(self, scope: LoopScope) -> None:
        """Persist what ``before_run`` hooks added (repairs), replacing them with their stored copies."""
        if not scope.added:
            return
        finished = _settle_announced(scope.state, scope.added)
        stored = self._port.append(scope.added, scope.state, finished=finished)
        added_ids = {id(message) for message in scope.added}
        kept = [message for message in scope.state.messages if id(message) not in added_ids]
        scope.state.messages[:] = kept + stored
        scope.added.clear()


def _settle_announced(state: LoopState, added: Sequence[Message]) -> list[tuple[ToolCall, ToolResult]]:
    """The announced calls that messages added before the run answer (the repair of a batch a crash interrupted),
    with their answers; they are announced no more. Each gets its ``tool.finished`` with them, so a call whose
    start is in the log also has its finish there."""
    answers = {
        block["tool_use_id"]: ToolResult(block["tool_use_id"], str(block["content"]), bool(block.get("is_error")))
        for message in added
        for block in message.content
        if block.get("type") == "tool_result"
    }
    calls = {call.id: call for message in state.messages for call in message.tool_calls}
    settled = [(calls[call_id], answers[call_id]) for call_id in state.announced if call_id in answers]
    state.announced = [call_id for call_id in state.announced if call_id not in answers]
    return settled
