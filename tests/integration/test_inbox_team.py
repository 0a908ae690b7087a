"""The inbox as a team of reviewers works in it (issue 25), in headless Chromium against a real ``hango api`` and a
real worker: a confirmation after each decision, the "Recently decided" list kept live, a decided approval shown as
decided with the diff its reviewer saw, the runs and their states, a quorum card that knows one's own vote, who is
signed in, where the token is kept, and a diff that reads like one.

``HANGO_INBOX_SCREENSHOTS=<folder>`` also saves the screenshots the docs show.
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from playwright.sync_api import Locator, Page, Route, expect

from tests.integration.conftest import LIVE, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, decide, pending, suspended_run, write_memory
from tests.integration.test_inbox_browser import MINUS, SCRIPT, diff_rows, shot, sign_in

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker_process")]
VOTED = "You have voted on this call: the other reviewers decide the rest."


@pytest.fixture(scope="module")
def server(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


def _card(page: Page, text: str) -> Locator:
    return page.get_by_role("article").filter(has_text=text)


def test_the_servers_address_leads_to_the_inbox(client: FlaskClient) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response.headers["Location"] == "/inbox"


def test_each_decision_is_confirmed_and_the_recently_decided_list_follows_the_tenant_live(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    admin = tenant.add("admin")
    earlier = suspended_run(client, tenant, SCRIPT)
    assert decide(client, tenant.owner, earlier, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    two = [{"tool_calls": [write_memory("one", call_id="a"), write_memory("two", call_id="b")]}, {"text": "Done."}]
    run_id = suspended_run(client, tenant, two)
    sign_in(page, server, tenant.owner)
    decided = page.get_by_role("table", name="Recently decided")
    # Decided before the page opened: read from GET /v1/approvals?state=decided.
    expect(decided.get_by_role("row").filter(has_text=earlier[:8])).to_contain_text(tenant.owner.email)

    _card(page, '"content": "one"').get_by_role("button", name="Approve").click()
    edited = _card(page, '"content": "two"')
    edited.get_by_role("button", name="Edit").click()
    edited.get_by_role("textbox", name="Arguments").fill(f'{{"file_path": "{MEMORY}", "content": "mine"}}')
    edited.get_by_role("button", name="Submit edit").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text("Approved — the run resumes")
    expect(status).to_contain_text("Edit sent — the run resumes with your arguments")
    expect(page.get_by_role("article")).to_have_count(0, timeout=LIVE)
    rows = decided.get_by_role("row").filter(has_text=run_id[:8])
    expect(rows).to_have_count(2, timeout=LIVE)
    expect(rows.filter(has_text="edit")).to_contain_text(tenant.owner.email)
    expect(rows.filter(has_text="approve")).to_contain_text("write_file")

    # Decided by someone else, elsewhere: the row arrives by the tenant stream, first in the list.
    other = suspended_run(client, tenant, SCRIPT)
    expect(_card(page, other)).to_be_visible(timeout=LIVE)
    reject = {"tool_call_id": "w", "decision": "reject", "message": "not now"}
    assert decide(client, admin, other, reject).status_code == 200
    newest = decided.locator("tbody tr").first
    expect(newest).to_contain_text(other[:8], timeout=LIVE)
    expect(newest).to_contain_text("reject")
    expect(newest).to_contain_text(admin.email)
    shot(page, "inbox-decided.png")

    rejected = suspended_run(client, tenant, SCRIPT)
    card = _card(page, rejected)
    card.get_by_role("button", name="Reject").click()
    card.get_by_role("textbox", name="Message").fill("no")
    card.get_by_role("button", name="Send").click()
    expect(status).to_contain_text("Rejected — the run resumes")
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_a_quorum_card_shows_ones_own_vote_and_offers_no_second(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    tenant.add("admin")
    rule = {"write_file": {"approvals_required": 2}}
    run_id = suspended_run(client, tenant, SCRIPT, interrupt_on=rule)
    sign_in(page, server, tenant.owner)
    card = _card(page, "write_file")
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_contain_text("Your vote is recorded — 1 of 2 approvals")
    expect(card.locator('[data-field="votes"]')).to_have_text("You approved — 1 of 2", timeout=LIVE)
    for name in ("Approve", "Reject"):
        button = card.get_by_role("button", name=name)
        expect(button).to_be_disabled()
        expect(button).to_have_accessible_description(
            "You have voted on this call: the other reviewers decide the rest."
        )
    shot(page, "inbox-quorum-voted.png")
    page.reload()  # the vote is read back from the approval, not remembered by the page
    expect(_card(page, "write_file").locator('[data-field="votes"]')).to_have_text("You approved — 1 of 2")
    expect(_card(page, "write_file").get_by_role("button", name="Approve")).to_be_disabled()
    assert [item["state"] for item in pending(client, tenant.owner, run_id)] == ["pending"]


def test_a_cards_buttons_wait_until_its_change_is_shown(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    held: list[Route] = []
    # The preview's answer is kept back until released.
    page.route("**/v1/approvals/*/preview", lambda route: held.append(route))
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    card = _card(page, "write_file")
    approve = card.get_by_role("button", name="Approve")
    expect(card.locator('[data-field="loading"]')).to_have_text("Loading the change…")
    expect(approve).to_be_disabled()
    expect(card.get_by_role("button", name="Reject")).to_be_disabled()
    assert held, "the card asked for its preview"
    for route in held:
        route.continue_()
    page.unroute("**/v1/approvals/*/preview")
    expect(card.get_by_role("heading", name="Change to /memories/AGENTS.md")).to_be_visible()
    expect(card.locator('[data-field="loading"]')).to_have_count(0)
    approve.click()
    expect(page.get_by_role("status")).to_contain_text("Approved — the run resumes")
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_a_decided_approval_shows_when_it_was_decided_and_the_diff_its_reviewer_saw(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, SCRIPT)
    put = client.put(
        f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": "kept\nold line"}, headers=tenant.owner.headers
    )
    assert put.status_code == 200, put.json
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    [item] = pending(client, tenant.owner, run_id)
    sign_in(page, server, tenant.owner, f"/inbox/approvals/{item['id']}")
    page.get_by_role("article").get_by_role("button", name="Approve").click()
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    page.reload()  # the file now holds what the call wrote
    card = page.get_by_role("article")
    expect(card).to_contain_text(f"Decided: approve by {tenant.owner.email}")
    facts = card.locator("dl dt")
    expect(facts.filter(has_text="Decided")).to_have_count(1)
    expect(facts.filter(has_text="Waiting")).to_have_count(0)
    expect(facts.filter(has_text="Expires")).to_have_count(0)
    expect(card).to_contain_text(f"Change to {MEMORY}, as it was when decided")
    expect(card.get_by_label("Diff")).to_be_visible()
    assert diff_rows(card.get_by_label("Diff"))[1:] == [
        ("del", MINUS, "kept"),
        ("del", MINUS, "old line"),
        ("note", "", "\\ No newline at end of file"),
        ("add", "+", "new line"),
        ("note", "", "\\ No newline at end of file"),
    ]
    shot(page, "inbox-decided-approval.png")


def test_the_runs_page_lists_runs_with_their_states_and_a_runs_page_shows_its_state_not_an_event(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sign_in(page, server, tenant.owner)
    banner = page.get_by_role("banner")
    expect(banner).to_contain_text(tenant.owner.email)
    expect(banner.get_by_label("Role")).to_have_text("owner")
    banner.get_by_role("link", name="Runs").click()
    expect(page).to_have_url(f"{server}/inbox/runs")
    row = page.get_by_role("table", name="Runs").get_by_role("row").filter(has_text=run_id)
    expect(row.locator('[data-field="state"]')).to_have_text("awaiting_approval")
    shot(page, "inbox-runs.png")
    row.get_by_role("link").click()
    expect(page).to_have_url(f"{server}/inbox/runs/{run_id}")
    state = page.locator('dd[data-field="state"]')
    expect(state).to_have_text("awaiting_approval")
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    expect(page.get_by_role("list", name="Events")).to_contain_text("run.finished", timeout=LIVE)
    expect(state).to_have_text("succeeded", timeout=LIVE)  # the run's state, not "finished"


def test_the_token_stays_with_the_tab_unless_remembered_and_signing_out_forgets_it(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    sent: list[tuple[str, str | None]] = []
    page.context.on("request", lambda request: sent.append((request.url, request.headers.get("authorization"))))
    sign_in(page, server, tenant.owner)
    tab = page.context.new_page()
    tab.goto(f"{server}/inbox/runs/{run_id}")
    expect(tab.get_by_role("textbox", name="Token")).to_be_visible()  # kept for the first tab only
    tab.close()

    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("textbox", name="Token").fill(tenant.owner.token)
    page.get_by_role("checkbox", name="Remember on this device").check()
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Signed in as")).to_be_visible()
    tab = page.context.new_page()
    tab.goto(f"{server}/inbox/runs/{run_id}")  # a link opened in a new tab
    expect(tab.get_by_role("list", name="Events")).to_contain_text("approval.requested")
    tab.close()

    page.get_by_role("button", name="Sign out").click()
    stored = page.evaluate("[sessionStorage.length, localStorage.length]")
    assert stored == [0, 0]
    tab = page.context.new_page()
    tab.goto(f"{server}/inbox")
    expect(tab.get_by_role("textbox", name="Token")).to_be_visible()
    # The token travelled in the Authorization header of this origin's API calls only, and never in an address.
    carried = [url for url, authorization in sent if authorization]
    assert carried
    assert all(url.startswith(f"{server}/v1/") for url in carried)
    assert all(authorization == f"Bearer {tenant.owner.token}" for _, authorization in sent if authorization)
    assert not [url for url, _ in sent if tenant.owner.token in url]


def test_a_diff_reads_like_a_unified_diff_and_multi_line_text_reads_as_text(
    page: Page, server: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    now = "# Tea\n- tea\n- milk\n"
    change = {"file_path": MEMORY, "content": "# Tea\n- green tea\n- milk\n"}
    same = {"file_path": MEMORY, "content": now}
    calls = [{"id": "c", "name": "write_file", "args": change}, {"id": "s", "name": "write_file", "args": same}]
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": calls}, {"text": "Done."}])
    put = client.put(f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": now}, headers=tenant.owner.headers)
    assert put.status_code == 200, put.json
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    sign_in(page, server, tenant.owner)
    # By the arguments: the run's last messages under each card name both calls.
    green = page.get_by_label("Arguments as JSON", exact=True).filter(has_text="green tea")
    changing = page.get_by_role("article").filter(has=green)
    diff = changing.get_by_label("Diff")
    expect(diff).to_be_visible()
    # Removed before added, each marker in its own column: the bullet's "-" is the line's text.
    assert diff_rows(diff) == [
        ("hunk", "", "@@ -1,3 +1,3 @@"),
        ("same", "", "# Tea"),
        ("del", MINUS, "- tea"),
        ("add", "+", "- green tea"),
        ("same", "", "- milk"),
    ]
    expect(changing.get_by_label("content as text")).to_have_text("# Tea\n- green tea\n- milk\n", use_inner_text=True)
    shot(page, "inbox-diff-markdown.png")
    unchanged = page.get_by_role("article").filter(has_not=green)
    expect(unchanged.get_by_label("Diff")).to_have_text("No change: the call leaves the file as it is.")
