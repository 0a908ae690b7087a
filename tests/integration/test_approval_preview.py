"""``GET /v1/approvals/{id}/preview``: what a call would make of its file, worked out by the server with the tool's
own code, for the file the tool will really write; and who may see it.

The pure diff and the planning on an in-memory filesystem are in tests/unit/test_previews.py; these tests go
through the API, a real worker and PostgreSQL: the files the preview reads are the agent's and the run's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, decide, pending, suspended_run, tool_results

pytestmark = pytest.mark.usefixtures("worker_process")
EVERY_FILE_CALL = {"write_file": True, "edit_file": True}


def _preview(client: FlaskClient, person: Person, approval_id: str, status: int = 200) -> dict[str, Any]:
    response = client.get(f"/v1/approvals/{approval_id}/preview", headers=person.headers)
    assert response.status_code == status, response.json
    body: dict[str, Any] = response.json
    return body


def _suspended_with_memory(
    client: FlaskClient, tenant: TenantFixture, calls: list[dict[str, Any]], content: str, **config: Any
) -> str:
    """A run of a new agent whose /memories/AGENTS.md holds ``content``, suspended on ``calls``."""
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": calls}, {"text": "Done."}], **config)
    put = client.put(f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": content}, headers=tenant.owner.headers)
    assert put.status_code == 200, put.json
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    return run_id


@pytest.mark.parametrize(
    "written", ["/memories/notes.md#/../AGENTS.md", "//memories/AGENTS.md", "/memories/./AGENTS.md"]
)
def test_a_write_is_previewed_for_the_normalised_path_the_tool_writes(
    client: FlaskClient, tenant: TenantFixture, written: str
) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": written, "content": "kept\nnew line\n"}}
    run_id = _suspended_with_memory(client, tenant, [call], "kept\nold line\n")
    [approval] = pending(client, tenant.owner, run_id)
    preview = _preview(client, tenant.owner, approval["id"])
    assert preview == {
        "approval_id": approval["id"],
        "tool_name": "write_file",
        "kind": "file",
        "file_path": written,
        "path": MEMORY,
        "path_differs": True,
        "storage": "agent",
        "exists": True,
        "error": None,
        "diff": "--- a/memories/AGENTS.md\n+++ b/memories/AGENTS.md\n@@ -1,2 +1,2 @@\n kept\n-old line\n+new line\n",
        "too_large": False,
        "note": None,
        "as_of": "now",
    }
    # And the tool did write that file.
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    agent_id = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["agent_id"]
    stored = client.get(f"/v1/agents/{agent_id}/files{MEMORY}", headers=tenant.owner.headers).json
    assert stored["content"] == "kept\nnew line\n"


def test_a_path_written_as_the_tool_writes_it_does_not_differ_and_a_new_file_diffs_from_nothing(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/new.md", "content": "one"}}
    run_id = suspended_run(client, tenant, [{"tool_calls": [call]}])
    [approval] = pending(client, tenant.owner, run_id)
    preview = _preview(client, tenant.owner, approval["id"])
    assert (preview["path"], preview["path_differs"], preview["exists"]) == ("/memories/new.md", False, False)
    assert (
        preview["diff"] == "--- /dev/null\n+++ b/memories/new.md\n@@ -0,0 +1 @@\n+one\n\\ No newline at end of file\n"
    )


def test_an_edit_of_the_runs_scratch_file_is_previewed_against_that_file(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    scratch = {"id": "s", "name": "write_file", "args": {"file_path": "/work/plan.md", "content": "a\nb\nc\n"}}
    edit = {
        "id": "e",
        "name": "edit_file",
        "args": {"file_path": "/work/drafts/../plan.md", "old_string": "b", "new_string": "B"},
    }
    # The scratch write runs unasked (its path is the run's); the edit waits for a reviewer.
    rules = {"edit_file": True}
    run_id = suspended_run(client, tenant, [{"tool_calls": [scratch]}, {"tool_calls": [edit]}], interrupt_on=rules)
    [approval] = pending(client, tenant.owner, run_id)
    preview = _preview(client, tenant.owner, approval["id"])
    assert (preview["path"], preview["path_differs"], preview["storage"]) == ("/work/plan.md", True, "run")
    assert preview["exists"] is True
    assert preview["diff"] == "--- a/work/plan.md\n+++ b/work/plan.md\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


# Each call the tool refuses, and what the preview must say: the tool's own answer when it runs.
REFUSED = [
    {"id": "missing", "name": "edit_file", "args": {"file_path": MEMORY, "old_string": "absent", "new_string": "x"}},
    {"id": "twice", "name": "edit_file", "args": {"file_path": MEMORY, "old_string": "same", "new_string": "x"}},
    {"id": "same", "name": "edit_file", "args": {"file_path": MEMORY, "old_string": "same", "new_string": "same"}},
    {
        "id": "nofile",
        "name": "edit_file",
        "args": {"file_path": "/memories/none.md", "old_string": "a", "new_string": "b"},
    },
    {"id": "escape", "name": "write_file", "args": {"file_path": "/memories/../../etc/passwd", "content": "x"}},
    {"id": "folder", "name": "write_file", "args": {"file_path": "/memories/", "content": "x"}},
]


def test_a_refused_call_previews_the_error_the_tool_answers_when_it_runs(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = _suspended_with_memory(client, tenant, REFUSED, "same and same\n", interrupt_on=EVERY_FILE_CALL)
    approvals = pending(client, tenant.owner, run_id)
    previews = {item["tool_call_id"]: _preview(client, tenant.owner, item["id"]) for item in approvals}
    assert set(previews) == {call["id"] for call in REFUSED}
    assert all(preview["diff"] is None and preview["error"] for preview in previews.values())
    assert previews["escape"]["path"] is None
    assert previews["escape"]["storage"] is None
    assert "escapes /" in previews["escape"]["error"]
    assert previews["twice"]["error"].startswith("old_string occurs 2 times in /memories/AGENTS.md")

    approve = [{"tool_call_id": call["id"], "decision": "approve"} for call in REFUSED]
    assert decide(client, tenant.owner, run_id, *approve).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert {call_id: (result["content"], result["is_error"]) for call_id, result in results.items()} == {
        call_id: (preview["error"], True) for call_id, preview in previews.items()
    }


def test_an_edit_that_applies_previews_what_the_tool_then_writes(client: FlaskClient, tenant: TenantFixture) -> None:
    edit = {
        "id": "e",
        "name": "edit_file",
        "args": {"file_path": "/memories//AGENTS.md", "old_string": "tea", "new_string": "coffee", "replace_all": True},
    }
    run_id = _suspended_with_memory(client, tenant, [edit], "tea\nmore tea\nno\n")
    [approval] = pending(client, tenant.owner, run_id)
    preview = _preview(client, tenant.owner, approval["id"])
    assert preview["diff"].splitlines()[2:] == [
        "@@ -1,3 +1,3 @@",
        "-tea",
        "-more tea",
        "+coffee",
        "+more coffee",
        " no",
    ]
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "e", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert tool_results(client, tenant.owner, run_id)["e"]["content"] == "made 2 replacements in /memories/AGENTS.md"


def test_a_change_over_the_preview_limits_is_too_large_to_preview_and_a_small_edit_of_a_big_file_is_not(
    settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture
) -> None:
    big = "".join(f"line {n}\n" for n in range(200))
    rewrite = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": big.upper()}}
    edit = {"id": "e", "name": "edit_file", "args": {"file_path": MEMORY, "old_string": "line 100\n", "new_string": ""}}
    run_id = _suspended_with_memory(client, tenant, [rewrite, edit], big, interrupt_on=EVERY_FILE_CALL)
    ids = {item["tool_call_id"]: item["id"] for item in pending(client, tenant.owner, run_id)}
    small = create_app(settings.replace(preview_max_lines=50, preview_max_bytes=4096), db=db).test_client()

    preview = _preview(small, tenant.owner, ids["w"])
    assert (preview["too_large"], preview["diff"], preview["error"]) == (True, None, None)
    assert "400 lines" in preview["note"]
    assert "HANGO_PREVIEW_MAX_LINES" in preview["note"]
    # Only the part that changes counts: one line out of two hundred.
    edited = _preview(small, tenant.owner, ids["e"])
    assert edited["too_large"] is False
    assert edited["diff"].splitlines()[2:] == [
        "@@ -98,7 +98,6 @@",
        " line 97",
        " line 98",
        " line 99",
        "-line 100",
        " line 101",
        " line 102",
        " line 103",
    ]
    few_bytes = create_app(settings.replace(preview_max_bytes=1000), db=db).test_client()
    assert "HANGO_PREVIEW_MAX_BYTES" in _preview(few_bytes, tenant.owner, ids["w"])["note"]


@pytest.mark.parametrize(
    ("tool", "args"), [("read_file", {"file_path": MEMORY}), ("count", {"key": "k"})], ids=["read_file", "plugin"]
)
def test_a_tool_that_changes_no_file_has_no_preview(
    client: FlaskClient, tenant: TenantFixture, tool: str, args: dict[str, Any]
) -> None:
    call = {"id": "c", "name": tool, "args": args}
    run_id = suspended_run(client, tenant, [{"tool_calls": [call]}], interrupt_on={tool: True})
    [approval] = pending(client, tenant.owner, run_id)
    preview = _preview(client, tenant.owner, approval["id"])
    assert preview == {
        "approval_id": approval["id"],
        "tool_name": tool,
        "kind": "none",
        "file_path": None,
        "path": None,
        "path_differs": False,
        "storage": None,
        "exists": None,
        "error": None,
        "diff": None,
        "too_large": False,
        "note": f"{tool} calls change no file hango can show: read the arguments",
        "as_of": "now",
    }


def test_the_preview_is_shown_to_whoever_sees_the_approval_and_is_a_404_to_anyone_else(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    creator, other_member, admin = tenant.add("member"), tenant.add("member"), tenant.add("admin")
    call = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "secret plans"}}
    run_id = suspended_run(client, tenant, [{"tool_calls": [call]}], by=creator)
    [approval] = pending(client, creator, run_id)
    for person in (creator, admin, tenant.owner):
        assert _preview(client, person, approval["id"])["path"] == MEMORY
    stranger = make_tenant("elsewhere").owner
    for person in (other_member, stranger):
        refused = client.get(f"/v1/approvals/{approval['id']}/preview", headers=person.headers)
        assert refused.status_code == 404
        assert refused.content_type == "application/problem+json"
        assert "secret" not in refused.get_data(as_text=True)
    assert client.get(f"/v1/approvals/{approval['id']}/preview").status_code == 401


def test_the_preview_is_documented_in_the_openapi_document(client: FlaskClient) -> None:
    document = client.get("/openapi.json").json
    operation = document["paths"]["/v1/approvals/{approval_id}/preview"]["get"]
    assert {"200", "401", "404"} <= set(operation["responses"])
    schema = document["components"]["schemas"]["ApprovalPreview"]
    assert set(schema["properties"]) == {
        "approval_id",
        "tool_name",
        "kind",
        "file_path",
        "path",
        "path_differs",
        "storage",
        "exists",
        "error",
        "diff",
        "too_large",
        "note",
        "as_of",
    }
    assert schema["properties"]["as_of"]["enum"] == ["now", "decision"]
    assert all(
        prop.get("description")
        for name, prop in schema["properties"].items()
        if name not in {"approval_id", "tool_name"}
    )
    assert "decision" in schema["properties"]["as_of"]["description"]


# A decided call has written its file: its preview is the one kept when the reviewer decided (issue 25).

KEPT_DIFF = "--- a/memories/AGENTS.md\n+++ b/memories/AGENTS.md\n@@ -1,2 +1,2 @@\n kept\n-old line\n+{}\n"


def test_an_approved_write_keeps_the_diff_the_reviewer_saw_after_the_call_wrote_the_file(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "kept\nnew line\n"}}
    run_id = _suspended_with_memory(client, tenant, [call], "kept\nold line\n")
    [approval] = pending(client, tenant.owner, run_id)
    before = _preview(client, tenant.owner, approval["id"])
    assert before["as_of"] == "now"
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    after = _preview(client, tenant.owner, approval["id"])
    assert after == {**before, "as_of": "decision"}
    assert after["diff"] == KEPT_DIFF.format("new line")


def test_an_edit_keeps_the_diff_of_the_reviewers_arguments(client: FlaskClient, tenant: TenantFixture) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "kept\nthe model's line\n"}}
    run_id = _suspended_with_memory(client, tenant, [call], "kept\nold line\n")
    [approval] = pending(client, tenant.owner, run_id)
    edit = {"tool_call_id": "w", "decision": "edit", "args": {"file_path": MEMORY, "content": "kept\nmine\n"}}
    assert decide(client, tenant.owner, run_id, edit).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    kept = _preview(client, tenant.owner, approval["id"])
    assert (kept["as_of"], kept["diff"]) == ("decision", KEPT_DIFF.format("mine"))


def test_a_reject_and_a_tool_that_changes_no_file_keep_no_preview(client: FlaskClient, tenant: TenantFixture) -> None:
    calls = [
        {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "kept\nnew line\n"}},
        {"id": "r", "name": "read_file", "args": {"file_path": MEMORY}},
    ]
    run_id = _suspended_with_memory(
        client, tenant, calls, "kept\nold line\n", interrupt_on={"write_file": True, "read_file": True}
    )
    ids = {item["tool_call_id"]: item["id"] for item in pending(client, tenant.owner, run_id)}
    reject = {"tool_call_id": "w", "decision": "reject", "message": "no"}
    assert decide(client, tenant.owner, run_id, reject, {"tool_call_id": "r", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    rejected, read = _preview(client, tenant.owner, ids["w"]), _preview(client, tenant.owner, ids["r"])
    assert (rejected["as_of"], rejected["diff"]) == ("now", KEPT_DIFF.format("new line"))  # nothing was written
    assert (read["as_of"], read["kind"]) == ("now", "none")


def test_a_quorum_keeps_the_preview_of_its_deciding_vote_only(client: FlaskClient, tenant: TenantFixture) -> None:
    admin = tenant.add("admin")
    call = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "kept\nnew line\n"}}
    rule = {"write_file": {"approvals_required": 2}}
    run_id = _suspended_with_memory(client, tenant, [call], "kept\nold line\n", interrupt_on=rule)
    [approval] = pending(client, tenant.owner, run_id)
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert _preview(client, tenant.owner, approval["id"])["as_of"] == "now"  # a vote decides nothing yet
    assert decide(client, admin, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    kept = _preview(client, tenant.owner, approval["id"])
    assert (kept["as_of"], kept["diff"]) == ("decision", KEPT_DIFF.format("new line"))


def test_a_standing_approvals_automatic_approve_keeps_no_preview(client: FlaskClient, tenant: TenantFixture) -> None:
    call = {"id": "w", "name": "write_file", "args": {"file_path": MEMORY, "content": "kept\nnew line\n"}}
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [call]}, {"text": "Done."}])
    put = client.put(
        f"/v1/agents/{agent_id}/files{MEMORY}", json={"content": "kept\nold line\n"}, headers=tenant.owner.headers
    )
    assert put.status_code == 200, put.json
    grant = {"agent_id": agent_id, "tool_name": "write_file", "ttl": "1h"}
    assert client.post("/v1/grants", json=grant, headers=tenant.owner.headers).status_code == 201
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    [approval] = pending(client, tenant.owner, run_id, "decided")
    assert approval["grant_id"] is not None
    preview = _preview(client, tenant.owner, approval["id"])
    # Nobody looked: the preview is worked out now, against the file the call has written.
    assert (preview["as_of"], preview["diff"]) == ("now", "")
