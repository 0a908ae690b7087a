"""Real third-party MCP servers from the package registries, through the SDK's client: each lists its tools, and a
write tool and a read tool of each have their effect in the real world (a file on disk, a commit in a repository).

tests/support/mcp_third_party.py says which servers, at which versions; tests/run.sh installs them (the fixture
below too, when this file runs alone).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from hango.mcp.config import load_operator_servers
from tests.support.mcp import parameters
from tests.support.mcp_third_party import GIT_ENV, filesystem_entry, git_entry, git_http_server, install_missing


@pytest.fixture(scope="module", autouse=True)
def _installed() -> None:
    """The servers, installed when this file runs without tests/run.sh (a no-op otherwise)."""
    install_missing()


def in_session(target: Any, use: Callable[[Client], Awaitable[Any]]) -> Any:
    """Run ``use`` with a client connected to ``target`` (stdio parameters or a URL), returning what it returns."""

    async def session() -> Any:
        async with Client(target) as client:
            return await use(client)

    return anyio.run(session)


def text(result: CallToolResult) -> str:
    """The text of a result that is no error."""
    assert not result.is_error, result.content
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def git(repository: Path, *args: str) -> str:
    """``git ARGS`` in ``repository``, with the tests' identity and none of the machine's configuration."""
    done = subprocess.run(
        ["git", "-C", str(repository), *args], env=GIT_ENV | {"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """An empty git repository with one file not yet added."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "hello.txt").write_text("hello from the tests\n")
    return path


def test_the_filesystem_server_writes_and_reads_files_on_disk(tmp_path: Path) -> None:
    root = (tmp_path / "root").resolve()
    root.mkdir()
    (root / "given.txt").write_text("put there by the test")

    async def use(client: Client) -> dict[str, Any]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        written = await client.call_tool("write_file", {"path": str(root / "note.txt"), "content": "written by MCP"})
        read = await client.call_tool("read_text_file", {"path": str(root / "given.txt")})
        outside = await client.call_tool("write_file", {"path": str(tmp_path / "outside.txt"), "content": "no"})
        return {
            "version": client.session.protocol_version,
            "names": names,
            "written": text(written),
            "read": text(read),
            "outside": outside.is_error,
        }

    seen = in_session(parameters(filesystem_entry(root)), use)
    assert seen["version"] == "2025-11-25"  # the handshake era, by the TypeScript SDK
    assert {"write_file", "read_text_file"} <= seen["names"]
    assert (root / "note.txt").read_text() == "written by MCP"
    assert seen["read"] == "put there by the test"
    assert seen["outside"]
    assert not (tmp_path / "outside.txt").exists()


def test_mcp_server_git_commits_in_the_repository(repository: Path) -> None:
    where = {"repo_path": str(repository)}

    async def use(client: Client) -> dict[str, Any]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        text(await client.call_tool("git_add", {**where, "files": ["hello.txt"]}))
        text(await client.call_tool("git_commit", {**where, "message": "Add hello.txt through MCP"}))
        log = text(await client.call_tool("git_log", {**where, "max_count": 5}))
        return {"version": client.session.protocol_version, "names": names, "log": log}

    seen = in_session(parameters(git_entry(repository)), use)
    assert seen["version"] == "2026-07-28"  # the Python SDK 2.3, without a handshake
    assert {"git_add", "git_commit", "git_log"} <= seen["names"]
    assert git(repository, "log", "--format=%s|%an|%cn") == "Add hello.txt through MCP|hango tests|hango tests\n"
    assert git(repository, "ls-tree", "--name-only", "HEAD") == "hello.txt\n"
    assert git(repository, "rev-parse", "HEAD").strip() in seen["log"]


def test_the_git_server_over_streamable_http_commits_in_the_repository(repository: Path) -> None:
    where = {"path": str(repository)}

    async def use(client: Client) -> dict[str, Any]:
        names = {tool.name for tool in (await client.list_tools()).tools}
        text(await client.call_tool("git_add", {**where, "paths": ["hello.txt"]}))
        text(await client.call_tool("git_commit", {**where, "message": "Add hello.txt over HTTP"}))
        log = text(await client.call_tool("git_log", {**where, "maxCount": 5}))
        return {"version": client.session.protocol_version, "names": names, "log": log}

    with git_http_server(repository.parent) as url:
        seen = in_session(url, use)
    assert seen["version"] == "2025-11-25"
    assert {"git_add", "git_commit", "git_log"} <= seen["names"]
    assert git(repository, "log", "--format=%s|%an|%cn") == "Add hello.txt over HTTP|hango tests|hango tests\n"
    assert git(repository, "ls-tree", "--name-only", "HEAD") == "hello.txt\n"
    assert git(repository, "rev-parse", "HEAD").strip() in seen["log"]


def test_the_entries_are_operator_config_as_hango_reads_it(tmp_path: Path) -> None:
    servers = {"files": filesystem_entry(tmp_path), "git": git_entry(tmp_path), "git-http": {"url": "http://x/mcp"}}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    specs = load_operator_servers(str(config), {})
    assert {name: spec.transport for name, spec in specs.items()} == {
        "files": "stdio",
        "git": "stdio",
        "git-http": "streamable_http",
    }
    assert specs["git"].env["GIT_COMMITTER_NAME"] == "hango tests"
