"""hango's MCP sessions against servers that misbehave on demand (tests/mcp_servers), real processes throughout.

What a worker's process keeps is checked where it is kept, :class:`hango.mcp.client.McpClients`: a stdio server is
one process per tenant, reused and started again when it dies, capped per process; every failure (a crash, a hang,
garbage, a flood, a server that asks for what hango does not give) comes back as an error result in bounded time,
and the next call works.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from hango.kernel.config import Settings
from hango.mcp.client import McpClients, McpUnavailable
from hango.mcp.config import ServerSpec
from tests.support.mcp import http_server, records, stdio_entry
from tests.support.processes import ROOT, wait_until


def _spec(name: str, module: str, record: Path, **env: str) -> ServerSpec:
    entry = stdio_entry(module, {"RECORD_FILE": str(record), **env})
    return ServerSpec(
        name, "operator", True, command=entry["command"], args=tuple(entry["args"]), env=entry["env"], cwd=entry["cwd"]
    )


@pytest.fixture
def clients(settings: Settings) -> Iterator[McpClients]:
    clients = McpClients(settings.replace(mcp_timeout=timedelta(seconds=10), max_tool_result_bytes=1000), {})
    yield clients
    clients.close()


def _pids(record: Path) -> list[int]:
    return [line["pid"] for line in records(record) if line.get("event") == "call"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_stdio_server_is_one_process_per_tenant_reused_across_calls_and_capped_per_process(
    settings: Settings, tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    spec = _spec("rec", "recorder", record, NOTES_DIR=str(tmp_path))
    clients = McpClients(settings.replace(mcp_max_processes=1), {})
    first, second = uuid.uuid4(), uuid.uuid4()
    try:
        for tenant in (first, first, second):
            assert not clients.call_tool(tenant, spec, "write_note", {"path": "x", "text": "y"}, timeout=10).is_error
        one, again, other = _pids(record)
        assert one == again
        assert other != one
        # The cap is one process: the first tenant's stopped for the second's.
        wait_until(lambda: not _alive(one), timeout=10)
        assert not clients.call_tool(first, spec, "read_note", {"path": "x"}, timeout=10).is_error
        assert _pids(record)[-1] not in (one, other)
    finally:
        clients.close()
    wait_until(lambda: not any(_alive(pid) for pid in _pids(record)), timeout=10)


def test_a_server_that_crashes_mid_call_is_an_error_result_and_the_next_call_starts_it_again(
    clients: McpClients, tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    spec = _spec("crasher", "crasher", record)
    tenant = uuid.uuid4()
    crashed = clients.call_tool(tenant, spec, "crash", {}, timeout=10)
    assert crashed.is_error
    assert "crasher" in crashed.text
    assert clients.call_tool(tenant, spec, "ok", {}, timeout=10).text.startswith("ok from process")
    assert len(set(_pids(record))) == 2


def test_a_call_that_hangs_past_its_timeout_is_cancelled_with_the_protocols_notification(
    clients: McpClients, tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    spec = _spec("hanger", "hanger", record)
    tenant = uuid.uuid4()
    started = time.monotonic()
    hung = clients.call_tool(tenant, spec, "hang", {}, timeout=1)
    assert time.monotonic() - started < 8
    assert hung.is_error
    assert "did not answer within 1s" in hung.text
    [call] = [line for line in records(record) if line.get("event") == "call"]
    wait_until(lambda: any(line.get("event") == "cancelled" for line in records(record)), timeout=10)
    [cancelled] = [line for line in records(record) if line.get("event") == "cancelled"]
    assert cancelled["request_id"] == call["request_id"]
    assert not clients.call_tool(tenant, spec, "ok", {}, timeout=10).is_error


def test_garbage_on_stdout_is_dropped_and_the_calls_are_answered(clients: McpClients, tmp_path: Path) -> None:
    spec = _spec("garbage", "garbage", tmp_path / "calls.jsonl", GARBAGE_LINES="5")
    answer = clients.call_tool(uuid.uuid4(), spec, "echo", {"text": "still here"}, timeout=10)
    assert (answer.text, answer.is_error) == ("still here", False)


def test_a_flood_without_a_newline_ends_the_session_not_the_workers_memory_and_a_big_result_is_cut(
    clients: McpClients, tmp_path: Path
) -> None:
    spec = _spec("flood", "flood", tmp_path / "calls.jsonl")
    tenant = uuid.uuid4()
    flooded = clients.call_tool(tenant, spec, "flood", {}, timeout=20)
    assert flooded.is_error
    assert "over 1048576 bytes" in flooded.text
    big = clients.call_tool(tenant, spec, "big", {"size": 5000}, timeout=10)
    assert not big.is_error
    assert big.text.startswith("0123456789" * 100)
    assert "[result cut: it had 5000 bytes, over the limit of 1000 (HANGO_MAX_TOOL_RESULT_BYTES)]" in big.text


def test_sampling_elicitation_and_roots_asked_by_a_server_are_declined_with_the_protocols_error(
    clients: McpClients, tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    spec = _spec("asker", "asker", record, ASK_TIMEOUT="5")
    tenant = uuid.uuid4()
    # At the current protocol the server asks through an input-required result; declined, the call ends there.
    answer = clients.call_tool(tenant, spec, "ask", {}, timeout=20)
    assert answer.is_error
    assert "not supported" in answer.text
    assert [line["event"] for line in records(record) if line.get("event") != "call"] == ["asked"]
    # The server's error answer leaves the session as it was: the same process serves the next call.
    again = clients.call_tool(tenant, spec, "ask", {}, timeout=20)
    assert again.is_error
    assert len({line["pid"] for line in records(record)}) == 1


def test_a_server_that_never_answers_its_handshake_is_unavailable_within_the_mcp_timeout(
    settings: Settings, tmp_path: Path
) -> None:
    clients = McpClients(settings.replace(mcp_timeout=timedelta(seconds=1)), {})
    silent = ServerSpec("silent", "operator", True, command="sleep", args=("60",))
    started = time.monotonic()
    try:
        with pytest.raises(McpUnavailable, match="silent is unavailable: it did not start or answer within 1s"):
            clients.list_tools(uuid.uuid4(), silent)
        assert time.monotonic() - started < 8
    finally:
        clients.close()


def test_a_tenants_streamable_http_server_is_reused_carries_the_key_and_loopback_needs_the_setting(
    settings: Settings, tmp_path: Path
) -> None:
    record = tmp_path / "calls.jsonl"
    with http_server("recorder", {"RECORD_FILE": str(record), "NOTES_DIR": str(tmp_path)}) as url:
        tenant_server = ServerSpec("rec", "tenant", False, url=url, headers={"X-Token": "t0ken"})
        refused = McpClients(settings.replace(mcp_allow_private_urls=False), {})
        try:
            with pytest.raises(McpUnavailable, match="resolves to a private, loopback"):
                refused.list_tools(uuid.uuid4(), tenant_server)
        finally:
            refused.close()
        clients = McpClients(settings.replace(mcp_allow_private_urls=True), {})
        tenant = uuid.uuid4()
        try:
            key = str(uuid.uuid4())
            written = clients.call_tool(
                tenant,
                tenant_server,
                "write_note",
                {"path": "h.md", "text": "over http"},
                timeout=10,
                idempotency_key=key,
            )
            assert not written.is_error, written.text
            assert not clients.call_tool(tenant, tenant_server, "read_note", {"path": "h.md"}, timeout=10).is_error
        finally:
            clients.close()
    calls = [line for line in records(record) if line.get("event") == "call"]
    assert [call["meta"].get("io.hango/idempotency-key") for call in calls] == [key, None]
    assert len({call["pid"] for call in calls}) == 1
    assert (tmp_path / "h.md").read_text() == "over http"


def test_an_http_answer_over_the_message_cap_ends_the_call_with_an_error_not_the_workers_memory(
    settings: Settings, tmp_path: Path
) -> None:
    clients = McpClients(settings.replace(mcp_allow_private_urls=True, max_tool_result_bytes=1000), {})
    tenant = uuid.uuid4()
    try:
        with http_server("flood", {"RECORD_FILE": str(tmp_path / "calls.jsonl")}) as url:
            server = ServerSpec("flood", "tenant", False, url=url)
            small = clients.call_tool(tenant, server, "big", {"size": 2000}, timeout=10)
            assert not small.is_error
            assert "[result cut: it had 2000 bytes" in small.text
            flooded = clients.call_tool(tenant, server, "big", {"size": 3_000_000}, timeout=20)
            assert flooded.is_error
            assert "over 1048576 bytes" in flooded.text
    finally:
        clients.close()


# A worker's stand-in: it calls the fixture server's slow_poke, which sleeps in a thread, so the server is not done
# when its stdin closes; then it is killed with SIGKILL, which runs no clean-up.
HOLDER = """
import sys, uuid
from hango.kernel.config import Settings
from hango.mcp.client import McpClients
from hango.mcp.config import ServerSpec
from tests.support.mcp import python_env

env = {**python_env(), "RECORD_FILE": sys.argv[1], "NOTES_DIR": sys.argv[2]}
spec = ServerSpec("fixture", "operator", True, command=sys.executable, args=("-m", "tests.support.mcp_fixture_server"),
                  env=env)
McpClients(Settings(), {}).call_tool(uuid.uuid4(), spec, "slow_poke", {"name": "x", "text": "y", "seconds": 600},
                                     timeout=600)
"""


def test_a_stdio_server_dies_with_a_worker_killed_without_any_clean_up(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(record), str(tmp_path)], cwd=ROOT)
    try:
        wait_until(lambda: records(record), timeout=30)
        [server] = [line["pid"] for line in records(record)]
        assert _alive(server)
    finally:
        holder.kill()
        holder.wait(timeout=10)
    wait_until(lambda: not _alive(server), timeout=10)
