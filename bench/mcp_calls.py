"""What one MCP tool call costs hango, beside its floors, in one process.

Figures, each the median (and p90) of ``--rounds`` calls:

- **built-in tool call**: a tool of hango's own run by :func:`hango.agent.tools.base.execute` (schema check,
  handler, result), no I/O: the machinery every call pays.
- **MCP call, reused stdio session**: :meth:`hango.mcp.client.McpClients.call_tool` of ``echo`` on a server process
  already running; its floor is the same call through the SDK's own ``mcp.Client`` on a session already open, in an
  asyncio loop of the benchmark's (no thread hop, no hango).
- **MCP call as a run sends it**: the listing that checks the pinned definition (``tools/list``), then the call,
  as :class:`hango.run.mcp_tools.McpCalls` does; same floor.
- **first call of a session**: a new server process, the handshake and the call; its floors are the SDK's own
  client doing the same, starting the interpreter alone (``python -c pass``), and the interpreter importing the
  server's module (the SDK's server side included), which is most of a Python server's start.

Run: ``.venv/bin/python -m bench.mcp_calls [--rounds 200]``. Needs nothing else running.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from bench.common import percentile, summary, timed
from hango.agent.messages import ToolCall
from hango.agent.tools.base import Tool, ToolContext, execute
from hango.kernel.config import Settings
from hango.mcp.client import McpClients
from hango.mcp.config import ServerSpec
from hango.mcp.transports import stdio_environment

ROOT = Path(__file__).resolve().parents[1]
ARGS = ("-m", "bench.mcp_echo_server")
ENV = {"PYTHONPATH": str(ROOT)}


def builtin_call() -> Callable[[], Any]:
    """One call of an in-process tool through hango's tool machinery."""
    tool = Tool(
        "echo",
        "Answer the text.",
        {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        lambda context, args: args["text"],
    )
    context = ToolContext(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "c", files=None)  # type: ignore[arg-type]
    call = ToolCall("c", "echo", {"text": "hi"})
    return lambda: execute(tool, context, call)


def sdk_calls(rounds: int) -> tuple[list[float], list[float]]:
    """The SDK's own client on an open session, and the first call of new sessions; seconds each."""

    async def measure() -> tuple[list[float], list[float]]:
        parameters = StdioServerParameters(command=sys.executable, args=list(ARGS), env=ENV, cwd=str(ROOT))
        reused: list[float] = []
        async with Client(parameters, cache=None) as client:
            await client.call_tool("echo", {"text": "warm"})
            for _ in range(rounds):
                started = time.perf_counter()
                await client.call_tool("echo", {"text": "hi"})
                reused.append(time.perf_counter() - started)
        first: list[float] = []
        for _ in range(max(5, rounds // 20)):
            started = time.perf_counter()
            async with Client(parameters, cache=None) as client:
                await client.call_tool("echo", {"text": "hi"})
                first.append(time.perf_counter() - started)
        return reused, first

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    settings = Settings()
    spec = ServerSpec("echo", "operator", True, command=sys.executable, args=ARGS, env=ENV, cwd=str(ROOT))
    tenant = uuid.uuid4()
    clients = McpClients(settings, {})
    try:
        call = builtin_call()
        timed(50, call)
        builtin = timed(rounds * 10, call)

        clients.call_tool(tenant, spec, "echo", {"text": "warm"}, timeout=30)
        reused = timed(rounds, lambda: clients.call_tool(tenant, spec, "echo", {"text": "hi"}, timeout=30))

        def as_a_run_sends_it() -> None:
            clients.list_tools(tenant, spec)
            clients.call_tool(tenant, spec, "echo", {"text": "hi"}, timeout=30)

        checked = timed(rounds, as_a_run_sends_it)
        first = []
        for _ in range(max(5, rounds // 20)):
            fresh = McpClients(settings, {})
            started = time.perf_counter()
            fresh.call_tool(tenant, spec, "echo", {"text": "hi"}, timeout=30)
            first.append(time.perf_counter() - started)
            fresh.close()
    finally:
        clients.close()
    sdk_reused, sdk_first = sdk_calls(rounds)
    # As hango starts a stdio server: only PATH, HOME and LANG of this environment, and the server's own.
    env = stdio_environment(ENV, os.environ)
    interpreter = timed(10, lambda: subprocess.run([sys.executable, "-c", "pass"], check=True, env=env))
    imports = timed(
        10, lambda: subprocess.run([sys.executable, "-c", "import bench.mcp_echo_server"], check=True, env=env)
    )

    print(f"machine: {platform.machine()}, Python {platform.python_version()}, mcp {version('mcp')}")
    print(f"{'built-in tool call (hango execute)':44} {summary(builtin)}")
    print(f"{'MCP call, reused stdio session (hango)':44} {summary(reused)}")
    print(f"{'  floor: the SDK client, same session kind':44} {summary(sdk_reused)}")
    print(f"{'MCP call as a run sends it (list + call)':44} {summary(checked)}")
    print(f"{'first call of a session (hango)':44} {summary(first)}")
    print(f"{'  floor: the SDK client, new process':44} {summary(sdk_first)}")
    print(f"{'  floor: python -c pass':44} {summary(interpreter)}")
    print(f"{'  floor: python importing the server module':44} {summary(imports)}")
    median = lambda samples: percentile(samples, 0.5)  # noqa: E731
    print("ratios (medians):")
    print(f"  reused MCP call / SDK floor          {median(reused) / median(sdk_reused):6.2f}x")
    print(f"  reused MCP call / built-in call      {median(reused) / median(builtin):6.1f}x")
    print(f"  as a run sends it / SDK floor        {median(checked) / median(sdk_reused):6.2f}x")
    print(f"  first call / SDK first call          {median(first) / median(sdk_first):6.2f}x")
    print(f"  first call / server module import    {median(first) / median(imports):6.2f}x")


if __name__ == "__main__":
    main()
