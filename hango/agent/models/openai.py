"""Chat Completions through the official OpenAI SDK, an optional extra (``hango[openai]``).

Chat Completions is the API that OpenAI-compatible servers (vLLM, Ollama, llama.cpp, gateways) implement, so this
provider also serves them through ``base_url``. The SDK is imported when a model is built, never when this module
is, so that hango runs without it.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from hango.agent.messages import AssistantTurn, Message, ToolCall, Usage
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
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
        ChatCompletionToolMessageParam,
    )
    from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCallUnion

INSTALL_HINT = install_hint("openai")
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Chat Completions has no error flag on a tool result, so a failure is told to the model in the text itself.
ERROR_PREFIX = "ERROR: "


class OpenAIModel:
    """A chat model behind Chat Completions; hango's ``RetryingModel`` retries, so the SDK does not."""

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
            name: The model id, such as ``gpt-4o``.
            api_key: The API key (any text for servers that ignore it); ``None`` when none is configured, which every
                call refuses.
            base_url: The API root including ``/v1``; ``None`` for OpenAI's own.
            max_tokens: The answer length cap when a request does not set one.
            timeout: Seconds to wait for one call.

        Raises:
            PermanentModelError: The ``openai`` SDK is not installed.
        """
        try:
            import openai
        except ImportError as error:
            raise PermanentModelError(INSTALL_HINT) from error
        self.name = name
        self._max_tokens = max_tokens
        # Without a key there is no client: the run's first call fails naming the setting. The key and the base URL
        # are always passed: left out, the SDK would fall back to OPENAI_* variables, and hango's credentials and
        # endpoints come from its settings alone.
        self._client = (
            openai.OpenAI(api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0, timeout=timeout)
            if api_key
            else None
        )

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """Send one Chat Completions call and translate its answer.

        Raises:
            TransientModelError: Rate limited, server error, timeout or connection failure.
            PermanentModelError: No API key is configured, or any other refusal, with the provider's message.
        """
        # The constructor proved that the SDK is installed; this import only looks it up.
        import openai

        if self._client is None:
            raise missing_key("openai", " (any text will do for a server that takes none)")

        try:
            response = self._client.chat.completions.create(
                model=self.name,
                # ``max_tokens`` rather than ``max_completion_tokens``: compatible servers all know the former.
                max_tokens=self._max_tokens if request.max_tokens is None else request.max_tokens,
                messages=_wire_messages(request),
                **_optional_fields(request),
            )
        except openai.APIError as error:
            raise _model_error(error) from error
        return _assistant_turn(response)


def _optional_fields(request: ModelRequest) -> dict[str, Any]:
    """The tools, left out when there are none: OpenAI rejects an empty list.

    A keyword rather than the SDK's ``omit`` sentinel, which the older SDK releases hango accepts lack.
    """
    return {"tools": [_wire_tool(tool) for tool in request.tools]} if request.tools else {}


def _wire_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """The system prompt as the first message, then the history in Chat Completions roles."""
    wire: list[ChatCompletionMessageParam] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "assistant":
            wire.append(_wire_assistant(message))
        elif message.role == "tool":
            wire.extend(_wire_tool_results(message))
        else:
            wire.append({"role": "user", "content": message.text})
    return wire


def _wire_assistant(message: Message) -> ChatCompletionAssistantMessageParam:
    """An assistant message; its tool calls carry their arguments as JSON text."""
    wire: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": message.text or None}
    calls = message.tool_calls
    # An empty ``tool_calls`` list is rejected, so the key is only present when there are calls.
    if calls:
        wire["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.input)}}
            for call in calls
        ]
    return wire


def _wire_tool_results(message: Message) -> list[ChatCompletionToolMessageParam]:
    """One ``tool`` message per result of a hango tool message."""
    return [
        {
            "role": "tool",
            "tool_call_id": block["tool_use_id"],
            "content": ERROR_PREFIX + block["content"] if block.get("is_error") else block["content"],
        }
        for block in message.content
        if block.get("type") == "tool_result"
    ]


def _wire_tool(tool: ToolSpec) -> ChatCompletionFunctionToolParam:
    """A tool as a Chat Completions function."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _assistant_turn(response: ChatCompletion) -> AssistantTurn:
    """The text, tool calls and usage of the first choice."""
    if not response.choices:
        raise PermanentModelError("the OpenAI API answered without any choice")
    message = response.choices[0].message
    calls = [_tool_call(call) for call in message.tool_calls or []]
    usage = response.usage
    return AssistantTurn(
        text=message.content or message.refusal or "",
        tool_calls=calls,
        # Some compatible servers leave usage out; the call then counts as free rather than failing.
        usage=Usage(usage.prompt_tokens, usage.completion_tokens) if usage else Usage(),
    )


def _tool_call(call: ChatCompletionMessageToolCallUnion) -> ToolCall:
    """A function call of the answer, its arguments parsed."""
    if call.type != "function":
        raise PermanentModelError(f"the model made a {call.type!r} tool call, but hango only offers functions")
    return ToolCall(id=call.id, name=call.function.name, input=parse_arguments(call.function.arguments))


def parse_arguments(text: str) -> dict[str, Any]:
    """The arguments object of a function call.

    Models do not always write valid JSON. Text that is not a JSON object is kept under ``_raw_arguments`` so
    that argument validation turns it into an error result the model can read and correct, instead of failing
    the run.
    """
    # Several compatible servers send an empty string for a call without arguments.
    if not text.strip():
        return {}
    try:
        arguments = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except ValueError:  # not JSON, NaN or an infinity, or an integer past Python's digit limit
        return {"_raw_arguments": text}
    return arguments if isinstance(arguments, dict) else {"_raw_arguments": text}


def _not_json(constant: str) -> Any:
    # Python's reader takes NaN and Infinity, which JSON (and PostgreSQL's jsonb) does not.
    raise ValueError(f"{constant} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 would be read as an infinity
        raise ValueError(f"{text} is out of a double's range")
    return value


def _model_error(error: openai.APIError) -> ModelError:
    """The hango error for an SDK error: transient when another try may succeed."""
    import openai

    if isinstance(error, openai.APIConnectionError):
        return unreachable("OpenAI", error.message, error.__cause__)
    if isinstance(error, openai.APIStatusError):
        return status_error("OpenAI", error.status_code, error.body, error.message)
    return PermanentModelError(f"OpenAI API sent an unusable answer: {error.message}")
