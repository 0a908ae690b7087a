"""AnthropicModel against a real HTTP server speaking the Messages API, through the official SDK."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import pytest

from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult, Usage, user_message
from hango.agent.models.anthropic import AnthropicModel
from hango.agent.models.base import ModelRequest, PermanentModelError, ToolSpec, TransientModelError
from hango.agent.models.retry import RetryingModel
from tests.support.stub_provider import (
    ANTHROPIC_PATH,
    StubProvider,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
)

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file of the workspace.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
HELLO = ModelRequest(system="", messages=[user_message("hi")])


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    with StubProvider() as provider:
        yield provider


def claude(base_url: str, *, max_tokens: int = 4096, timeout: float = 10.0) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", api_key="sk-ant-test", base_url=base_url, max_tokens=max_tokens, timeout=timeout
    )


def closed_port_url() -> str:
    """The URL of a local port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_text_answer_joins_its_text_blocks(stub: StubProvider) -> None:
    stub.reply(anthropic_message(anthropic_text("Hello"), anthropic_text(", world"), input_tokens=12, output_tokens=3))
    turn = claude(stub.anthropic_url).complete(HELLO)
    assert turn == AssistantTurn(text="Hello, world", tool_calls=[], usage=Usage(12, 3))


def test_tool_calls_keep_their_ids_names_inputs_and_order(stub: StubProvider) -> None:
    stub.reply(
        anthropic_message(
            anthropic_text("Let me look."),
            anthropic_tool_use("toolu_01", "read_file", {"path": "notes/a.md"}),
            anthropic_tool_use("toolu_02", "list_dir", {"path": ".", "depth": 2, "hidden": False}),
            input_tokens=321,
            output_tokens=54,
        )
    )
    turn = claude(stub.anthropic_url).complete(HELLO)
    assert turn.text == "Let me look."
    assert turn.tool_calls == [
        ToolCall("toolu_01", "read_file", {"path": "notes/a.md"}),
        ToolCall("toolu_02", "list_dir", {"path": ".", "depth": 2, "hidden": False}),
    ]
    assert turn.usage == Usage(input_tokens=321, output_tokens=54)


def test_a_round_trip_sends_the_messages_api_shape(stub: StubProvider) -> None:
    stub.reply(anthropic_message(anthropic_text("Both done.")))
    assistant = AssistantTurn(
        text="Reading both.",
        tool_calls=[
            ToolCall("toolu_a", "read_file", {"path": "a.md"}),
            ToolCall("toolu_b", "read_file", {"path": "b"}),
        ],
    ).message()
    results = Message(
        role="tool",
        content=[ToolResult("toolu_a", "# A").block(), ToolResult("toolu_b", "no such file: b", is_error=True).block()],
    )
    request = ModelRequest(
        system="You are terse.",
        messages=[user_message("read a.md and b"), assistant, results],
        tools=[READ_FILE],
        max_tokens=1024,
    )
    assert claude(stub.anthropic_url).complete(request).text == "Both done."

    (sent,) = stub.requests
    assert sent.method == "POST"
    assert sent.path == ANTHROPIC_PATH
    # SDK 2.x sends the key as a bearer token, earlier ones as ``x-api-key``; either way it must arrive.
    assert "sk-ant-test" in (
        sent.headers.get("x-api-key"),
        sent.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a.md and b"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.md"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "# A", "is_error": False},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such file: b", "is_error": True},
                ],
            },
        ],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file of the workspace.",
                "input_schema": READ_FILE.parameters,
            }
        ],
    }


def test_without_system_prompt_or_tools_neither_is_sent_and_max_tokens_defaults(stub: StubProvider) -> None:
    stub.reply(anthropic_message(anthropic_text("ok")))
    claude(stub.anthropic_url, max_tokens=777).complete(HELLO)
    body = stub.bodies[0]
    assert "system" not in body
    assert "tools" not in body
    assert body["max_tokens"] == 777


@pytest.mark.parametrize(
    ("status", "message"), [(429, "Number of requests exceeded"), (500, "Internal error"), (529, "Overloaded")]
)
def test_rate_limits_and_server_errors_are_transient(stub: StubProvider, status: int, message: str) -> None:
    stub.fail(status, message)
    with pytest.raises(TransientModelError) as raised:
        claude(stub.anthropic_url).complete(HELLO)
    assert str(raised.value) == f"Anthropic API returned HTTP {status}: {message}"
    # The SDK's own retries are off: hango's RetryingModel is the only one deciding.
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [(400, "messages.1.content: tool_use ids must be unique"), (401, "invalid x-api-key"), (404, "model: claude-x")],
)
def test_refusals_are_permanent_with_the_status_and_the_provider_message(
    stub: StubProvider, status: int, message: str
) -> None:
    stub.fail(status, message)
    with pytest.raises(PermanentModelError) as raised:
        claude(stub.anthropic_url).complete(HELLO)
    assert str(raised.value) == f"Anthropic API returned HTTP {status}: {message}"
    assert len(stub.requests) == 1


def test_a_closed_port_is_transient() -> None:
    with pytest.raises(TransientModelError, match="Anthropic API unreachable"):
        claude(closed_port_url()).complete(HELLO)


def test_a_timeout_is_transient(stub: StubProvider) -> None:
    stub.hang()
    with pytest.raises(TransientModelError, match=r"Anthropic API unreachable: Request (to \S+ )?timed out"):
        claude(stub.anthropic_url, timeout=0.3).complete(HELLO)


def test_retrying_model_recovers_from_one_unavailable_answer(stub: StubProvider) -> None:
    stub.fail(503, "Service unavailable")
    stub.reply(anthropic_message(anthropic_text("back")))
    model = RetryingModel(claude(stub.anthropic_url), attempts=3, base_delay=0.001, max_delay=0.01)
    assert model.complete(HELLO).text == "back"
    assert len(stub.requests) == 2
    assert stub.bodies[0] == stub.bodies[1]


def test_retrying_model_gives_up_with_the_providers_last_error(stub: StubProvider) -> None:
    stub.fail(503, "Service unavailable")
    stub.fail(529, "Overloaded")
    model = RetryingModel(claude(stub.anthropic_url), attempts=2, base_delay=0.001, max_delay=0.01)
    with pytest.raises(PermanentModelError) as raised:
        model.complete(HELLO)
    assert str(raised.value) == "model unavailable after 2 attempts: Anthropic API returned HTTP 529: Overloaded"


def test_a_missing_api_key_fails_the_first_call_naming_the_setting_before_any_request(stub: StubProvider) -> None:
    model = AnthropicModel("claude-test", api_key=None, base_url=stub.anthropic_url)
    with pytest.raises(PermanentModelError, match=r"^HANGO_ANTHROPIC_API_KEY is not set: "):
        model.complete(HELLO)
    assert stub.requests == []


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes ``import anthropic`` raise ImportError, as if it were not installed.
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(PermanentModelError) as raised:
        AnthropicModel("claude-test", api_key="sk-ant-test", base_url=None)
    assert str(raised.value) == "the anthropic provider needs `pip install 'hango[anthropic]'`"
