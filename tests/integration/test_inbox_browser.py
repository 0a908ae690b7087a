"""The reviewers' inbox in headless Chromium (Debian's, driven by Playwright), against a real ``hango api`` and a
real worker: sign-in, approvals appearing and disappearing live, each decision, a refused edit shown where it
belongs, a member's read-only view, the diff of a file write and a thread's conversation.

``HANGO_INBOX_SCREENSHOTS=<folder>`` also saves the screenshots the docs show.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from playwright.sync_api import Browser, Locator, Page, expect

from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_run
from tests.integration.conftest import LIVE, Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, decide, pending, suspended_run, tool_results, write_memory
from tests.integration.test_threads import new_thread, send

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker_process")]
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory("new line", call_id="w")]}, {"text": "Done."}]
MINUS = "\u2212"  # a removed line's marker, in its own column


@pytest.fixture(scope="module")
def server(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


def sign_in(page: Page, server: str, person: Person, path: str = "/inbox") -> None:
    page.goto(server + path)
    page.get_by_role("textbox", name="Token").fill(person.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as")).to_be_visible()


def diff_rows(diff: Locator) -> list[tuple[str, str, str]]:
    """A shown diff's rows: (kind, marker, text), the marker in its own column apart from the line's text."""
    rows: list[list[str]] = diff.locator(".line").evaluate_all(
        "rows => rows.map(row => [row.dataset.kind, row.querySelector('.mark').textContent,"
        " row.querySelector('.text').textContent])"
    )
    return [(kind, mark, text) for kind, mark, text in rows]


def _changed(diff: Locator) -> list[tuple[str, str, str]]:
    return [row for row in diff_rows(diff) if row[0] in ("del", "add")]


def _approval(page: Page, tool: str = "write_file") -> Locator:
    return page.get_by_role("article").filter(has_text=tool)


def shot(page: Page, name: str) -> None:
    folder = os.environ.get("HANGO_INBOX_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def test_a_refused_token_stays_signed_out(page: Page, server: str) -> None:
    page.goto(server + "/inbox")
    page.get_by_role("textbox", name="Token").fill("hango_not_a_token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("refused")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()


def test_an_approval_appears_live_and_approving_it_resumes_the_run(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    sign_in(page, server, tenant.owner)
    expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, SCRIPT))
    approval = _approval(page)
    expect(approval).to_be_visible(timeout=LIVE)  # arrived by the tenant stream: the page was not reloaded
    expect(approval).to_contain_text(run_id)
    expect(approval).to_contain_text(tenant.owner.email)
    expect(approval.get_by_label("Arguments as JSON")).to_contain_text('"content": "new line"')
    shot(page, "inbox-queue.png")
    [shown] = _pending(client, tenant.owner, run_id)
    with page.expect_request(lambda request: request.method == "POST") as sent:
        approval.get_by_role("button", name="Approve").click()
    # The decision is bound to the arguments the card showed.
    assert sent.value.post_data_json["decisions"][0]["arguments_sha256"] == shown["arguments_sha256"]
    expect(approval).to_have_count(0, timeout=LIVE)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_an_edit_refused_by_the_schema_shows_its_field_errors_and_a_valid_edit_goes_through(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    approval = _approval(page)
    approval.get_by_role("button", name="Edit").click()
    arguments = approval.get_by_role("textbox", name="Arguments")
    expect(arguments).to_be_focused()
    assert json.loads(arguments.input_value()) == {"file_path": MEMORY, "content": "new line"}
    arguments.fill('{"file_path": "/memories/AGENTS.md", "content": 7}')
    approval.get_by_role("button", name="Submit edit").click()
    alert = approval.get_by_role("alert")
    expect(alert.get_by_role("list", name="Field errors")).to_contain_text("content")
    shot(page, "inbox-edit-refused.png")
    assert [item["state"] for item in _pending(client, tenant.owner, run_id)] == ["pending"]
    arguments.fill('{"file_path": "/memories/AGENTS.md", "content": "edited by a human"}')
    approval.get_by_role("button", name="Submit edit").click()
    expect(approval).to_have_count(0, timeout=LIVE)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    agent_id = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["agent_id"]
    stored = client.get(f"/v1/agents/{agent_id}/files{MEMORY}", headers=tenant.owner.headers)
    assert stored.json["content"] == "edited by a human"


def test_rejecting_with_a_message_tells_the_model(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    approval = _approval(page)
    approval.get_by_role("button", name="Reject").click()
    approval.get_by_role("textbox", name="Message").fill("not in my memory, please")
    approval.get_by_role("button", name="Send").click()
    expect(approval).to_have_count(0, timeout=LIVE)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert "not in my memory, please" in tool_results(client, tenant.owner, run_id)["w"]["content"]


def test_a_member_sees_their_own_runs_approvals_read_only_and_why(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    member = tenant.add("member")
    suspended_run(client, tenant, SCRIPT, by=member)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    sign_in(page, server, member)
    expect(page.get_by_text(f"Signed in as {member.email} (member, read-only)")).to_be_visible()
    approval = _approval(page)
    expect(approval).to_be_visible()
    # The page asks who the token is (GET /v1/me) rather than guessing the role from a refused request.
    assert f"{server}/v1/me" in asked
    assert not [url for url in asked if "/v1/users" in url]
    for name in ("Approve", "Edit", "Reject", "Respond"):
        expect(approval.get_by_role("button", name=name)).to_be_disabled()
    expect(approval).to_contain_text("Members cannot decide approvals")
    expect(approval.get_by_role("button", name="Approve")).to_have_accessible_description(
        "Members cannot decide approvals: an owner or admin of the tenant decides them."
    )
    shot(page, "inbox-member.png")


def test_a_file_write_shows_the_diff_against_the_file_now(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, SCRIPT)
    written = client.put(
        f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": "kept\nold line"}, headers=tenant.owner.headers
    )
    assert written.status_code == 200, written.json
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    sign_in(page, server, tenant.owner)
    diff = _approval(page).get_by_label("Diff")
    expect(diff).to_be_visible()
    assert _changed(diff) == [("del", MINUS, "kept"), ("del", MINUS, "old line"), ("add", "+", "new line")]
    shot(page, "inbox-diff.png")


def test_an_approval_decided_elsewhere_disappears_live(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    approval = _approval(page)
    expect(approval).to_be_visible()
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    expect(approval).to_have_count(0, timeout=LIVE)


def test_a_reviewer_can_sign_in_and_approve_with_the_keyboard_alone(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    page.goto(server + "/inbox")
    page.keyboard.type(tenant.owner.token)  # the token field has the focus
    page.keyboard.press("Enter")
    approve = _approval(page).get_by_role("button", name="Approve")
    expect(approve).to_be_visible()
    for _ in range(40):
        if approve.evaluate("button => button === document.activeElement"):
            break
        page.keyboard.press("Tab")
    expect(approve).to_be_focused()
    page.keyboard.press("Enter")
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_a_runs_page_follows_its_events_live(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner, f"/inbox/runs/{run_id}")
    events = page.get_by_role("list", name="Events")
    expect(events).to_contain_text("approval.requested")
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    expect(events).to_contain_text("run.finished", timeout=LIVE)
    expect(page.get_by_role("region", name="Messages")).to_contain_text("Done.", timeout=LIVE)


def test_a_standing_approval_shows_in_its_panel_and_revoking_it_removes_it(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, [], name="gardener")
    body = {
        "agent_id": agent_id,
        "tool_name": "edit_file",
        "ttl": "2h",
        "when": {"file_path": {"prefix": "/memories/"}},
    }
    grant = client.post("/v1/grants", json=body, headers=tenant.owner.headers).json
    sign_in(page, server, tenant.owner)
    panel = page.get_by_role("table", name="Standing approvals")
    row = panel.get_by_role("row").filter(has_text="edit_file")
    expect(row).to_contain_text("gardener")
    expect(row).to_contain_text("/memories/")
    expect(row).to_contain_text(tenant.owner.email)
    shot(page, "inbox-grants.png")
    row.get_by_role("button", name="Revoke").click()
    expect(row).to_have_count(0)
    expect(page.get_by_text("No standing approvals.")).to_be_visible()
    shown = client.get(f"/v1/grants/{grant['id']}", headers=tenant.owner.headers).json
    assert shown["active"] is False
    assert shown["revoked_by"] == str(tenant.owner.user_id)


def test_approve_and_remember_creates_a_grant_of_that_call_shown_in_the_panel(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    expect(page.get_by_text("No standing approvals.")).to_be_visible()
    approval = _approval(page)
    approval.get_by_role("checkbox", name="Remember this approval").check()
    approval.get_by_role("combobox", name="for").select_option("8h")
    with page.expect_request(lambda request: request.method == "POST") as sent:
        approval.get_by_role("button", name="Approve", exact=True).click()
    assert sent.value.post_data_json["decisions"][0]["remember"] == {"ttl": "8h"}
    expect(approval).to_have_count(0, timeout=LIVE)
    row = page.get_by_role("table", name="Standing approvals").get_by_role("row").filter(has_text="write_file")
    expect(row).to_contain_text('"equals":"new line"')
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    [grant] = client.get("/v1/grants", headers=tenant.owner.headers).json["items"]
    assert grant["when"] == {"file_path": {"equals": MEMORY}, "content": {"equals": "new line"}}


def test_a_member_sees_no_standing_approvals_and_cannot_remember(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    member = tenant.add("member")
    suspended_run(client, tenant, SCRIPT, by=member)
    sign_in(page, server, member)
    expect(_approval(page)).to_be_visible()
    expect(page.get_by_role("checkbox", name="Remember this approval")).to_have_count(0)
    expect(page.get_by_text("Standing approvals")).to_have_count(0)


def test_the_page_may_not_be_framed_and_runs_no_inline_script(server: str) -> None:
    import urllib.request

    with urllib.request.urlopen(f"{server}/inbox") as response:  # noqa: S310 (loopback)
        headers: Any = response.headers
    assert headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]


def _pending(client: FlaskClient, person: Person, run_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/runs/{run_id}/approvals", headers=person.headers)
    items: list[dict[str, Any]] = response.json["items"]
    return items


def test_a_quorum_vote_keeps_the_card_with_its_tally_and_the_second_reviewer_decides(
    page: Page, server: str, browser: Browser, client: FlaskClient, tenant: TenantFixture
) -> None:
    admin = tenant.add("admin")
    rule = {"write_file": {"approvals_required": 2, "reviewers": {"roles": ["owner", "admin"]}}}
    run_id = suspended_run(client, tenant, SCRIPT, interrupt_on=rule)
    sign_in(page, server, tenant.owner)
    approval = _approval(page)
    expect(approval).to_contain_text("0 of 2")
    expect(approval).to_contain_text("owners, admins")
    approval.get_by_role("button", name="Approve").click()
    expect(approval).to_contain_text("1 of 2", timeout=LIVE)  # a vote: the call still waits, the card stays
    assert [a["state"] for a in _pending(client, tenant.owner, run_id)] == ["pending"]

    context = browser.new_context()
    other = context.new_page()
    sign_in(other, server, admin)
    second = _approval(other)
    expect(second).to_contain_text("1 of 2")
    second.get_by_role("button", name="Approve").click()
    expect(second).to_have_count(0, timeout=LIVE)
    context.close()
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    expect(approval).to_have_count(0, timeout=LIVE)  # the decision reached the first page by the stream


def test_a_reviewer_sends_the_calls_that_are_theirs_when_the_rest_belong_to_others(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    admin = tenant.add("admin")
    calls = [write_memory("a", call_id="mine"), {"id": "theirs", "name": "count", "args": {"key": "k"}}]
    rules = {"count": {"reviewers": {"users": [str(admin.user_id)]}}}
    run_id = suspended_run(client, tenant, [{"tool_calls": calls}, {"text": "ok"}], interrupt_on=rules)
    sign_in(page, server, tenant.owner)
    mine = page.get_by_role("article", name="write_file")
    mine.get_by_role("button", name="Approve").click()
    expect(mine).to_contain_text("waits on 1 more call(s): count")
    mine.get_by_role("button", name="Send my decisions now").click()
    expect(mine).to_have_count(0, timeout=LIVE)
    states = {a["tool_call_id"]: a["state"] for a in pending(client, tenant.owner, run_id, "all")}
    assert states == {"mine": "decided", "theirs": "pending"}
    expect(page.get_by_role("article", name="count")).to_contain_text(admin.email)


def test_a_card_says_what_its_deadline_does_and_is_redrawn_live_when_it_escalates(
    page: Page, server: str, settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture
) -> None:
    admin = tenant.add("admin")
    escalate = {"escalate": {"users": [str(admin.user_id)]}, "ttl": "1h"}
    rule = {"write_file": {"ttl": "10m", "on_expiry": escalate}}
    run_id = suspended_run(client, tenant, SCRIPT, interrupt_on=rule)
    sign_in(page, server, tenant.owner)
    card = _approval(page)
    expect(card).to_contain_text(f"escalated to {admin.email} for 1h")
    expect(card.locator('[data-field="expiry"]')).to_contain_text("in 10 min")

    [item] = pending(client, tenant.owner, run_id)
    later = datetime.fromisoformat(item["expires_at"]) + timedelta(seconds=1)
    runtime = Runtime.build(settings, db=db)
    assert expire_run(runtime, uuid.UUID(run_id), later - settings.approval_ttl, "0" * 32, now=later)
    expect(card).to_contain_text("its next deadline fails the run", timeout=LIVE)  # by the tenant stream
    expect(card).to_contain_text(admin.email)  # the new reviewer


# What the card shows is what will run (issue 22): exact numbers, and the file the tool will really write.

BIG = 9007199254740993  # 2**53 + 1: a double cannot hold it, so JSON.parse reads 9007199254740992


def test_a_big_integer_is_shown_edited_and_sent_exactly(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    call = {"id": "r", "name": "read_file", "args": {"file_path": "/notes.md", "offset": BIG}}
    script = [{"tool_calls": [call]}, {"text": "Done."}]
    run_id = suspended_run(client, tenant, script, interrupt_on={"read_file": True})
    sign_in(page, server, tenant.owner)
    card = _approval(page, "read_file")
    expect(card.get_by_label("Arguments as JSON")).to_contain_text(f'"offset": {BIG}')
    # A rule without a description: the card still says why the call waits.
    expect(card.locator('[data-field="description"]')).to_have_text(
        "Why it waits: Its rule gives no reason: every call the rule matches waits for a reviewer."
    )
    card.get_by_role("button", name="Edit").click()
    arguments = card.get_by_role("textbox", name="Arguments")
    assert json.loads(arguments.input_value()) == {"file_path": "/notes.md", "offset": BIG}
    with page.expect_request(lambda request: request.method == "POST") as sent:
        card.get_by_role("button", name="Submit edit").click()
    # Python's json keeps big integers: these are the digits the page sent.
    assert json.loads(sent.value.post_data or "")["decisions"][0]["args"]["offset"] == BIG
    expect(card).to_have_count(0, timeout=LIVE)
    [decided] = pending(client, tenant.owner, run_id, "all")
    assert (decided["decision"], decided["decision_args"]) == ("edit", {"file_path": "/notes.md", "offset": BIG})
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"

    page.goto(f"{server}/inbox/approvals/{decided['id'].upper()}")  # any spelling of the id
    expect(page.get_by_label("Arguments as edited")).to_contain_text(f'"offset": {BIG}')
    expect(page.locator('[data-field="description"]')).to_contain_text("Its rule gives no reason")
    page.goto(f"{server}/inbox/runs/{run_id}")
    messages = page.get_by_role("region", name="Messages")
    expect(messages).to_contain_text(f'"offset":{BIG}')
    expect(page.get_by_role("list", name="Events")).to_contain_text(f'"offset":{BIG}')


@pytest.mark.parametrize(
    ("written", "notice"),
    [
        ("/memories/notes.md#/../AGENTS.md", "the call wrote the path as /memories/notes.md#/../AGENTS.md"),
        ("//memories/AGENTS.md", "the call wrote the path as //memories/AGENTS.md"),
    ],
)
def test_a_card_previews_the_file_the_tool_will_write_however_the_path_is_spelled(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture, written: str, notice: str
) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": written, "content": "new line"}}
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [call]}, {"text": "Done."}])
    put = client.put(
        f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": "kept\nold line"}, headers=tenant.owner.headers
    )
    assert put.status_code == 200, put.json
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    sign_in(page, server, tenant.owner)
    card = _approval(page)
    expect(card.locator('[data-field="description"]')).to_have_text(
        "Why it waits: Writes to the agent's persistent memories and skills need a reviewer."
    )
    expect(card.locator('[data-field="path-differs"]')).to_have_text(f"Writes {MEMORY} — {notice}")
    expect(card).to_contain_text("belongs to the agent")
    diff = card.get_by_label("Diff")
    expect(diff).to_be_visible()
    assert _changed(diff) == [("del", MINUS, "kept"), ("del", MINUS, "old line"), ("add", "+", "new line")]
    # The page never builds a file URL from what the model wrote: the server resolved the path.
    assert not [url for url in asked if "/files" in url]
    if "#" in written:
        shot(page, "inbox-path-notice.png")


def test_an_edit_card_shows_the_servers_diff_or_the_error_the_tool_would_answer(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    edits = {
        "applies": {"file_path": MEMORY, "old_string": "old line", "new_string": "new line"},
        "absent": {"file_path": MEMORY, "old_string": "absent text", "new_string": "x"},
    }
    for args in edits.values():
        agent_id = create_agent(client, tenant.owner, [{"tool_calls": [{"name": "edit_file", "args": args}]}])
        put = client.put(
            f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": "kept\nold line\n"}, headers=tenant.owner.headers
        )
        assert put.status_code == 200, put.json
        run_id = start_run(client, tenant.owner, agent_id)
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    sign_in(page, server, tenant.owner)
    applies = page.get_by_role("article").filter(has_text='"old_string": "old line"')
    expect(applies.get_by_label("Diff")).to_be_visible()
    assert _changed(applies.get_by_label("Diff")) == [("del", MINUS, "old line"), ("add", "+", "new line")]
    expect(applies).to_contain_text("This file belongs to the agent")
    expect(applies.locator('[data-field="path-differs"]')).to_have_count(0)
    refused = page.get_by_role("article").filter(has_text='"old_string": "absent text"')
    expect(refused).to_contain_text(
        f"The tool would refuse this call: old_string not found in {MEMORY}; read the file and copy the text exactly"
    )
    expect(refused.get_by_label("Diff")).to_have_count(0)


def test_an_approvals_own_page_shows_it_whatever_its_state_and_nothing_of_another_tenant(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    [item] = pending(client, tenant.owner, run_id)
    sign_in(page, server, tenant.owner, f"/inbox/approvals/{item['id']}")  # the address a webhook links to
    card = page.get_by_role("article")
    expect(card.get_by_label("Diff")).to_be_visible()
    assert ("add", "+", "new line") in diff_rows(card.get_by_label("Diff"))
    card.get_by_role("button", name="Approve").click()
    expect(card).to_contain_text(f"Decided: approve by {tenant.owner.email}", timeout=LIVE)
    stranger = make_tenant("elsewhere").owner
    page.evaluate("sessionStorage.clear()")
    sign_in(page, server, stranger, f"/inbox/approvals/{item['id']}")
    expect(page.get_by_text("No such approval is visible to you.")).to_be_visible()
    expect(page.get_by_role("article")).to_have_count(0)


def test_a_card_of_a_threads_run_links_to_the_conversation_which_follows_the_thread_live(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    owner = tenant.owner
    agent_id = create_agent(client, owner, [{"text": "Standup is at 09:00."}, *SCRIPT])
    thread = new_thread(client, owner, agent_id)
    wait_for_state(client, owner, send(client, owner, thread["id"], "When is standup?")["id"], {"succeeded"})
    run = send(client, owner, thread["id"], "Note that it moves to 09:30.")
    assert wait_for_state(client, owner, run["id"], {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    alone = suspended_run(client, tenant, SCRIPT)  # a run without a thread: no conversation to link to

    sign_in(page, server, owner)
    expect(page.get_by_role("article").filter(has_text=alone).get_by_role("link", name="Conversation")).to_have_count(0)
    page.get_by_role("article").filter(has_text=run["id"]).get_by_role("link", name="Conversation").click()
    expect(page).to_have_url(f"{server}/inbox/threads/{thread['id']}")
    messages = page.get_by_role("list", name="Messages").get_by_role("listitem")
    # The thread's whole conversation, both runs', readable: who said what, and the waiting call by its tool's name.
    expect(messages).to_have_text(
        [
            "user: When is standup?",
            "assistant: Standup is at 09:00.",
            "user: Note that it moves to 09:30.",
            re.compile(r'^assistant: Saving\.\n→ write_file\(\{.*"content":"new line".*\}\)$'),
        ]
    )
    expect(page.locator('[data-field="status"]')).to_have_text("interrupted")
    shot(page, "inbox-conversation.png")

    assert decide(client, owner, run["id"], {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    expect(messages.last).to_have_text("assistant: Done.", timeout=LIVE)  # the thread's stream said it grew
    expect(page.locator('[data-field="status"]')).to_have_text("idle")
