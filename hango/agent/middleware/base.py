"""The middleware base class with pass-through hooks, and the chain that composes them (first = outermost)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from hango.agent.files import FileSystem
from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult
from hango.agent.models.base import ModelRequest
from hango.agent.state import GrantLookup, LoopState, Outcome, PendingCall, StandingApproval
from hango.agent.tools.base import Tool, ToolContext


class LoopServices(Protocol):
    """What middlewares may use besides the state: the run's identity and read access to its files."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    run_id: uuid.UUID
    subagent_call_id: uuid.UUID | None
    extras: Mapping[str, Any]

    def files(self) -> AbstractContextManager[FileSystem]:
        """A read view of the run's filesystem in a short transaction."""
        ...

    def standing_approval(self, lookup: GrantLookup) -> StandingApproval | None:
        """The live grant that approves this held call of the loop's agent (and run), if any: one whose creator may
        decide it under its rule."""
        ...

    def execution_started(self, approval_id: str) -> None:
        """Commit that an approved call is about to run (its approval's ``execution`` becomes ``executing``)."""
        ...


@dataclass
class LoopScope:
    """One loop execution as middlewares see it: fixed services, the mutable state, and the messages its
    ``before_run`` hooks added."""

    services: LoopServices
    state: LoopState
    added: list[Message] = field(default_factory=list)

    def add_message(self, message: Message) -> None:
        """Append a message to the history; the loop persists it before the next step."""
        self.state.messages.append(message)
        self.added.append(message)


@dataclass(frozen=True)
class ModelCall:
    """A model call travelling through the chain; change it with ``dataclasses.replace``."""

    request: ModelRequest
    scope: LoopScope


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call travelling through the chain (to be reviewed, or to run); ``tool`` is ``None`` for an unknown
    name."""

    call: ToolCall
    tool: Tool | None
    context: ToolContext
    scope: LoopScope


class Refused:
    """A review's verdict that the call will be refused when it runs (an error result), so nobody need decide it."""


REFUSED = Refused()
# What a middleware's review says of one call: nothing to add (None), it will be refused, or it must wait.
Verdict = PendingCall | Refused | None


ModelHandler = Callable[[ModelCall], AssistantTurn]
ToolHandler = Callable[[ToolCallRequest], ToolResult]


class Middleware:
    """Base class: every hook passes through unchanged. Subclasses override what they need."""

    name = "middleware"

    def before_run(self, scope: LoopScope) -> None:
        """Called once per loop execution (start or resume), before any model or tool call."""

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        """Wrap one model call; call ``handler`` to continue inwards."""
        return handler(call)

    def review_tool_call(self, request: ToolCallRequest) -> Verdict:
        """Review one call of a batch before any call of it runs; nothing executes here.

        Return :data:`REFUSED` when this layer will answer the call with an error, a :class:`PendingCall` when it
        must wait for a human, or ``None``. A batch with a pending call (and no refusal of that call) suspends
        whole, before a single call ran.
        """
        return None

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Wrap one tool call as it runs; call ``handler`` to continue inwards."""
        return handler(request)

    def after_run(self, scope: LoopScope, outcome: Outcome) -> None:
        """Called once when the loop execution ends with ``outcome``."""


class Chain:
    """Middlewares composed as an onion: the first in the list is the outermost."""

    def __init__(self, middlewares: Sequence[Middleware]) -> None:
        self.middlewares = list(middlewares)

    def before_run(self, scope: LoopScope) -> None:
        """Run every ``before_run``, outermost first."""
        for middleware in self.middlewares:
            middleware.before_run(scope)

    def after_run(self, scope: LoopScope, outcome: Outcome) -> None:
        """Run every ``after_run``, innermost first."""
        for middleware in reversed(self.middlewares):
            middleware.after_run(scope, outcome)

    def model_call(self, call: ModelCall, innermost: ModelHandler) -> AssistantTurn:
        """Send a model call through every ``wrap_model_call`` to ``innermost``."""
        handler = innermost
        for middleware in reversed(self.middlewares):
            handler = _bind_model(middleware, handler)
        return handler(call)

    def review(self, request: ToolCallRequest) -> PendingCall | None:
        """The call's pending entry when a middleware holds it for a human and none will refuse it.

        A call an inner (or outer) layer refuses — a tool outside the allowlist, say — never waits for a human:
        whatever the human decided, it would not run.
        """
        verdicts = [middleware.review_tool_call(request) for middleware in self.middlewares]
        if any(isinstance(verdict, Refused) for verdict in verdicts):
            return None
        return next((verdict for verdict in verdicts if isinstance(verdict, PendingCall)), None)

    def tool_call(self, request: ToolCallRequest, innermost: ToolHandler) -> ToolResult:
        """Send a tool call through every ``wrap_tool_call`` to ``innermost``."""
        handler = innermost
        for middleware in reversed(self.middlewares):
            handler = _bind_tool(middleware, handler)
        return handler(request)


def _bind_model(middleware: Middleware, handler: ModelHandler) -> ModelHandler:
    return lambda call: middleware.wrap_model_call(call, handler)


def _bind_tool(middleware: Middleware, handler: ToolHandler) -> ToolHandler:
    return lambda request: middleware.wrap_tool_call(request, handler)
