"""The attacks of issue 22 on who decides and what a decision covers, made through the API with a real worker:
another spelling of an approval id, an admin's standing approval under an owners-only rule, a ``remember`` that
covered more than the call approved, and two argument sets with one digest. Each is refused."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.kernel.models import ApprovalVote, Membership
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import MEMORY, audit_rows, decide, finished, pending, suspended_run, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")
OWNERS_ONLY = {"write_file": {"reviewers": {"roles": ["owner"]}}}
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory("by the owner only", call_id="w")]}, {"text": "Done."}]


def _spellings(approval_id: str) -> list[str]:
    """Other spellings of one UUID that Python's parser (and so marshmallow's UUID field) reads as the same id."""
    hex_digits = uuid.UUID(approval_id).hex
    return [approval_id.upper(), "{" + approval_id + "}", "urn:uuid:" + approval_id, hex_digits, hex_digits.upper()]


def _memory(client: FlaskClient, person: Person, run_id: str) -> str | None:
    agent_id = client.get(f"/v1/runs/{run_id}", headers=person.headers).json["agent_id"]
    response = client.get(f"/v1/agents/{agent_id}/files{MEMORY}", headers=person.headers)
    return response.json["content"] if response.status_code == 200 else None


def _votes(db: Database, run_id: str) -> int:
    with db.transaction() as session:
        return int(session.scalar(select(func.count()).where(ApprovalVote.run_id == uuid.UUID(run_id))) or 0)


# 1. One identity for every approval reference.


def test_no_spelling_of_an_approval_id_lets_an_admin_decide_a_call_reserved_for_owners(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    admin = tenant.add("admin")
    run_id = suspended_run(client, tenant, SCRIPT, interrupt_on=OWNERS_ONLY)
    [item] = pending(client, admin, run_id)
    for spelling in [item["id"], *_spellings(item["id"])]:
        refused = decide(client, admin, run_id, {"approval_id": spelling, "decision": "approve"})
        assert refused.status_code == 403, (spelling, refused.json)
        # Named both ways, the approval id still counts whatever the call id says.
        both = {"approval_id": spelling, "tool_call_id": "nope", "decision": "approve"}
        assert decide(client, admin, run_id, both).status_code == 403, spelling
    assert [row["state"] for row in pending(client, admin, run_id)] == ["pending"]
    assert _memory(client, tenant.owner, run_id) is None
    denied = [row for row in audit_rows(db, tenant.id, "approval.decide") if row.outcome == "denied"]
    assert {(row.target_kind, row.target_id) for row in denied} == {("pending_approval", item["id"])}
    # The owner may name it in any spelling.
    accepted = decide(client, tenant.owner, run_id, {"approval_id": _spellings(item["id"])[2], "decision": "approve"})
    assert accepted.status_code == 200, accepted.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    assert _memory(client, tenant.owner, run_id) == "by the owner only"


def test_no_spelling_records_a_vote_of_an_admin_a_quorum_rule_does_not_name(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    first, second, outsider = tenant.add("admin"), tenant.add("admin"), tenant.add("admin")
    rule = {"reviewers": {"users": [str(first.user_id), str(second.user_id)]}, "approvals_required": 2}
    run_id = suspended_run(client, tenant, SCRIPT, interrupt_on={"write_file": rule})
    [item] = pending(client, outsider, run_id)
    for spelling in _spellings(item["id"]):
        refused = decide(client, outsider, run_id, {"approval_id": spelling, "decision": "approve"})
        assert refused.status_code == 403, (spelling, refused.json)
    assert _votes(db, run_id) == 0
    assert decide(client, first, run_id, {"approval_id": item["id"].upper(), "decision": "approve"}).status_code == 200
    assert _votes(db, run_id) == 1


def test_reviewer_user_ids_are_stored_in_one_spelling_and_any_spelling_names_the_user(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    admin = tenant.add("admin")
    spelt = "{" + str(admin.user_id).upper() + "}"
    rule = {
        "reviewers": {"users": [spelt, str(admin.user_id)]},
        "on_expiry": {"escalate": {"users": [spelt]}, "ttl": "1h"},
    }
    agent_id = create_agent(client, tenant.owner, SCRIPT, interrupt_on={"write_file": rule})
    stored = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json["interrupt_on"]["write_file"]
    assert stored["reviewers"] == {"users": [str(admin.user_id)]}
    assert stored["on_expiry"]["escalate"] == {"users": [str(admin.user_id)]}
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 403
    assert decide(client, admin, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200


# 2. Grants and remember obey the rule's reviewers.


def _grant(client: FlaskClient, person: Person, agent_id: str, **body: Any) -> Any:
    return client.post(
        "/v1/grants",
        json={"agent_id": agent_id, "tool_name": "write_file", "ttl": "1h", **body},
        headers=person.headers,
    )


def test_a_grant_its_creator_could_never_use_is_refused_saying_why(client: FlaskClient, tenant: TenantFixture) -> None:
    admin = tenant.add("admin")
    owners_only = create_agent(client, tenant.owner, SCRIPT, interrupt_on=OWNERS_ONLY)
    refused = _grant(client, admin, owners_only)
    assert refused.status_code == 400, refused.json
    [error] = refused.json["errors"]
    assert error["field"] == "tool_name"
    assert "names other reviewers" in error["message"]
    assert _grant(client, tenant.owner, owners_only).status_code == 201
    quorum = create_agent(client, tenant.owner, SCRIPT, interrupt_on={"write_file": {"approvals_required": 2}})
    assert "2 approvals" in _grant(client, tenant.owner, quorum).json["errors"][0]["message"]
    no_approve = create_agent(
        client, tenant.owner, SCRIPT, interrupt_on={"write_file": {"allowed_decisions": ["reject"]}}
    )
    assert "does not allow approve" in _grant(client, tenant.owner, no_approve).json["errors"][0]["message"]
    unguarded = create_agent(client, tenant.owner, SCRIPT, interrupt_on={"write_file": False})
    assert "no rule interrupts it" in _grant(client, tenant.owner, unguarded).json["errors"][0]["message"]
    # A subagent's own rule is one place where the grant may apply.
    subagent = {
        "name": "scribe",
        "description": "writes",
        "model": {"provider": "scripted", "script": []},
        "tools": ["write_file"],
        "interrupt_on": {"write_file": True},
    }
    mixed = create_agent(client, tenant.owner, SCRIPT, interrupt_on=OWNERS_ONLY, subagents=[subagent])
    assert _grant(client, admin, mixed).status_code == 201


def test_an_admins_grant_does_not_decide_a_call_the_rule_now_reserves_for_owners(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    admin = tenant.add("admin")
    agent_id = create_agent(client, tenant.owner, SCRIPT)
    granted = _grant(client, admin, agent_id)
    assert granted.status_code == 201, granted.json
    body = {
        "name": client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json["name"],
        "model": {"provider": "scripted", "script": SCRIPT},
        "tools": ["write_file"],
        "interrupt_on": OWNERS_ONLY,
    }
    assert client.put(f"/v1/agents/{agent_id}", json=body, headers=tenant.owner.headers).status_code == 200
    run_id = start_run(client, tenant.owner, agent_id)
    run = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert run["state"] == "awaiting_approval", run
    [item] = pending(client, tenant.owner, run_id)
    assert item["grant_id"] is None
    assert audit_rows(db, tenant.id, "approval.auto_approve") == []
    assert _memory(client, tenant.owner, run_id) is None


def test_a_grant_stops_applying_when_its_creator_is_no_longer_a_reviewer(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    admin = tenant.add("admin")
    agent_id = create_agent(client, tenant.owner, SCRIPT)
    assert _grant(client, admin, agent_id).status_code == 201
    first = start_run(client, tenant.owner, agent_id)
    assert finished(client, tenant.owner, first)["state"] == "succeeded"  # the grant applied
    with db.transaction() as session:  # the admin becomes a member (no API changes a role today)
        row = session.scalar(select(Membership).where(Membership.user_id == admin.user_id))
        assert row is not None
        row.role = "member"
    second = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, second, {"awaiting_approval", "succeeded"})["state"] == (
        "awaiting_approval"
    )


def test_remember_covers_the_call_approved_and_not_the_same_edit_with_replace_all(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    edit = {"file_path": MEMORY, "old_string": "draft", "new_string": "final"}
    setup = {"name": "write_file", "args": {"file_path": MEMORY, "content": "draft draft"}, "id": "setup"}
    script = [
        {"text": "Edit.", "tool_calls": [setup, {"name": "edit_file", "args": edit, "id": "e1"}]},
        {
            "text": "Again, everywhere.",
            "tool_calls": [{"name": "edit_file", "args": {**edit, "replace_all": True}, "id": "e2"}],
        },
        {"text": "Done."},
    ]
    rules = {"write_file": False, "edit_file": {"when": {"file_path": {"prefix": "/memories/"}}}}
    run_id = suspended_run(client, tenant, script, interrupt_on=rules)
    remembered = decide(
        client, tenant.owner, run_id, {"tool_call_id": "e1", "decision": "approve", "remember": {"ttl": "1h"}}
    )
    assert remembered.status_code == 200, remembered.json
    # The second edit differs only by replace_all: a human decides it.
    run = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert run["state"] == "awaiting_approval", run
    [item] = pending(client, tenant.owner, run_id)
    assert (item["tool_call_id"], item["grant_id"]) == ("e2", None)
    grant_id = remembered.json["approvals"][0]["remembered_grant_id"]
    grant = client.get(f"/v1/grants/{grant_id}", headers=tenant.owner.headers).json
    assert grant["exact"] is True
    assert grant["when"]["replace_all"] == {"equals": False}  # the default the model left out, pinned


def test_remember_covers_the_same_call_again_with_its_default_said_out_loud(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    edit = {"file_path": MEMORY, "old_string": "a", "new_string": "b"}
    script = [
        {"text": "Edit.", "tool_calls": [{"name": "edit_file", "args": edit, "id": "e1"}]},
        {"text": "Again.", "tool_calls": [{"name": "edit_file", "args": {**edit, "replace_all": False}, "id": "e2"}]},
        {"text": "Done."},
    ]
    agent_id = create_agent(client, tenant.owner, script)
    files = f"/v1/agents/{agent_id}/files{MEMORY}"
    assert client.put(files, json={"content": "a"}, headers=tenant.owner.headers).status_code == 200
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})["state"] == "awaiting_approval"
    body = {"tool_call_id": "e1", "decision": "approve", "remember": {"ttl": "1h"}}
    assert decide(client, tenant.owner, run_id, body).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    items = pending(client, tenant.owner, run_id, "all")
    assert [(row["tool_call_id"], row["grant_id"] is not None) for row in items] == [("e1", False), ("e2", True)]


# 3. A digest that cannot collide.


def test_a_decision_bound_to_a_neighbouring_big_integer_is_refused(client: FlaskClient, tenant: TenantFixture) -> None:
    call = {"name": "read_file", "args": {"file_path": "/notes.md", "offset": 9007199254740993}, "id": "r"}
    run_id = suspended_run(client, tenant, [{"tool_calls": [call]}], interrupt_on={"read_file": True})
    [item] = pending(client, tenant.owner, run_id)
    assert item["arguments"]["offset"] == 9007199254740993  # Flask's JSON keeps the integer exact
    canonical = b'{"file_path":"/notes.md","offset":9007199254740993}'
    assert item["arguments_sha256"] == hashlib.sha256(canonical).hexdigest()
    seen = hashlib.sha256(b'{"file_path":"/notes.md","offset":9007199254740992}').hexdigest()
    stale = decide(client, tenant.owner, run_id, {"tool_call_id": "r", "decision": "approve", "arguments_sha256": seen})
    assert stale.status_code == 409, stale.json
    assert stale.json["type"] == "urn:hango:problem:stale-approval"
    bound = {"tool_call_id": "r", "decision": "approve", "arguments_sha256": item["arguments_sha256"]}
    assert decide(client, tenant.owner, run_id, bound).status_code == 200


def test_a_grant_for_ones_own_run_is_refused_where_self_approval_is_forbidden(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    assert client.put("/v1/tenant", json={"self_approval": False}, headers=tenant.owner.headers).status_code == 200
    run_id = suspended_run(client, tenant, SCRIPT)
    agent_id = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["agent_id"]
    refused = _grant(client, tenant.owner, agent_id, run_id=run_id)
    assert refused.status_code == 400, refused.json
    assert refused.json["errors"][0]["field"] == "run_id"
    assert "self-approval" in refused.json["errors"][0]["message"]
    assert _grant(client, tenant.add("admin"), agent_id, run_id=run_id).status_code == 201


# A rule's description (api.md v1.2, reviewers' gaps).


def test_every_approval_says_why_its_call_waits(client: FlaskClient, tenant: TenantFixture) -> None:
    by_default = suspended_run(client, tenant, SCRIPT)
    assert pending(client, tenant.owner, by_default)[0]["description"] == (
        "Writes to the agent's persistent memories and skills need a reviewer."
    )
    why = "Legal reviews every note before it is kept."
    described = suspended_run(client, tenant, SCRIPT, interrupt_on={"write_file": {"description": why}})
    assert pending(client, tenant.owner, described)[0]["description"] == why
    silent = suspended_run(client, tenant, SCRIPT, interrupt_on={"write_file": True})
    assert pending(client, tenant.owner, silent)[0]["description"] is None
    body = {
        "name": "long",
        "model": {"provider": "scripted", "script": []},
        "interrupt_on": {"ls": {"description": "x" * 1001}},
    }
    refused = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert refused.status_code == 400
    assert refused.json["errors"] == [
        {"field": "interrupt_on.ls.description", "message": "must be at most 1000 characters"}
    ]


# An edit is judged by the rule that held the call: a subagent's own, not the agent's.


def _scribe_run(client: FlaskClient, tenant: TenantFixture, top: Any, own: Any, path: str) -> str:
    write = {"name": "write_file", "args": {"file_path": path, "content": "x"}, "id": "w"}
    scribe = {
        "name": "scribe",
        "description": "writes",
        "model": {"provider": "scripted", "script": [{"tool_calls": [write]}, {"text": "written"}]},
        "tools": ["write_file"],
        "interrupt_on": own,
    }
    task = {"name": "task", "args": {"subagent_type": "scribe", "description": "write it"}, "id": "t"}
    script = [{"tool_calls": [task]}, {"text": "Done."}]
    return suspended_run(client, tenant, script, tools=["task", "write_file"], subagents=[scribe], interrupt_on=top)


def test_an_edit_of_a_subagents_call_is_judged_by_the_subagents_own_rule(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    memories_only = {"write_file": {"when": {"file_path": {"prefix": "/memories/"}}}}
    # The agent holds every write; the subagent only its memory writes: an edit out of /memories/ escapes the latter.
    run_id = _scribe_run(client, tenant, {"write_file": True}, memories_only, "/memories/a.md")
    escape = {"tool_call_id": "w", "decision": "edit", "args": {"file_path": "/elsewhere.md", "content": "x"}}
    refused = decide(client, tenant.owner, run_id, escape)
    assert refused.status_code == 400, refused.json
    assert "scope of the rule" in refused.json["errors"][0]["message"]
    # The other way round: the agent's rule scopes /memories/, the subagent holds every write.
    run_id = _scribe_run(client, tenant, memories_only, {"write_file": True}, "/draft.md")
    moved = {"tool_call_id": "w", "decision": "edit", "args": {"file_path": "/final.md", "content": "x"}}
    assert decide(client, tenant.owner, run_id, moved).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
