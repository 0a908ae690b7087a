"""Claude through the Anthropic Messages API and the official SDK, an optional extra (``hango[anthropic]``).

The SDK is imported when a model is built, never when this module is, so that hango runs without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hango.agent.messages import AssistantTurn, Block, Message, ToolCall, Usage
from hango.agent.models.base import (
    ModelError,
    ModelRequest,
    PermanentModelError,
    ToolSpec,
    install_hint,
    missing_key,
)
from hango.agent.models.retry import status_error, unreachable

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import ContentBlockParam, MessageParam, ToolParam
    from anthropic.types import Message as WireMessage

INSTALL_HINT = install_hint("anthropic")
DEFAULT_BASE_URL = "https://api.anthropic.com"


class AnthropicModel:
    """A Claude model; hango's :class:`~hango.agent.models.retry.RetryingModel` retries, so the SDK does not."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None,
        base_url: str | None,
        max_tokens: int = 4096,
        timeout: float = 60.0,
    ) -> None:
        """Build the SDK client; no request is sent.

        Args:
            name: The model id, such as ``claude-sonnet-4-5``.
            api_key: The Anthropic API key; ``None`` when none is configured, which every call refuses.
            base_url: The API root (without ``/v1``); ``None`` for Anthropic's own.
            max_tokens: The answer length cap when a request does not set one.
            timeout: Seconds to wait for one call.

        Raises:
            PermanentModelError: The ``anthropic`` SDK is not installed.
        """
        try:
            import anthropic
        except ImportError as error:
            raise PermanentModelError(INSTALL_HINT) from error
        self.name = name
        self._max_tokens = max_tokens
        # Without a key there is no client: the run's first call fails naming the setting (a subagent's fails as
        # its child loop, which its parent reads). The key and the base URL are always passed: left out, the SDK
        # would fall back to ANTHROPIC_* variables and credential files, and hango's credentials and endpoints come
        # from its settings alone.
        self._client = (
            anthropic.Anthropic(api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0, timeout=timeout)
            if api_key
            else None
        )

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """Send one Messages API call and translate its answer.

        Raises:
            TransientModelError: Rate limited, server error, timeout or connection failure.
            PermanentModelError: No API key is configured, or any other refusal, with the provider's message.
        """
        # The constructor proved that the SDK is installed; this import only looks it up.
        import anthropic

        if self._client is None:
            raise missing_key("anthropic")

        try:
            response = self._client.messages.create(
                model=self.name,
                max_tokens=self._max_tokens if request.max_tokens is None else request.max_tokens,
                messages=[_wire_message(message) for message in request.messages],
                **_optional_fields(request),
            )
        except anthropic.APIError as error:
            raise _model_error(error) from error
        return _assistant_turn(response)


def _optional_fields(request: ModelRequest) -> dict[str, Any]:
    """The system prompt and tools, left out rather than sent empty.

    They are keywords rather than the SDK's ``omit`` sentinel, which the older SDK releases hango accepts lack.
    """
    fields: dict[str, Any] = {}
    if request.system:
        fields["system"] = request.system
    if request.tools:
        fields["tools"] = [_wire_tool(tool) for tool in request.tools]
    return fields


def _wire_message(message: Message) -> MessageParam:
    """One hango message as a Messages API message; tool results travel in a user message."""
    content = [_wire_block(block) for block in message.content]
    if message.role == "assistant":
        return {"role": "assistant", "content": content}
    return {"role": "user", "content": content}


def _wire_block(block: Block) -> ContentBlockParam:
    """One hango content block in the Messages API shape, which hango's blocks were modelled on."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": block["input"]}
    if kind == "tool_result":
        return {
            "type": "tool_result",
            "tool_use_id": block["tool_use_id"],
            "content": block["content"],
            "is_error": bool(block.get("is_error")),
        }
    raise PermanentModelError(f"a {kind!r} content block cannot be sent to Anthropic")


def _wire_tool(tool: ToolSpec) -> ToolParam:
    """A tool as the Messages API describes it."""
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _assistant_turn(response: WireMessage) -> AssistantTurn:
    """The text, tool calls and usage of an answer; other block kinds (thinking, server tools) are not hango's."""
    text = "".join(block.text for block in response.content if block.type == "text")
    calls = [
        ToolCall(id=block.id, name=block.name, input=dict(block.input))
        for block in response.content
        if block.type == "tool_use"
    ]
    usage = Usage(input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens)
    return AssistantTurn(text=text, tool_calls=calls, usage=usage)


def _model_error(error: anthropic.APIError) -> ModelError:
    """The hango error for an SDK error: transient when another try may succeed."""
    import anthropic

    if isinstance(error, anthropic.APIConnectionError):
        return unreachable("Anthropic", error.message, error.__cause__)
    if isinstance(error, anthropic.APIStatusError):
        return status_error("Anthropic", error.status_code, error.body, error.message)
    return PermanentModelError(f"Anthropic API sent an unusable answer: {error.message}")
