"""Runs calling real third-party MCP servers through hango, as a user would set them up.

- ``@modelcontextprotocol/server-filesystem`` over stdio, an operator's server (trusted): ``write_file`` waits for a
  human (its annotations say it writes), ``read_text_file`` (read-only) runs at once; the file is on disk.
- ``@cyanheads/git-mcp-server`` over streamable HTTP, a tenant's server added through the API (untrusted): every
  call waits, read-only ones included; approved, the commit is in the repository and the log read back names it.
- ``mcp-server-git`` over stdio, an operator's server: an edit of the commit message is what gets committed.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, pending, tool_results
from tests.support.mcp_third_party import GIT_ENV, filesystem_entry, git_entry, git_http_server, install_missing
from tests.support.processes import worker

pytestmark = pytest.mark.slow


def git(repository: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repository), *args], env=GIT_ENV | {"PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def new_repository(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "hello.txt").write_text("hello from the tests\n")
    return path


@dataclass(frozen=True)
class World:
    client: FlaskClient
    root: Path
    repositories: Path
    http_url: str


@pytest.fixture(scope="module")
def world(settings: Settings, db: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    install_missing()
    base = tmp_path_factory.mktemp("third-party")
    root, repositories = base / "files", base / "repositories"
    root.mkdir()
    repositories.mkdir()
    stdio_repository = new_repository(repositories / "stdio")
    config = base / "mcp.json"
    servers = {"fs": filesystem_entry(root), "git": git_entry(stdio_repository)}
    config.write_text(json.dumps({"mcpServers": servers}))
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", mcp_config=str(config), mcp_allow_private_urls=True
    )
    with git_http_server(repositories) as url, worker(own, concurrency=1, beat=False, name="mcp-third-party"):
        yield World(create_app(own, db=db).test_client(), root, repositories, url)


def _settle(world: World, person: Person, run_id: str, decide_each: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decide every call the run waits for with ``decide_each(item)``, until it ends; its end and what waited."""
    waited: list[dict[str, Any]] = []
    while True:
        run = wait_for_state(world.client, person, run_id, {"awaiting_approval", "succeeded", "failed"}, timeout=60)
        if run["state"] != "awaiting_approval":
            return run, waited
        for item in pending(world.client, person, run_id):
            waited.append(item)
            response = decide(world.client, person, run_id, {"approval_id": item["id"], **decide_each(item)})
            assert response.status_code == 200, response.json


def test_the_filesystem_server_writes_a_file_once_a_human_approves_and_reads_it_at_once(
    world: World, tenant: TenantFixture
) -> None:
    path = str(world.root / "note.md")
    script = [
        {"tool_calls": [{"id": "w", "name": "mcp__fs__write_file", "args": {"path": path, "content": "# hi\n"}}]},
        {"tool_calls": [{"id": "r", "name": "mcp__fs__read_text_file", "args": {"path": path}}]},
        {"text": "done"},
    ]
    agent_id = create_agent(world.client, tenant.owner, script, tools=["mcp__fs__*"])
    run, waited = _settle(
        world, tenant.owner, start_run(world.client, tenant.owner, agent_id), lambda _: {"decision": "approve"}
    )
    assert run["state"] == "succeeded", run
    assert [item["tool_name"] for item in waited] == ["mcp__fs__write_file"]
    shown = waited[0]["mcp"]
    assert (shown["server"], shown["tool"], shown["trusted"]) == ("fs", "write_file", True)
    assert shown["annotations"]["destructiveHint"] is True
    assert (world.root / "note.md").read_text() == "# hi\n"
    assert "# hi" in tool_results(world.client, tenant.owner, run["id"])["r"]["content"]


def test_a_tenants_untrusted_git_server_over_http_commits_once_each_call_is_approved(
    world: World, tenant: TenantFixture
) -> None:
    repository = new_repository(world.repositories / f"http-{uuid.uuid4().hex[:6]}")
    added = world.client.post(
        "/v1/mcp-servers", json={"name": "githttp", "url": world.http_url}, headers=tenant.owner.headers
    )
    assert added.status_code == 201, added.json
    where = {"path": str(repository)}
    script = [
        {"tool_calls": [{"id": "a", "name": "mcp__githttp__git_add", "args": {**where, "paths": ["hello.txt"]}}]},
        {"tool_calls": [{"id": "c", "name": "mcp__githttp__git_commit", "args": {**where, "message": "Add hello"}}]},
        {"tool_calls": [{"id": "l", "name": "mcp__githttp__git_log", "args": {**where, "maxCount": 5}}]},
        {"text": "done"},
    ]
    tools = ["mcp__githttp__git_add", "mcp__githttp__git_commit", "mcp__githttp__git_log"]
    agent_id = create_agent(world.client, tenant.owner, script, tools=tools)
    run, waited = _settle(
        world, tenant.owner, start_run(world.client, tenant.owner, agent_id), lambda _: {"decision": "approve"}
    )
    assert run["state"] == "succeeded", run
    # Untrusted: its read-only git_log waits like the rest.
    assert [item["tool_name"] for item in waited] == tools
    assert all(item["mcp"]["trusted"] is False for item in waited)
    assert git(repository, "log", "--format=%s") == "Add hello\n"
    head = git(repository, "rev-parse", "HEAD").strip()
    assert head in tool_results(world.client, tenant.owner, run["id"])["l"]["content"]


def test_mcp_server_git_commits_the_message_a_reviewer_edited(world: World, tenant: TenantFixture) -> None:
    repository = world.repositories / "stdio"
    where = {"repo_path": str(repository)}
    script = [
        {"tool_calls": [{"id": "a", "name": "mcp__git__git_add", "args": {**where, "files": ["hello.txt"]}}]},
        {"tool_calls": [{"id": "c", "name": "mcp__git__git_commit", "args": {**where, "message": "wip"}}]},
        {"tool_calls": [{"id": "l", "name": "mcp__git__git_log", "args": {**where, "max_count": 5}}]},
        {"text": "done"},
    ]
    agent_id = create_agent(world.client, tenant.owner, script, tools=["mcp__git__*"])

    def edit_commits(item: dict[str, Any]) -> dict[str, Any]:
        if item["tool_name"] == "mcp__git__git_commit":
            return {"decision": "edit", "args": {**where, "message": "Add hello.txt, reviewed"}}
        return {"decision": "approve"}

    run, waited = _settle(world, tenant.owner, start_run(world.client, tenant.owner, agent_id), edit_commits)
    assert run["state"] == "succeeded", run
    assert [item["tool_name"] for item in waited] == ["mcp__git__git_add", "mcp__git__git_commit"]
    assert git(repository, "log", "--format=%s") == "Add hello.txt, reviewed\n"
    assert "Add hello.txt, reviewed" in tool_results(world.client, tenant.owner, run["id"])["l"]["content"]
