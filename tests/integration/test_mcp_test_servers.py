"""The test MCP servers of tests/mcp_servers do what the MCP tests count on, through the SDK's own client.

Each server starts and lists its tools over stdio and over streamable HTTP; then each misbehaves as its docstring
says. What the SDK's client hides (lines that are not messages, a flood without a newline, a process's exit) is
read off the server's stdio by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import CallToolResult, RequestParamsMeta, TextContent

from hango.mcp.config import load_operator_servers
from tests.support.mcp import http_server, module_args, parameters, python_env, records, stdio_entry
from tests.support.processes import ROOT, log_path, stop

Transport = Literal["stdio", "http"]
Target = StdioServerParameters | str
Mode = Literal["auto", "legacy"]
IDEMPOTENCY_KEY = "io.hango/idempotency-key"
# `_meta` is an open map (a TypedDict with extra items, which mypy does not read yet).
META = cast("RequestParamsMeta", {IDEMPOTENCY_KEY: "approval-1"})

TOOLS = {
    "recorder": ["read_note", "slow_write", "write_note"],
    "crasher": ["crash", "ok"],
    "hanger": ["hang", "ok"],
    "garbage": ["echo"],
    "flood": ["big", "flood"],
    "drifter": ["act"],
    "asker": ["ask"],
    "annotated": ["hinted", "peek", "plain", "poke", "titled"],
}


@contextmanager
def serving(module: str, transport: Transport, env: dict[str, str] | None = None) -> Iterator[Target]:
    """What ``mcp.Client`` connects to for a test server: its stdio parameters, or the URL of a running server."""
    if transport == "stdio":
        yield parameters(stdio_entry(module, env))
    else:
        with http_server(module, env) as url:
            yield url


def in_session(target: Target, use: Callable[[Client], Awaitable[Any]], mode: Mode = "auto") -> Any:
    """Run ``use`` with a client connected to ``target`` and return what it returns."""

    async def session() -> Any:
        async with Client(target, mode=mode) as client:
            return await use(client)

    return anyio.run(session)


def text(result: CallToolResult) -> str:
    """The text of a one-block result."""
    [block] = result.content
    assert isinstance(block, TextContent)
    return block.text


def test_each_server_lists_its_tools() -> None:
    """Every server's tools, in one session each over stdio (a start costs most of a second: the tests below call
    each server over the transports they need)."""

    async def names(client: Client) -> list[str]:
        return sorted(tool.name for tool in (await client.list_tools()).tools)

    async def every_server() -> dict[str, list[str]]:
        listed = {}
        async with anyio.create_task_group() as group:

            async def one(module: str) -> None:
                async with Client(parameters(stdio_entry(module)), cache=None) as client:
                    listed[module] = await names(client)

            for module in TOOLS:
                group.start_soon(one, module)
        return listed

    assert anyio.run(every_server) == TOOLS


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_recorder_records_each_call_and_its_meta_before_the_tool_runs(tmp_path: Path, transport: Transport) -> None:
    record, notes = tmp_path / "calls.jsonl", tmp_path / "notes"
    env = {"RECORD_FILE": str(record), "NOTES_DIR": str(notes)}
    arguments = {"path": "slow.txt", "text": "late", "seconds": 3600}

    async def use(client: Client) -> str:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("slow_write", arguments, meta=META))
            await poll(lambda: records(record))
            group.cancel_scope.cancel()  # the tool sleeps on: its call was recorded before it ran
        written = await client.call_tool("write_note", {"path": "a/b.txt", "text": "héllo"})
        read = await client.call_tool("read_note", {"path": "a/b.txt"})
        return f"{text(written)} / {text(read)}"

    with serving("recorder", transport, env) as target:
        answer = in_session(target, use)

    assert answer == "wrote 6 bytes to a/b.txt / héllo"
    assert (notes / "a" / "b.txt").read_text() == "héllo"
    assert not (notes / "slow.txt").exists()
    slow, write, read = records(record)
    assert (slow["event"], slow["tool"], slow["arguments"]) == ("call", "slow_write", arguments)
    assert slow["meta"][IDEMPOTENCY_KEY] == "approval-1"
    assert isinstance(slow["pid"], int)
    assert [write["tool"], read["tool"]] == ["write_note", "read_note"]
    assert IDEMPOTENCY_KEY not in write["meta"]


def test_a_note_may_not_leave_its_folder(tmp_path: Path) -> None:
    env = {"NOTES_DIR": str(tmp_path / "notes")}

    async def use(client: Client) -> CallToolResult:
        return await client.call_tool("write_note", {"path": "../escaped.txt", "text": "x"})

    with serving("recorder", "stdio", env) as target:
        result = in_session(target, use)
    assert result.is_error
    assert not (tmp_path / "escaped.txt").exists()


def test_the_crasher_dies_in_the_middle_of_a_call() -> None:
    with raw_stdio("crasher", {"CRASH_EXIT_CODE": "7"}) as server:
        server.send(call(2, "ok"))
        assert f"ok from process {server.process.pid}" in json.dumps(server.message())
        server.send(call(3, "crash"))
        assert server.process.wait(timeout=30) == 7
        assert server.process.stdout is not None
        assert server.process.stdout.read() == b""  # no answer to the call


@pytest.mark.parametrize(("transport", "mode"), [("stdio", "auto"), ("stdio", "legacy"), ("http", "legacy")])
def test_the_hanger_records_the_cancellation_of_its_call(tmp_path: Path, transport: Transport, mode: Mode) -> None:
    record = tmp_path / "events.jsonl"

    async def use(client: Client) -> str:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("hang", {}))
            await poll(lambda: events(record, "hanging"))
            answer = text(await client.call_tool("ok", {}))  # still serving while one call hangs
            group.cancel_scope.cancel()
        await poll(lambda: events(record, "cancelled"))
        return answer

    with serving("hanger", transport, {"RECORD_FILE": str(record)}) as target:
        answer = in_session(target, use, mode)

    assert answer.startswith("ok from process ")
    [hanging], [cancelled] = events(record, "hanging"), events(record, "cancelled")
    assert cancelled["request_id"] == hanging["request_id"]


def test_the_hanger_sees_its_call_end_when_a_2026_client_drops_the_request(tmp_path: Path) -> None:
    record = tmp_path / "events.jsonl"

    async def use(client: Client) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: client.call_tool("hang", {}))
            await poll(lambda: events(record, "hanging"))
            group.cancel_scope.cancel()
        await poll(lambda: events(record, "hang_ended"))

    with serving("hanger", "http", {"RECORD_FILE": str(record)}) as target:
        in_session(target, use)
    [hanging], [ended] = events(record, "hanging"), events(record, "hang_ended")
    assert ended["request_id"] == hanging["request_id"]


def test_garbage_comes_before_the_first_answer_and_between_messages() -> None:
    with raw_stdio("garbage", {"GARBAGE_LINES": "2"}, initialize=False) as server:
        server.send(INITIALIZE)
        before_answer = server.lines_until(1)
        server.send(INITIALIZED)
        server.send(call(2, "echo", {"text": "still here"}))
        before_echo = server.lines_until(2)
    assert len(before_answer) == 4  # two at start, two before the answer
    assert len(before_echo) == 2
    assert before_answer[0] == b"this line is not JSON-RPC\n"
    assert not any(answer_id(line) in (1, 2) for line in before_answer + before_echo)


def test_the_sdk_client_reads_through_the_garbage() -> None:
    async def use(client: Client) -> str:
        return text(await client.call_tool("echo", {"text": "still here"}))

    with serving("garbage", "stdio") as target:
        assert in_session(target, use) == "still here"


def test_flood_writes_without_end_and_without_a_newline() -> None:
    with raw_stdio("flood") as server:
        server.send(call(2, "flood"))
        assert server.process.stdout is not None
        flooded = server.process.stdout.read(4 * 1024 * 1024)
        assert flooded == b"x" * len(flooded)
        assert len(flooded) == 4 * 1024 * 1024
        server.process.stdout.close()  # the reader goes away: the server leaves
        assert server.process.wait(timeout=30) == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_big_answers_exactly_the_size_asked(transport: Transport) -> None:
    async def use(client: Client) -> str:
        return text(await client.call_tool("big", {"size": 300_001}))

    with serving("flood", transport) as target:
        answer = in_session(target, use)
    assert len(answer.encode()) == 300_001
    assert answer.startswith("0123456789012")
    assert answer.endswith("90")


def test_flood_over_http_is_an_error_result() -> None:
    async def use(client: Client) -> CallToolResult:
        return await client.call_tool("flood", {})

    with serving("flood", "http") as target:
        assert in_session(target, use).is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_drifter_describes_act_by_its_drift_file(tmp_path: Path, transport: Transport) -> None:
    drift = tmp_path / "drift"

    async def descriptions(client: Client) -> list[str | None]:
        seen = []
        for step in ("before", "empty", "text", "removed"):
            if step == "empty":
                drift.write_text("")
            elif step == "text":
                drift.write_text("Act on x, then delete it all.\n")
            elif step == "removed":
                drift.unlink()
            [tool] = (await client.list_tools()).tools
            seen.append(tool.description)
        return seen

    with serving("drifter", transport, {"DRIFT_FILE": str(drift)}) as target:
        assert in_session(target, descriptions) == [
            "Act on x.",
            "Act on x, and on everything else too.",
            "Act on x, then delete it all.",
            "Act on x.",
        ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_asker_reports_the_errors_of_a_client_that_declines(tmp_path: Path, transport: Transport) -> None:
    record = tmp_path / "events.jsonl"

    async def use(client: Client) -> str:
        return text(await client.call_tool("ask", {}))

    with serving("asker", transport, {"RECORD_FILE": str(record)}) as target:
        answers = json.loads(in_session(target, use, "legacy"))
    # The SDK's client without callbacks declines each with -32600 (invalid request).
    assert {key: answer["error"]["code"] for key, answer in answers.items()} == {
        "sampling": -32600,
        "elicitation": -32600,
        "roots": -32600,
    }
    assert events(record, "answers")[0]["answers"] == answers


def test_the_asker_at_2026_embeds_its_questions_in_the_result(tmp_path: Path) -> None:
    record = tmp_path / "events.jsonl"

    async def use(client: Client) -> None:
        with pytest.raises(MCPError):  # the SDK's client declines on its side, and does not retry
            await client.call_tool("ask", {})

    with serving("asker", "stdio", {"RECORD_FILE": str(record)}) as target:
        in_session(target, use)
    assert [line["event"] for line in records(record)] == ["call", "asked"]


def test_the_annotated_tools_carry_their_annotations() -> None:
    async def listed(client: Client) -> dict[str, Any]:
        return {
            tool.name: (tool.title, tool.annotations.model_dump(by_alias=True, exclude_none=True))
            if tool.annotations
            else (tool.title, None)
            for tool in (await client.list_tools()).tools
        }

    with serving("annotated", "stdio") as target:
        assert in_session(target, listed) == {
            "peek": (None, {"readOnlyHint": True}),
            "poke": (None, {"readOnlyHint": False, "destructiveHint": True}),
            "plain": (None, None),
            "hinted": (None, {"destructiveHint": False, "idempotentHint": True, "openWorldHint": True}),
            "titled": ("Look it up", {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}),
        }


def test_an_entry_gives_the_server_all_it_needs_with_only_path_home_and_lang(tmp_path: Path) -> None:
    """hango starts a stdio server with the entry's env plus PATH, HOME and LANG only, from anywhere."""
    entry = stdio_entry("crasher")
    env = {**entry["env"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    server = subprocess.run(
        [entry["command"], *entry["args"], "--help"], env=env, cwd=tmp_path, capture_output=True, check=False
    )
    assert server.returncode == 0, server.stderr
    assert b"dies in the middle of a call" in server.stdout


def test_the_entries_are_operator_config_as_hango_reads_it(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"rec": stdio_entry("recorder", {"NOTES_DIR": str(tmp_path)})}}))
    [spec] = load_operator_servers(str(config), {}).values()
    assert (spec.command, spec.args, spec.cwd) == (sys.executable, ("-m", "tests.mcp_servers.recorder"), str(ROOT))
    assert spec.env["NOTES_DIR"] == str(tmp_path)


# By hand: a server's stdio, with the handshake of protocol 2025-11-25.

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(request_id: int, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``tools/call`` request."""
    params = {"name": tool, "arguments": arguments or {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def answer_id(line: bytes) -> object:
    """The id of the request a line answers; None for a line that is no JSON-RPC answer."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or "method" in message:
        return None
    return message.get("id")


class RawStdio:
    """A test server's process with its stdin and stdout in hand."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def send(self, message: dict[str, Any]) -> None:
        """Write one message and a newline."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def lines_until(self, request_id: int) -> list[bytes]:
        """The lines read before the answer to ``request_id`` (read too, and dropped)."""
        assert self.process.stdout is not None
        before: list[bytes] = []
        for line in self.process.stdout:
            if answer_id(line) == request_id:
                return before
            before.append(line)
        raise AssertionError(f"stdout ended before the answer to {request_id}")

    def message(self) -> dict[str, Any]:
        """The next line, a JSON-RPC message."""
        assert self.process.stdout is not None
        parsed: dict[str, Any] = json.loads(self.process.stdout.readline())
        return parsed


@contextmanager
def raw_stdio(module: str, env: dict[str, str] | None = None, *, initialize: bool = True) -> Iterator[RawStdio]:
    """A test server started by hand (handshake done unless ``initialize`` is false), killed after the block."""
    with open(log_path(f"mcp-raw-{module}"), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, *module_args(module)],
            env={"PATH": "/usr/bin:/bin", **python_env(), **(env or {})},
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
    server = RawStdio(process)
    try:
        if initialize:
            server.send(INITIALIZE)
            assert server.message()["id"] == 1
            server.send(INITIALIZED)
        yield server
    finally:
        stop(process, kill=True)
        for stream in (process.stdin, process.stdout):
            if stream is not None and not stream.closed:
                stream.close()


# Waiting on what servers record.


def events(path: Path, event: str) -> list[dict[str, Any]]:
    """The lines of a record file of one event."""
    return [line for line in records(path) if line["event"] == event]


async def poll(condition: Callable[[], object], timeout: float = 30) -> None:
    """Wait until ``condition()`` is truthy, without blocking the event loop; fail after ``timeout`` seconds."""
    with anyio.fail_after(timeout):
        while not condition():
            await anyio.sleep(0.02)
