"""Real MCP approvals for the reviewers' tests: a worker and an API server that know these MCP servers.

- ``notes``: the fixture server (tests/support/mcp_fixture_server.py) as the operator's, over stdio, so trusted;
  its ``poke`` says it is destructive and not read-only.
- ``annotated``: tests/mcp_servers/annotated.py as the operator's, whose tools carry every mix of annotations.
- ``fs``: the third-party ``@modelcontextprotocol/server-filesystem`` as the operator's, over stdio, on ``files``.
- ``scribe``: the fixture server again, over streamable HTTP on loopback, which a test adds to its tenant
  (untrusted) through the API; it lists ``poke`` with a title and a description full of HTML and a terminal
  escape, as a hostile server may.

A call to ``poke`` of any of them waits for a reviewer (the default rule: not a trusted read-only tool).
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import pending
from tests.support.mcp import python_env, serving, stdio_entry
from tests.support.mcp_third_party import filesystem_entry, install_missing
from tests.support.processes import ROOT, api_server, free_port, worker

HOSTILE_TITLE = "<b>Tidy</b> the notes"
# Markup that would load an image and run its handler if a view wrote it as HTML, and an escape sequence that would
# clear a terminal if the CLI printed it raw.
HOSTILE_DESCRIPTION = "Write a note. <img src=x onerror=\"document.title='pwned'\">\x1b[2J"
# The arguments of every ``poke`` call: the note a.md, saying hello.
POKE = {"name": "a.md", "text": "hello"}


@dataclass(frozen=True)
class McpStack:
    """The settings every process shares, the real API server's URL, an in-process client of the same API (to set
    tests up), the tenant server's URL, where ``notes`` writes and records its calls, and the folder ``fs`` serves."""

    settings: Settings
    base: str
    client: FlaskClient
    scribe_url: str
    notes: Path
    record: Path
    files: Path

    def calls(self) -> list[dict[str, Any]]:
        """Every ``tools/call`` the stdio server received, in order."""
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]


@contextmanager
def mcp_stack(settings: Settings, db: Database, folder: Path) -> Iterator[McpStack]:
    """A worker and an API server whose operator config names ``notes``, and the ``scribe`` server running."""
    notes, record = folder / "notes", folder / "calls.jsonl"
    notes.mkdir()
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_fixture_server"],
        "cwd": str(ROOT),
        "env": {**python_env(), "NOTES_DIR": str(notes), "RECORD_FILE": str(record)},
    }
    config = folder / "mcp.json"
    files = folder / "files"
    files.mkdir()
    install_missing()  # the third-party filesystem server (tests/run.sh installs it beforehand)
    servers = {"notes": entry, "annotated": stdio_entry("annotated"), "fs": filesystem_entry(files)}
    config.write_text(json.dumps({"mcpServers": servers}))
    # The tenant server listens on loopback: private addresses allowed, as an operator would for a test bed.
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", mcp_config=str(config), mcp_allow_private_urls=True
    )
    with (
        hostile_http_server(folder / "scribe") as scribe_url,
        worker(own, concurrency=1, beat=False, name="mcp-review"),
        api_server(own) as base,
    ):
        yield McpStack(own, base, create_app(own, db=db).test_client(), scribe_url, notes, record, files)


@contextmanager
def hostile_http_server(notes: Path) -> Iterator[str]:
    """The fixture server over streamable HTTP, listing ``poke`` with the hostile title and description."""
    notes.mkdir()
    port = free_port()
    env = {**python_env(), "NOTES_DIR": str(notes), "POKE_TITLE": HOSTILE_TITLE}
    env["POKE_DESCRIPTION"] = HOSTILE_DESCRIPTION
    command = [sys.executable, "-m", "tests.support.mcp_fixture_server", "--http", str(port)]
    url = f"http://127.0.0.1:{port}/mcp"
    with serving(command, env, url, f"scribe-{port}"):
        yield url


def add_scribe(stack: McpStack, tenant: TenantFixture) -> None:
    """Add the hostile server to the tenant as ``scribe``, untrusted, through ``POST /v1/mcp-servers``."""
    body = {"name": "scribe", "url": stack.scribe_url, "trusted": False}
    added = stack.client.post("/v1/mcp-servers", json=body, headers=tenant.owner.headers)
    assert added.status_code == 201, added.json


def waiting_call(
    stack: McpStack, tenant: TenantFixture, server: str = "notes", tool: str = "poke", args: Any = POKE
) -> dict[str, Any]:
    """Start a run whose model calls ``tool`` of ``server`` once, and return the approval it waits on."""
    call = {"id": "w", "name": f"mcp__{server}__{tool}", "args": args}
    script = [{"tool_calls": [call]}, {"text": "done"}]
    agent_id = create_agent(stack.client, tenant.owner, script, tools=[f"mcp__{server}__{tool}"])
    run_id = start_run(stack.client, tenant.owner, agent_id)
    state = wait_for_state(stack.client, tenant.owner, run_id, {"awaiting_approval", "failed"}, timeout=60)
    assert state["state"] == "awaiting_approval", state
    [item] = pending(stack.client, tenant.owner, run_id)
    return item
