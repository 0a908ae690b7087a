"""The middleware base class with pass-through hooks, and the chain that composes them (first = outermost)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hango.agent.files import FileSystem
from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult
from hango.agent.models.base import ModelRequest
from hango.agent.state import LoopState, Outcome
from hango.agent.tools.base import Tool, ToolContext


class LoopServices(Protocol):
    """What middlewares may use besides the state: the run's identity and read access to its files."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    run_id: uuid.UUID
    subagent_call_id: uuid.UUID | None
    agent: dict[str, Any]
    extras: Mapping[str, Any]

    def files(self) -> AbstractContextManager[FileSystem]:
        """A read view of the run's filesystem in a short transaction."""
        ...


@dataclass(frozen=True)
class PendingCall:
    """A call that must wait for a human, with the decisions a human may take and the child loop it belongs to."""

    call: ToolCall
    allowed_decisions: tuple[str, ...]
    subagent_call_id: uuid.UUID | None = None


@dataclass
class LoopScope:
    """One loop execution as middlewares see it: fixed services, the mutable state, and this batch's pending calls."""

    services: LoopServices
    state: LoopState
    added: list[Message]
    pending: list[PendingCall] = field(default_factory=list)

    def add_message(self, message: Message) -> None:
        """Append a message to the history; the loop persists it before the next step."""
        self.state.messages.append(message)
        self.added.append(message)


@dataclass(frozen=True)
class ModelCall:
    """A model call travelling through the chain; change it with ``dataclasses.replace``."""

    request: ModelRequest
    scope: LoopScope


Phase = Literal["plan", "execute"]


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call travelling through the chain; ``tool`` is ``None`` for an unknown name.

    Every batch goes through the chain twice. In the ``plan`` phase nothing executes: the innermost handler only
    checks that the call could run, and the human-in-the-loop middleware registers calls that need a decision.
    Only when no call of the batch registered does the ``execute`` phase run the calls, so no call of a batch ever
    runs while a sibling waits for a human.
    """

    call: ToolCall
    tool: Tool | None
    context: ToolContext
    scope: LoopScope
    phase: Phase = "execute"


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

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        """Wrap one tool call; call ``handler`` to continue inwards."""
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
