"""MCP servers for tests: operator-config entries of the servers in tests/mcp_servers, and HTTP servers started and
stopped around a block.

An entry is what an operator writes under ``mcpServers`` in ``HANGO_MCP_CONFIG``; hango gives a stdio server only
the entry's ``env`` plus ``PATH``, ``HOME`` and ``LANG``, so an entry carries whatever else its server needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from tests.support.processes import ROOT, free_port, log_path, stop, wait_until

# Seconds a server gets to answer after its start, and to stop after SIGTERM before it is killed.
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


def python_env() -> dict[str, str]:
    """What a test server in Python needs beyond ``PATH``, ``HOME`` and ``LANG``: this checkout on its path.

    ``PYTHONPYCACHEPREFIX`` goes along when set (tests/run.sh sets it), so the servers' bytecode is kept out of
    the checkout like everything else the tests run.
    """
    env = {"PYTHONPATH": str(ROOT)}
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        env["PYTHONPYCACHEPREFIX"] = os.environ["PYTHONPYCACHEPREFIX"]
    return env


def module_args(module: str) -> list[str]:
    """The arguments that run ``tests.mcp_servers.<module>`` with this interpreter."""
    return ["-m", f"tests.mcp_servers.{module}"]


def stdio_entry(module: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The operator-config entry of a test server over stdio, e.g. ``stdio_entry("recorder", {"NOTES_DIR": ...})``.

    It works from any working directory and with nothing of the tests' environment: the interpreter by its full
    path, the checkout on ``PYTHONPATH`` and as ``cwd``.
    """
    return {
        "command": sys.executable,
        "args": module_args(module),
        "env": {**python_env(), **(env or {})},
        "cwd": str(ROOT),
    }


def parameters(entry: Mapping[str, Any]) -> StdioServerParameters:
    """An operator-config stdio entry as the SDK's client takes it (``mcp.Client(parameters(entry))``)."""
    return StdioServerParameters(
        command=entry["command"], args=list(entry.get("args", [])), env=dict(entry.get("env", {})), cwd=entry.get("cwd")
    )


@contextmanager
def http_server(module: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A test server over streamable HTTP for the block; yields its URL once it answers, and stops it after."""
    with http_process(module, env) as (url, _):
        yield url


@contextmanager
def http_process(module: str, env: Mapping[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """:func:`http_server`, yielding the server's process too (to kill it, say)."""
    port = free_port()
    command = [sys.executable, *module_args(module), "--http", str(port)]
    url = f"http://127.0.0.1:{port}/mcp"
    with serving(command, {**python_env(), **(env or {})}, url, f"{module}-{port}") as process:
        yield url, process


@contextmanager
def serving(
    command: Sequence[str], env: Mapping[str, str], url: str, log_name: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` (with the tests' environment and ``env``) until ``url`` answers; stop it after the block.

    The server runs in its own process group, so stopping it stops what it started too: SIGTERM first, SIGKILL
    when it is still there :data:`STOP_TIMEOUT` seconds later. Its output goes to the session's log folder.
    """
    log = log_path(f"mcp-{log_name}")
    with open(log, "wb") as output:
        process = subprocess.Popen(
            list(command), env={**os.environ, **env}, cwd=ROOT, stdout=output, stderr=output, start_new_session=True
        )
    try:
        wait_until(lambda: answers(url) or process.poll() is not None, timeout=START_TIMEOUT)
        if process.poll() is not None:
            raise AssertionError(f"{command[0]} exited with {process.returncode} at start; its log: {log}")
        yield process
    finally:
        stop(process, timeout=STOP_TIMEOUT)


def answers(url: str) -> bool:
    """Whether an HTTP server answers at ``url``: any HTTP status will do, a refused connection will not."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 (an http URL we built)
    try:
        with urllib.request.urlopen(request, timeout=2):  # noqa: S310 (a test server on the loopback)
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def records(path: Path) -> list[dict[str, Any]]:
    """The lines a test server appended to its ``RECORD_FILE``, parsed (none when it wrote nothing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]
