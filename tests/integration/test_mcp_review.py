"""An MCP call in the reviewers' inbox, in headless Chromium against a real ``hango api`` and a real worker that
wait on real MCP calls (the fixture server as the operator's trusted ``notes`` and as a tenant's untrusted
``scribe``, see ``mcp_helpers``): the card shows the server, the tool's title and description and its annotations,
a destructive tool plainly marked; an untrusted server's annotations are said to be hints and its text is shown as
text, never as markup; the approval's own page adds the definition's digest.

What a reviewer reads of such a call outside the inbox is checked against the same server and worker (one set of
processes for the module): ``hango approvals show`` and ``list`` as real processes, and :class:`hango.client.Client`.

``HANGO_INBOX_SCREENSHOTS=<folder>`` also saves the screenshots the docs show.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from hango.client import Client
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import LIVE, Person, TenantFixture, wait_for_state
from tests.integration.hitl_helpers import suspended_run, tool_results, write_memory
from tests.integration.mcp_helpers import (
    HOSTILE_DESCRIPTION,
    HOSTILE_TITLE,
    McpStack,
    add_scribe,
    mcp_stack,
    waiting_call,
)
from tests.integration.test_inbox_browser import shot, sign_in
from tests.support.processes import remote_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stack(settings: Settings, db: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpStack]:
    with mcp_stack(settings, db, tmp_path_factory.mktemp("inbox-mcp")) as started:
        yield started


def test_a_third_party_servers_write_is_decided_in_the_inbox_and_lands_on_disk(
    page: Page, stack: McpStack, tenant: TenantFixture
) -> None:
    path = str(stack.files / "from-inbox.md")
    item = waiting_call(stack, tenant, "fs", "write_file", {"path": path, "content": "decided in the inbox\n"})
    sign_in(page, stack.base, tenant.owner)
    card = page.get_by_role("article", name="mcp__fs__write_file")
    facts = card.locator("dl")
    expect(facts.locator('[data-field="mcp-server"]')).to_have_text("fs (trusted)")
    expect(facts.locator('[data-label="destructive"]')).to_have_class("label warning")
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_count(0, timeout=LIVE)
    assert wait_for_state(stack.client, tenant.owner, item["run_id"], {"succeeded", "failed"})["state"] == "succeeded"
    assert (stack.files / "from-inbox.md").read_text() == "decided in the inbox\n"


def test_a_card_shows_the_server_tool_and_annotations_marks_it_destructive_and_approving_runs_it(
    page: Page, stack: McpStack, tenant: TenantFixture
) -> None:
    item = waiting_call(stack, tenant)
    sign_in(page, stack.base, tenant.owner)
    card = page.get_by_role("article", name="mcp__notes__poke")
    facts = card.locator("dl")
    expect(facts.locator('[data-field="mcp-server"]')).to_have_text("notes (trusted)")
    expect(facts.locator('[data-field="mcp-tool"]')).to_have_text("poke")  # no title: its name
    expect(facts.locator('[data-field="mcp-description"]')).to_have_text("Write a note.")
    destructive = facts.locator('[data-label="destructive"]')
    expect(destructive).to_have_text("destructive")
    expect(destructive).to_have_class("label warning")
    # Only the annotations set to true are labels; a trusted server's are not called hints.
    expect(facts.locator(".label")).to_have_count(1)
    expect(facts.locator('[data-field="hints"]')).to_have_count(0)
    # The digest is for the approval's own page.
    expect(card.locator('[data-field="definition"]')).to_have_count(0)

    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_count(0, timeout=LIVE)
    run_id = item["run_id"]
    assert wait_for_state(stack.client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (stack.notes / "a.md").read_text() == "hello"
    assert [call["meta"]["io.hango/idempotency-key"] for call in stack.calls()] == [item["id"]]
    assert "wrote 5 characters" in tool_results(stack.client, tenant.owner, run_id)["w"]["content"]


def test_an_untrusted_servers_text_is_shown_as_text_its_annotations_as_hints_and_its_page_shows_the_digest(
    page: Page, stack: McpStack, tenant: TenantFixture
) -> None:
    add_scribe(stack, tenant)
    item = waiting_call(stack, tenant, "scribe")
    digest = item["definition_sha256"]
    sign_in(page, stack.base, tenant.owner, f"/inbox/approvals/{item['id']}")
    card = page.get_by_role("article", name="mcp__scribe__poke")
    facts = card.locator("dl")
    expect(facts.locator('[data-field="mcp-server"]')).to_have_text("scribe (untrusted)")
    expect(facts.locator('[data-field="mcp-title"]')).to_have_text(HOSTILE_TITLE)
    assert facts.locator('[data-field="mcp-description"]').text_content() == HOSTILE_DESCRIPTION
    # The server's markup stays text: no element of it is in the page.
    expect(card.locator("img")).to_have_count(0)
    expect(card.locator("b")).to_have_count(0)
    assert page.title() == "hango inbox"
    annotations = facts.locator('[data-field="mcp-annotations"]')
    expect(annotations.locator('[data-label="destructive"]')).to_have_class("label warning")
    expect(annotations.locator('[data-field="hints"]')).to_have_text("hints from an untrusted server")
    definition = card.locator('[data-field="definition"] code')
    expect(definition).to_have_text(f"sha256:{digest[:12]}…")
    expect(definition).to_have_attribute("title", digest)
    shot(page, "inbox-mcp-untrusted.png")


def test_each_annotation_set_to_true_is_a_label_and_only_destructive_is_a_warning(
    page: Page, stack: McpStack, tenant: TenantFixture
) -> None:
    # A trusted server's tool that says it is idempotent and open-world, not destructive, and never read-only.
    waiting_call(stack, tenant, "annotated", "hinted", {})
    sign_in(page, stack.base, tenant.owner)
    card = page.get_by_role("article", name="mcp__annotated__hinted")
    annotations = card.locator('[data-field="mcp-annotations"]')
    expect(annotations.locator(".label")).to_have_text(["idempotent", "open-world"])
    expect(annotations.locator(".warning")).to_have_count(0)
    expect(card.locator('[data-field="mcp-description"]')).to_have_text(
        "Do something harmless and repeatable, without saying it only reads."
    )


NOTES_POKE = {
    "server": "notes",
    "tool": "poke",
    "title": None,
    "description": "Write a note.",
    "annotations": {"readOnlyHint": False, "destructiveHint": True},
    "trusted": True,
}


def hango(stack: McpStack, person: Person, *args: str) -> subprocess.CompletedProcess[str]:
    """``hango ARGS`` as ``person`` against the stack's API server."""
    done = remote_cli(stack.settings, stack.base)(person, *args)
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
