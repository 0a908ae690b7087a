"""The model interface every provider implements, and the errors that drive retries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hango.agent.messages import AssistantTurn, Message
from hango.kernel.errors import HangoError


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """One model call: the system prompt, the loop's history and the tools on offer.

    ``messages`` use hango's roles: ``user``, ``assistant`` and ``tool`` (one message of ``tool_result`` blocks per
    batch). Providers translate them to their wire format (Anthropic sends tool results as a user message,
    OpenAI as one ``tool`` message per result).
    """

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int | None = None


class ModelError(HangoError):
    """A model call failed."""


class TransientModelError(ModelError):
    """Worth retrying: rate limits (429), server errors (5xx), timeouts and connection failures."""


class PermanentModelError(ModelError):
    """Not worth retrying (bad request, authentication, unknown model); fails the run with this message."""


class Model(Protocol):
    """A chat model that may answer with tool calls."""

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """Answer one request; raise :class:`TransientModelError` or :class:`PermanentModelError` on failure."""
        ...
