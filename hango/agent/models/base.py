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
    # Assistant turns of the conversation that ``messages`` leave out (a thread's history window cut them).
    turns_before: int = 0


class ModelError(HangoError):
    """A model call failed."""


class TransientModelError(ModelError):
    """Worth retrying: rate limits (429), server errors (5xx), timeouts and connection failures."""


class PermanentModelError(ModelError):
    """Not worth retrying (bad request, authentication, unknown model); fails the run with this message."""


def install_hint(provider: str) -> str:
    """What to install for a provider whose SDK is an optional extra of the same name (quoted for every shell)."""
    return f"the {provider} provider needs `pip install 'hango[{provider}]'`"


def missing_key(provider: str, advice: str = "") -> PermanentModelError:
    """The failure of a call to a provider whose API key setting is unset, naming the variable to set.

    It is permanent: no retry can find a key, so the run fails at its first model call with this message.
    """
    variable = f"HANGO_{provider.upper()}_API_KEY"
    return PermanentModelError(
        f"{variable} is not set: the {provider} provider needs an API key in the settings of the workers that "
        f"run this agent{advice}; set it and start the run again"
    )


class Model(Protocol):
    """A chat model that may answer with tool calls."""

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """Answer one request; raise :class:`TransientModelError` or :class:`PermanentModelError` on failure."""
        ...
