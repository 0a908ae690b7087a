"""What a reviewer reads of an MCP call outside the inbox: ``hango approvals show`` and ``list`` as real processes,
and :class:`hango.client.Client`, against a real API server and worker that wait on real MCP calls (the fixture
server as the operator's trusted ``notes`` and as a tenant's untrusted ``scribe``, see ``mcp_helpers``)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from hango.client import Client
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture
from tests.integration.hitl_helpers import suspended_run, write_memory
from tests.integration.mcp_helpers import HOSTILE_TITLE, McpStack, add_scribe, mcp_stack, waiting_call
from tests.support.processes import HANGO, settings_env

NOTES_POKE = {
    "server": "notes",
    "tool": "poke",
    "title": None,
    "description": "Write a note.",
    "annotations": {"readOnlyHint": False, "destructiveHint": True},
    "trusted": True,
}


@pytest.fixture(scope="module")
def stack(settings: Settings, db: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpStack]:
    with mcp_stack(settings, db, tmp_path_factory.mktemp("mcp-review")) as started:
        yield started


def hango(stack: McpStack, person: Person, *args: str) -> subprocess.CompletedProcess[str]:
    """``hango ARGS`` as ``person`` against the stack's API server."""
    env = {**settings_env(stack.settings), "HANGO_URL": stack.base, "HANGO_TOKEN": person.token}
    done = subprocess.run([*HANGO, *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_show_gives_a_trusted_servers_call_its_server_tool_description_annotations_and_digest(
    stack: McpStack, tenant: TenantFixture
) -> None:
    item = waiting_call(stack, tenant)
    shown = hango(stack, tenant.owner, "approvals", "show", item["id"]).stdout.splitlines()
    assert "mcp server:        notes (trusted)" in shown
    assert "mcp tool:          poke" in shown
    assert "description:       Write a note." in shown
    assert "annotations:       DESTRUCTIVE" in shown
    assert f"definition_sha256: {item['definition_sha256']}" in shown

    listed = hango(stack, tenant.owner, "approvals", "list").stdout.splitlines()
    [row] = [line for line in listed if line.startswith(item["id"])]
    assert "mcp__notes__poke DESTRUCTIVE" in row
    below = listed[listed.index(row) + 1]
    assert below.strip() == (
        f"notes (trusted): poke | annotations: DESTRUCTIVE | Write a note. | sha256:{item['definition_sha256'][:12]}"
    )


def test_show_marks_an_untrusted_servers_annotations_as_hints_and_prints_its_text_without_obeying_it(
    stack: McpStack, tenant: TenantFixture
) -> None:
    add_scribe(stack, tenant)
    item = waiting_call(stack, tenant, "scribe")
    done = hango(stack, tenant.owner, "approvals", "show", item["id"])
    shown = done.stdout.splitlines()
    assert "mcp server:        scribe (untrusted)" in shown
    assert f"mcp tool:          {HOSTILE_TITLE} (poke)" in shown
    assert "annotations:       DESTRUCTIVE (hints from an untrusted server)" in shown
    # The server's escape sequence is written out, never sent to the terminal as it came (click strips some escape
    # sequences when its output is not a terminal: the line below is what proves it).
    assert "\x1b" not in done.stdout
    assert """description:       Write a note. <img src=x onerror="document.title='pwned'">\\x1b[2J""" in shown

    as_json = hango(stack, tenant.owner, "approvals", "show", item["id"], "--json").stdout
    assert re.search(r'"description": "Write a note\. <img [^"]*\\"document.title=\'pwned\'\\">\\u001b\[2J"', as_json)


def test_the_client_reads_an_mcp_calls_server_and_digest_and_null_for_a_built_in_tool(
    stack: McpStack, tenant: TenantFixture
) -> None:
    item = waiting_call(stack, tenant)
    built_in = suspended_run(stack.client, tenant, [{"tool_calls": [write_memory()]}, {"text": "ok"}])
    with Client(stack.base, tenant.owner.token) as client:
        approval = client.get_approval(item["id"])
        assert approval["mcp"] == NOTES_POKE
        assert approval["definition_sha256"] == item["definition_sha256"]
        assert re.fullmatch("[0-9a-f]{64}", approval["definition_sha256"] or "")
        [queued] = [found for found in client.iter_approvals() if found["id"] == item["id"]]
        assert queued == approval
        [other] = client.list_run_approvals(built_in)["items"]
        assert (other["tool_name"], other["mcp"], other["definition_sha256"]) == ("write_file", None, None)
        requested = _first_requested(client.approval_events(), item["id"])
        assert requested["mcp"] == NOTES_POKE
        assert requested["definition_sha256"] == item["definition_sha256"]


def _first_requested(events: Iterator[Any], approval_id: str) -> dict[str, Any]:
    """The tenant stream's ``approval.requested`` item of an approval (the stream replays its retained log first)."""
    for event in events:
        if event["type"] == "approval.requested" and event["data"]["id"] == approval_id:
            found: dict[str, Any] = event["data"]
            return found
    raise AssertionError(f"no approval.requested for {approval_id}")
