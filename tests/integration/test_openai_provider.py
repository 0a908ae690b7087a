"""OpenAIModel against a real HTTP server speaking Chat Completions, through the official SDK."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator

import pytest

from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult, Usage, user_message
from hango.agent.models.base import ModelRequest, PermanentModelError, ToolSpec, TransientModelError
from hango.agent.models.openai import OpenAIModel
from hango.agent.models.retry import RetryingModel
from tests.support.stub_provider import OPENAI_PATH, StubProvider, openai_completion, openai_tool_call

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


def gpt(base_url: str, *, max_tokens: int = 4096, timeout: float = 10.0) -> OpenAIModel:
    return OpenAIModel("gpt-test", api_key="sk-test", base_url=base_url, max_tokens=max_tokens, timeout=timeout)


def closed_port_url() -> str:
    """The URL of a local port that nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_text_answer(stub: StubProvider) -> None:
    stub.reply(openai_completion("Hello, world", prompt_tokens=12, completion_tokens=3))
    turn = gpt(stub.openai_url).complete(HELLO)
    assert turn == AssistantTurn(text="Hello, world", tool_calls=[], usage=Usage(12, 3))


def test_tool_calls_keep_their_ids_names_parsed_arguments_and_order(stub: StubProvider) -> None:
    stub.reply(
        openai_completion(
            None,
            openai_tool_call("call_01", "read_file", {"path": "notes/a.md"}),
            openai_tool_call("call_02", "list_dir", {"path": ".", "depth": 2, "hidden": False}),
            prompt_tokens=321,
            completion_tokens=54,
        )
    )
    turn = gpt(stub.openai_url).complete(HELLO)
    assert turn.text == ""
    assert turn.tool_calls == [
        ToolCall("call_01", "read_file", {"path": "notes/a.md"}),
        ToolCall("call_02", "list_dir", {"path": ".", "depth": 2, "hidden": False}),
    ]
    assert turn.usage == Usage(input_tokens=321, output_tokens=54)


@pytest.mark.parametrize(
    "arguments",
    [
        '{"path": "a.md"',
        "path=a.md",
        '["a.md"]',
        "null",
        # What Python's reader takes but JSON (and jsonb) does not: NaN, an infinity, 1e400 read as one, and an
        # integer past Python's digit limit (a ValueError, not a JSONDecodeError).
        '{"offset": NaN}',
        '{"offset": -Infinity}',
        '{"offset": 1e400}',
        '{"offset": ' + "9" * 5000 + "}",
    ],
)
def test_arguments_that_are_not_a_json_object_are_kept_raw_for_validation_to_reject(
    stub: StubProvider, arguments: str
) -> None:
    stub.reply(openai_completion(None, openai_tool_call("call_01", "read_file", arguments)))
    (call,) = gpt(stub.openai_url).complete(HELLO).tool_calls
    assert call == ToolCall("call_01", "read_file", {"_raw_arguments": arguments})


def test_empty_arguments_mean_no_arguments(stub: StubProvider) -> None:
    stub.reply(openai_completion(None, openai_tool_call("call_01", "now", "")))
    (call,) = gpt(stub.openai_url).complete(HELLO).tool_calls
    assert call == ToolCall("call_01", "now", {})


def test_a_round_trip_sends_the_chat_completions_shape(stub: StubProvider) -> None:
    stub.reply(openai_completion("Both done."))
    assistant = AssistantTurn(
        text="Reading both.",
        tool_calls=[ToolCall("call_a", "read_file", {"path": "a.md"}), ToolCall("call_b", "read_file", {"path": "b"})],
    ).message()
    results = Message(
        role="tool",
        content=[ToolResult("call_a", "# A").block(), ToolResult("call_b", "no such file: b", is_error=True).block()],
    )
    silent = AssistantTurn(tool_calls=[ToolCall("call_c", "read_file", {"path": "c"})]).message()
    request = ModelRequest(
        system="You are terse.",
        messages=[
            user_message("read a.md and b"),
            assistant,
            results,
            silent,
            Message("tool", [ToolResult("call_c", "C").block()]),
        ],
        tools=[READ_FILE],
        max_tokens=1024,
    )
    assert gpt(stub.openai_url).complete(request).text == "Both done."

    (sent,) = stub.requests
    assert sent.method == "POST"
    assert sent.path == OPENAI_PATH
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.body
    # Arguments travel as JSON text; their exact spacing is the encoder's business, their value is ours.
    arguments = [
        call["function"].pop("arguments") for message in body["messages"] for call in message.get("tool_calls", [])
    ]
    assert [json.loads(text) for text in arguments] == [{"path": "a.md"}, {"path": "b"}, {"path": "c"}]
    assert body == {
        "model": "gpt-test",
        "max_tokens": 1024,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "read a.md and b"},
            {
                "role": "assistant",
                "content": "Reading both.",
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "read_file"}},
                    {"id": "call_b", "type": "function", "function": {"name": "read_file"}},
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "# A"},
            {"role": "tool", "tool_call_id": "call_b", "content": "ERROR: no such file: b"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_c", "type": "function", "function": {"name": "read_file"}}],
            },
            {"role": "tool", "tool_call_id": "call_c", "content": "C"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file of the workspace.",
                    "parameters": READ_FILE.parameters,
                },
            }
        ],
    }


def test_without_system_prompt_or_tools_neither_is_sent_and_max_tokens_defaults(stub: StubProvider) -> None:
    stub.reply(openai_completion("ok"))
    gpt(stub.openai_url, max_tokens=777).complete(HELLO)
    body = stub.bodies[0]
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert "tools" not in body
    assert body["max_tokens"] == 777


@pytest.mark.parametrize(
    ("status", "message"),
    [(429, "Rate limit reached for gpt-test"), (500, "The server had an error"), (503, "Slow down")],
)
def test_rate_limits_and_server_errors_are_transient(stub: StubProvider, status: int, message: str) -> None:
    stub.fail(status, message)
    with pytest.raises(TransientModelError) as raised:
        gpt(stub.openai_url).complete(HELLO)
    assert str(raised.value) == f"OpenAI API returned HTTP {status}: {message}"
    # The SDK's own retries are off: hango's RetryingModel is the only one deciding.
    assert len(stub.requests) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Invalid 'messages[2].tool_call_id': no matching tool call"),
        (401, "Incorrect API key provided: sk-test"),
        (404, "The model `gpt-x` does not exist"),
    ],
)
def test_refusals_are_permanent_with_the_status_and_the_provider_message(
    stub: StubProvider, status: int, message: str
) -> None:
    stub.fail(status, message)
    with pytest.raises(PermanentModelError) as raised:
        gpt(stub.openai_url).complete(HELLO)
    assert str(raised.value) == f"OpenAI API returned HTTP {status}: {message}"
    assert len(stub.requests) == 1


def test_a_closed_port_is_transient() -> None:
    with pytest.raises(TransientModelError, match="OpenAI API unreachable"):
        gpt(closed_port_url()).complete(HELLO)


def test_a_timeout_is_transient(stub: StubProvider) -> None:
    stub.hang()
    with pytest.raises(TransientModelError, match="OpenAI API unreachable: Request timed out"):
        gpt(stub.openai_url, timeout=0.3).complete(HELLO)


def test_retrying_model_recovers_from_one_unavailable_answer(stub: StubProvider) -> None:
    stub.fail(503, "Service unavailable")
    stub.reply(openai_completion("back"))
    model = RetryingModel(gpt(stub.openai_url), attempts=3, base_delay=0.001, max_delay=0.01)
    assert model.complete(HELLO).text == "back"
    assert len(stub.requests) == 2
    assert stub.bodies[0] == stub.bodies[1]


def test_a_missing_api_key_fails_the_first_call_naming_the_setting_before_any_request(stub: StubProvider) -> None:
    model = OpenAIModel("gpt-test", api_key=None, base_url=stub.openai_url)
    with pytest.raises(PermanentModelError, match=r"^HANGO_OPENAI_API_KEY is not set: "):
        model.complete(HELLO)
    assert stub.requests == []


def test_a_missing_sdk_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes ``import openai`` raise ImportError, as if it were not installed.
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(PermanentModelError) as raised:
        OpenAIModel("gpt-test", api_key="sk-test", base_url=None)
    assert str(raised.value) == "the openai provider needs `pip install 'hango[openai]'`"
