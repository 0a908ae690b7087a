"""A stub model provider over real HTTP, speaking the Anthropic and OpenAI wire formats.

The official SDKs are pointed at it through ``base_url``, so a test exercises their real serialisation, HTTP
client and error classes. The stub answers from a queue of scripted responses, in order, whatever the route,
and records every request it received::

    with StubProvider() as stub:
        stub.reply(anthropic_message(anthropic_text("hi")))
        stub.fail(429, "slow down")
        model = AnthropicModel("claude", api_key="k", base_url=stub.anthropic_url)
        ...
        assert stub.requests[0].body["system"] == "be brief"

Error responses are rendered in the shape of the provider whose route was called (``/v1/messages`` for
Anthropic, ``/v1/chat/completions`` for OpenAI), so one script serves both.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"

# How long a hanging response waits at most, should a test forget to close the stub.
HANG_LIMIT_SECONDS = 30.0
POLL_INTERVAL_SECONDS = 0.01

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_exceeded"}


@dataclass(frozen=True)
class RecordedRequest:
    """A request the stub received: header names in lower case, the body decoded from JSON (raw text if not)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class ScriptedResponse:
    """One queued answer: a JSON body, an error rendered in the called provider's shape, or no answer at all."""

    status: int = 200
    body: Any = None
    error_message: str | None = None
    error_type: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    hang: bool = False


class StubProvider:
    """A threaded HTTP server on 127.0.0.1 and a free port, alive inside its ``with`` block."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[ScriptedResponse] = deque()
        self._requests: list[RecordedRequest] = []
        self._closing = threading.Event()
        self._server = _Server(self)
        # A short poll interval lets ``close`` return promptly instead of after the default half second.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(POLL_INTERVAL_SECONDS,), name="stub-provider", daemon=True
        )

    def __enter__(self) -> StubProvider:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release hanging responses, stop serving and free the port."""
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:54321``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def anthropic_url(self) -> str:
        """The ``base_url`` for the Anthropic SDK, which adds ``/v1/messages`` itself."""
        return self.url

    @property
    def openai_url(self) -> str:
        """The ``base_url`` for the OpenAI SDK, which expects ``/v1`` in it."""
        return f"{self.url}/v1"

    def reply(self, body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        """Queue a JSON answer."""
        self._push(ScriptedResponse(status=status, body=body, headers=dict(headers or {})))

    def fail(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Queue an error answer in the error shape of the provider whose route is called."""
        self._push(
            ScriptedResponse(status=status, error_message=message, error_type=error_type, headers=dict(headers or {}))
        )

    def hang(self) -> None:
        """Queue a request that gets no answer until the stub closes, to provoke client timeouts."""
        self._push(ScriptedResponse(hang=True))

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def bodies(self) -> list[Any]:
        """The bodies of every request received so far, oldest first."""
        return [request.body for request in self.requests]

    @property
    def pending(self) -> int:
        """How many scripted responses are still queued."""
        with self._lock:
            return len(self._script)

    def _push(self, scripted: ScriptedResponse) -> None:
        with self._lock:
            self._script.append(scripted)

    def _take(self, request: RecordedRequest) -> ScriptedResponse | None:
        """Record ``request`` and dequeue its answer, atomically so that concurrent requests keep script order."""
        with self._lock:
            self._requests.append(request)
            return self._script.popleft() if self._script else None

    def _wait_for_close(self) -> None:
        self._closing.wait(HANG_LIMIT_SECONDS)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stub: StubProvider) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.stub = stub


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        self._answer()

    def do_GET(self) -> None:
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet; the recorded requests say what happened."""

    def _answer(self) -> None:
        path = urlsplit(self.path).path
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = RecordedRequest(self.command, path, headers, self._read_body())
        scripted = self.server.stub._take(request)
        if scripted is None:
            # 418 is neither retried by hango nor mistaken for a scripted provider error.
            message = f"stub provider has no scripted response left for {self.command} {path}"
            scripted = ScriptedResponse(status=418, error_message=message)
        if scripted.hang:
            self.server.stub._wait_for_close()
            return
        body = scripted.body if scripted.error_message is None else error_body(path, scripted)
        self._send_json(scripted.status, body, scripted.headers)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        text = self.rfile.read(length).decode() if length else ""
        try:
            return json.loads(text) if text else None
        except json.JSONDecodeError:
            return text

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


def error_body(path: str, scripted: ScriptedResponse) -> dict[str, Any]:
    """The error document the provider behind ``path`` sends."""
    message, status = scripted.error_message, scripted.status
    if path == ANTHROPIC_PATH:
        kind = scripted.error_type or _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_stub"}
    kind = scripted.error_type or _OPENAI_ERROR_TYPES.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def anthropic_text(text: str) -> dict[str, Any]:
    """A Messages API text block."""
    return {"type": "text", "text": text}


def anthropic_tool_use(id: str, name: str, input: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages API tool_use block."""
    return {"type": "tool_use", "id": id, "name": name, "input": dict(input)}


def anthropic_message(
    *content: dict[str, Any],
    input_tokens: int = 10,
    output_tokens: int = 5,
    stop_reason: str | None = None,
    model: str = "claude-stub",
) -> dict[str, Any]:
    """A Messages API answer holding ``content``; the stop reason follows from it unless given."""
    has_tool_use = any(block["type"] == "tool_use" for block in content)
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason or ("tool_use" if has_tool_use else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def openai_tool_call(id: str, name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """A Chat Completions function call; ``arguments`` as given when text, so tests can send invalid JSON."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": text}}


def openai_completion(
    content: str | None = None,
    *tool_calls: dict[str, Any],
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str | None = None,
    model: str = "gpt-stub",
) -> dict[str, Any]:
    """A Chat Completions answer with one choice; the finish reason follows from it unless given."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
