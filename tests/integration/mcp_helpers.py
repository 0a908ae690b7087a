"""Real MCP approvals for the reviewers' tests: a worker and an API server that know the fixture MCP server
(tests/support/mcp_fixture_server.py) twice over.

- ``notes``: the operator's, over stdio, so trusted; its ``poke`` says it is destructive and not read-only.
- ``scribe``: a tenant's, over streamable HTTP on loopback, untrusted; it lists ``poke`` with a title and a
  description full of HTML and a terminal escape, as a hostile server may.

A call to ``poke`` of either waits for a reviewer (the default rule: not a trusted read-only tool).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
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
from hango.kernel.models import McpServer
from hango.kernel.secret_box import SecretBox
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import pending
from tests.support.processes import ROOT, api_server, free_port, log_path, stop, wait_until, worker

HOSTILE_TITLE = "<b>Tidy</b> the notes"
# Markup that would load an image and run its handler if a view wrote it as HTML, and an escape sequence that would
# clear a terminal if the CLI printed it raw.
HOSTILE_DESCRIPTION = "Write a note. <img src=x onerror=\"document.title='pwned'\">\x1b[2J"


@dataclass(frozen=True)
class McpStack:
    """The settings every process shares, the real API server's URL, an in-process client of the same API (to set
    tests up), the tenant server's URL, and where ``notes`` writes and records its calls."""

    settings: Settings
    base: str
    client: FlaskClient
    scribe_url: str
    notes: Path
    record: Path

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
        "env": {"NOTES_DIR": str(notes), "RECORD_FILE": str(record), "PYTHONPATH": str(ROOT)},
    }
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    # The tenant server listens on loopback: private addresses allowed, as an operator would for a test bed.
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", mcp_config=str(config), mcp_allow_private_urls=True
    )
    with (
        hostile_http_server(folder / "scribe") as scribe_url,
        worker(own, concurrency=1, beat=False, name="mcp-review"),
        api_server(own) as base,
    ):
        yield McpStack(own, base, create_app(own, db=db).test_client(), scribe_url, notes, record)


@contextmanager
def hostile_http_server(notes: Path) -> Iterator[str]:
    """The fixture server over streamable HTTP, listing ``poke`` with the hostile title and description."""
    notes.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "NOTES_DIR": str(notes),
        "POKE_TITLE": HOSTILE_TITLE,
        "POKE_DESCRIPTION": HOSTILE_DESCRIPTION,
        "PYTHONPATH": str(ROOT),
    }
    args = [sys.executable, "-m", "tests.support.mcp_fixture_server", "--http", str(port)]
    with open(log_path(f"mcp-scribe-{port}"), "wb") as log:
        process = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True)
    try:
        wait_until(lambda: _listening(port) or process.poll() is not None)
        assert process.poll() is None, "the fixture MCP server stopped: see its log"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def add_tenant_server(db: Database, settings: Settings, tenant: TenantFixture, name: str, url: str) -> None:
    """Store a tenant's untrusted server as the MCP servers API does (its headers, none, sealed)."""
    sealed = SecretBox(settings.webhook_secret_keys).seal("{}")
    with db.transaction() as session:
        session.add(McpServer(tenant_id=tenant.id, name=name, url=url, headers=sealed, trusted=False))


def waiting_poke(stack: McpStack, tenant: TenantFixture, server: str = "notes") -> dict[str, Any]:
    """Start a run whose model calls ``poke`` of ``server`` once, and return the approval it waits on."""
    call = {"id": "w", "name": f"mcp__{server}__poke", "args": {"name": "a.md", "text": "hello"}}
    script = [{"tool_calls": [call]}, {"text": "done"}]
    agent_id = create_agent(stack.client, tenant.owner, script, tools=[f"mcp__{server}__poke"])
    run_id = start_run(stack.client, tenant.owner, agent_id)
    state = wait_for_state(stack.client, tenant.owner, run_id, {"awaiting_approval", "failed"}, timeout=60)
    assert state["state"] == "awaiting_approval", state
    [item] = pending(stack.client, tenant.owner, run_id)
    return item
