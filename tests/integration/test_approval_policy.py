"""Assigned reviewers and quorum, through the API with a real worker: who may decide a rule's calls, how N distinct
approvals add up, and what a batch with such calls needs before its run resumes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.kernel.models import ApprovalVote
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, wait_for_state
from tests.integration.hitl_helpers import (
    MEMORY,
    audit_rows,
    decide,
    event_types,
    finished,
    pending,
    suspended_run,
    tool_results,
    write_memory,
)

pytestmark = pytest.mark.usefixtures("worker_process")
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory("quorum", call_id="w")]}, {"text": "Done."}]
APPROVE = {"tool_call_id": "w", "decision": "approve"}
REJECT = {"tool_call_id": "w", "decision": "reject", "message": "not without the legal team"}


def _policy(**rule: Any) -> dict[str, Any]:
    return {"interrupt_on": {"write_file": rule}}


def _votes(db: Database, run_id: str) -> int:
    with db.transaction() as session:
        count = session.scalar(select(func.count()).where(ApprovalVote.run_id == uuid.UUID(run_id)))
        return int(count or 0)


def _memory(client: FlaskClient, person: Person, run_id: str) -> str | None:
    agent_id = client.get(f"/v1/runs/{run_id}", headers=person.headers).json["agent_id"]
    response = client.get(f"/v1/agents/{agent_id}/files{MEMORY}", headers=person.headers)
    return response.json["content"] if response.status_code == 200 else None


def _still_waiting(client: FlaskClient, person: Person, run_id: str, db: Database) -> None:
    """The run is awaiting approval and was never queued again (one ``run.queued``: its creation's)."""
    assert client.get(f"/v1/runs/{run_id}", headers=person.headers).json["state"] == "awaiting_approval"
    assert event_types(db, run_id).count("run.queued") == 1


def test_reviewers_by_role_refuse_an_admin_when_only_owners_decide(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    admin = tenant.add("admin")
    run_id = suspended_run(client, tenant, SCRIPT, **_policy(reviewers={"roles": ["owner"]}))
    [item] = pending(client, admin, run_id)
    assert (item["reviewers"], item["approvals_required"], item["votes"]) == ({"roles": ["owner"]}, 1, [])
    refused = decide(client, admin, run_id, APPROVE)
    assert refused.status_code == 403, refused.json
    assert refused.headers["Content-Type"] == "application/problem+json"
    assert refused.json["type"] == "urn:hango:problem:forbidden"
    assert "reviewers" in refused.json["detail"]
    # Who may not decide learns that first, before how the decision is malformed.
    assert decide(client, admin, run_id, {"tool_call_id": "w", "decision": "reject"}).status_code == 403
    assert [row["state"] for row in pending(client, admin, run_id)] == ["pending"]
    denied = [row for row in audit_rows(db, tenant.id, "approval.decide") if row.outcome == "denied"]
    assert [(row.target_kind, row.target_id) for row in denied] == [("pending_approval", item["id"])] * 2
    assert decide(client, tenant.owner, run_id, APPROVE).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"


def test_reviewers_by_user_let_the_named_admin_decide_and_refuse_another(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    named, other = tenant.add("admin"), tenant.add("admin")
    run_id = suspended_run(client, tenant, SCRIPT, **_policy(reviewers={"users": [str(named.user_id)]}))
    assert decide(client, other, run_id, APPROVE).status_code == 403
    assert decide(client, tenant.owner, run_id, APPROVE).status_code == 403  # an owner not named either
    decided = decide(client, named, run_id, APPROVE)
    assert decided.status_code == 200, decided.json
    assert decided.json["approvals"][0]["decided_by"] == str(named.user_id)
    assert finished(client, named, run_id)["state"] == "succeeded"


def test_a_quorum_of_two_runs_the_call_once_after_two_distinct_approvals(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    run_id = suspended_run(client, tenant, SCRIPT, **_policy(approvals_required=2))
    voted = decide(client, first, run_id, APPROVE)
    assert voted.status_code == 200, voted.json
    assert voted.json["run"]["state"] == "awaiting_approval"
    [item] = voted.json["approvals"]
    assert (item["state"], item["decision"], item["approvals_required"]) == ("pending", None, 2)
    assert [(vote["user_id"], vote["vote"]) for vote in item["votes"]] == [(str(first.user_id), "approve")]
    assert pending(client, second, run_id)[0]["votes"] == item["votes"]
    _still_waiting(client, tenant.owner, run_id, db)
    assert "approval.decided" not in event_types(db, run_id)

    again = decide(client, first, run_id, APPROVE)
    assert again.status_code == 409, again.json
    assert again.json["type"] == "urn:hango:problem:already-voted"
    assert _votes(db, run_id) == 1

    final = decide(client, second, run_id, APPROVE)
    assert final.status_code == 200, final.json
    assert final.json["run"]["state"] == "queued"
    [item] = final.json["approvals"]
    assert (item["state"], item["decision"], item["decided_by"]) == ("decided", "approve", str(second.user_id))
    assert [vote["user_id"] for vote in item["votes"]] == [str(first.user_id), str(second.user_id)]
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    types = event_types(db, run_id)
    assert (types.count("approval.decided"), types.count("run.queued"), types.count("tool.started")) == (1, 2, 1)
    assert _memory(client, tenant.owner, run_id) == "quorum"
    assert _votes(db, run_id) == 2
    votes = [row.detail for row in audit_rows(db, tenant.id, "approval.decide") if row.outcome == "success"]
    assert [(d["vote"], d["votes"], d["approvals_required"]) for d in votes] == [("approve", 1, 2), ("approve", 2, 2)]
    assert all("arguments" not in d and "message" not in d for d in votes)


def test_one_reject_is_final_for_a_quorum(client: FlaskClient, tenant: TenantFixture, db: Database) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    run_id = suspended_run(client, tenant, SCRIPT, **_policy(approvals_required=3))
    assert decide(client, first, run_id, APPROVE).status_code == 200
    rejected = decide(client, second, run_id, REJECT)
    assert rejected.status_code == 200, rejected.json
    [item] = rejected.json["approvals"]
    assert (item["state"], item["decision"], item["decision_message"]) == (
        "decided",
        "reject",
        REJECT["message"],
    )
    assert [vote["vote"] for vote in item["votes"]] == ["approve", "reject"]
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    result = tool_results(client, tenant.owner, run_id)["w"]
    assert result["is_error"]
    assert REJECT["message"] in result["content"]
    assert _memory(client, tenant.owner, run_id) is None
    audit = [row.detail for row in audit_rows(db, tenant.id, "approval.decide") if row.outcome == "success"]
    assert [(d["vote"], d["votes"]) for d in audit] == [("approve", 1), ("reject", 2)]


def test_a_quorum_takes_only_approve_and_reject(client: FlaskClient, tenant: TenantFixture, db: Database) -> None:
    # The stored rule allows approve and reject only; a quorum refuses an edit even were it allowed.
    run_id = suspended_run(client, tenant, SCRIPT, **_policy(approvals_required=2))
    edit = {"tool_call_id": "w", "decision": "edit", "args": {"file_path": MEMORY, "content": "x"}}
    refused = decide(client, tenant.owner, run_id, edit)
    assert refused.status_code == 400, refused.json
    assert [error["field"] for error in refused.json["errors"]] == ["decisions[0].decision"]
    assert "needs 2 approvals" in refused.json["errors"][0]["message"]
    assert _votes(db, run_id) == 0


def test_saving_a_malformed_policy_is_a_400_naming_the_field(client: FlaskClient, tenant: TenantFixture) -> None:
    body = {
        "name": "policy",
        "model": {"provider": "scripted", "script": []},
        "tools": ["write_file"],
        "interrupt_on": {"write_file": {"approvals_required": 2, "allowed_decisions": ["approve", "edit"]}},
        "subagents": [
            {
                "name": "helper",
                "description": "helps",
                "system_prompt": "help",
                "tools": ["write_file"],
                "model": {"provider": "scripted", "script": []},
                "interrupt_on": {"write_file": {"reviewers": {"roles": ["member"]}}},
            }
        ],
    }
    response = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert [error["field"] for error in response.json["errors"]] == ["interrupt_on.write_file.allowed_decisions"]
    del body["interrupt_on"]
    response = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert [error["field"] for error in response.json["errors"]] == [
        "subagents[0].interrupt_on.write_file.reviewers.roles"
    ]


def test_the_agent_shows_the_policy_in_its_effective_rules(client: FlaskClient, tenant: TenantFixture) -> None:
    rule = {"approvals_required": 2, "reviewers": {"roles": ["owner", "admin"]}}
    agent_id = create_agent(client, tenant.owner, [], interrupt_on={"write_file": rule})
    shown = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json["effective_interrupt_on"]
    assert shown["write_file"] == {"allowed_decisions": ["approve", "reject"], **rule}


def test_a_vote_covers_its_call_and_the_batch_resumes_once_every_call_is_decided(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    calls = [write_memory("quorum", call_id="w"), {"name": "ls", "args": {"path": "/"}, "id": "l"}]
    script = [{"tool_calls": calls}, {"text": "Done."}]
    rules = {"write_file": {"approvals_required": 2}, "ls": True}
    run_id = suspended_run(client, tenant, script, interrupt_on=rules)
    partial = decide(client, first, run_id, APPROVE)
    assert partial.status_code == 409, partial.json
    assert partial.json["type"] == "urn:hango:problem:partial-decision"
    assert [item["tool_call_id"] for item in partial.json["remaining"]] == ["l"]
    both = decide(client, first, run_id, APPROVE, {"tool_call_id": "l", "decision": "approve"})
    assert both.status_code == 200, both.json
    assert [item["state"] for item in both.json["approvals"]] == ["pending", "decided"]
    _still_waiting(client, tenant.owner, run_id, db)
    assert event_types(db, run_id).count("approval.decided") == 1  # ls's, while the run waits for the quorum
    # The second reviewer has only the quorum's call left to decide; ls is decided already.
    final = decide(client, second, run_id, APPROVE)
    assert final.status_code == 200, final.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    types = event_types(db, run_id)
    assert (types.count("approval.decided"), types.count("run.queued"), types.count("tool.started")) == (2, 2, 2)


def test_calls_reserved_for_other_reviewers_are_left_to_them(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    alice, bob = tenant.add("admin"), tenant.add("admin")
    calls = [{"name": "ls", "args": {"path": "/"}, "id": "l"}, {"name": "glob", "args": {"pattern": "*"}, "id": "g"}]
    rules = {
        "ls": {"reviewers": {"users": [str(alice.user_id)]}},
        "glob": {"reviewers": {"users": [str(bob.user_id)]}},
    }
    run_id = suspended_run(client, tenant, [{"tool_calls": calls}, {"text": "Done."}], interrupt_on=rules)
    assert decide(client, alice, run_id, {"tool_call_id": "g", "decision": "approve"}).status_code == 403
    mine = decide(client, alice, run_id, {"tool_call_id": "l", "decision": "approve"})
    assert mine.status_code == 200, mine.json
    assert mine.json["run"]["state"] == "awaiting_approval"
    _still_waiting(client, tenant.owner, run_id, db)
    # Neither the owner nor alice may decide glob; the batch waits for bob, who has nothing else to name.
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "g", "decision": "approve"}).status_code == 403
    assert decide(client, bob, run_id, {"tool_call_id": "g", "decision": "approve"}).status_code == 200
    assert wait_for_state(client, bob, run_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert set(tool_results(client, bob, run_id)) == {"l", "g"}


def test_a_subagents_quorum_rule_works_the_same(client: FlaskClient, tenant: TenantFixture, db: Database) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    child = {
        "name": "scribe",
        "description": "writes",
        "system_prompt": "write",
        "tools": ["write_file"],
        "model": {"provider": "scripted", "script": [{"tool_calls": [write_memory("child", call_id="w")]}]},
        "interrupt_on": {"write_file": {"approvals_required": 2, "reviewers": {"roles": ["admin"]}}},
    }
    task = {"name": "task", "args": {"subagent_type": "scribe", "description": "write"}, "id": "t"}
    run_id = suspended_run(
        client, tenant, [{"tool_calls": [task]}, {"text": "Done."}], subagents=[child], tools=["task"]
    )
    [item] = pending(client, first, run_id)
    assert (item["subagent_call_id"] is not None, item["approvals_required"]) == (True, 2)
    assert decide(client, tenant.owner, run_id, APPROVE).status_code == 403  # roles: admin only
    assert decide(client, first, run_id, APPROVE).status_code == 200
    _still_waiting(client, tenant.owner, run_id, db)
    assert decide(client, second, run_id, APPROVE).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    assert _memory(client, tenant.owner, run_id) == "child"


def test_the_openapi_document_shows_the_policy_fields_and_refusals(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").json
    approval = spec["components"]["schemas"]["Approval"]["properties"]
    assert {"reviewers", "approvals_required", "votes", "arguments_sha256", "execution", "grant_id"} <= set(approval)
    assert spec["components"]["schemas"]["Approval"]["properties"]["execution"]["enum"] == [
        "not_started",
        "executing",
        "done",
        "outcome_unknown",
    ]
    # One object per kind of decision: each may be bound to a digest, and an approve may be remembered.
    kinds = {variant["title"]: variant["properties"] for variant in spec["components"]["schemas"]["Decision"]["oneOf"]}
    assert all("arguments_sha256" in members for members in kinds.values())
    assert [title for title, members in kinds.items() if "remember" in members] == ["approve"]
    assert {"get", "put"} <= set(spec["paths"]["/v1/tenant"])
    responses = spec["paths"]["/v1/runs/{run_id}/approvals"]["post"]["responses"]
    assert "already-voted" in responses["409"]["description"]
    assert "stale-approval" in responses["409"]["description"]
    assert "reviewers" in responses["403"]["description"]
