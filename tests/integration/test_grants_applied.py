"""Standing approvals where a rule would interrupt, with the session's real worker: a live grant that matches lets
the call run without suspending, recorded as a decided approval with its ``grant_id`` and audited
``approval.auto_approve``; an expired, revoked, foreign or non-matching grant leaves the call to a human."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.agent.messages import ToolCall
from hango.agent.state import PendingCall, StandingApproval
from hango.kernel.models import Grant, PendingApproval
from hango.platform.db import Database
from hango.run import standing
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, event_types, pending, tool_results
from tests.support.tools import executions

pytestmark = pytest.mark.usefixtures("worker_process")


def _count(call_id: str, key: str) -> dict[str, Any]:
    return {"id": call_id, "name": "count", "args": {"key": key}}


def _agent(client: FlaskClient, tenant: TenantFixture, calls: list[dict[str, Any]], rule: Any = True) -> str:
    return create_agent(client, tenant.owner, [{"tool_calls": calls}, {"text": "done"}], interrupt_on={"count": rule})


def _grant(
    db: Database,
    tenant: TenantFixture,
    agent_id: str,
    by: Person,
    when: dict[str, Any] | None,
    *,
    expires_in: timedelta = timedelta(hours=1),
    revoked: bool = False,
    run_id: str | None = None,
) -> uuid.UUID:
    grant = Grant(
        id=uuid.uuid4(),
        tenant_id=tenant.id,
        agent_id=uuid.UUID(agent_id),
        tool_name="count",
        when=when,
        run_id=uuid.UUID(run_id) if run_id else None,
        created_by=by.user_id,
        expires_at=datetime.now(UTC) + expires_in,
        revoked_at=datetime.now(UTC) if revoked else None,
    )
    with db.transaction() as session:
        session.add(grant)
    return grant.id


def _rows(db: Database, run_id: str) -> dict[str, PendingApproval]:
    with db.transaction() as session:
        rows = session.scalars(select(PendingApproval).where(PendingApproval.run_id == uuid.UUID(run_id)))
        return {row.tool_call_id: row for row in rows}


def _settled(client: FlaskClient, tenant: TenantFixture, run_id: str) -> str:
    states = {"awaiting_approval", "succeeded", "failed"}
    state: str = wait_for_state(client, tenant.owner, run_id, states)["state"]
    return state


def test_a_matching_grant_runs_the_call_without_suspending_recorded_and_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    admin = tenant.add("admin")
    agent_id = _agent(client, tenant, [_count("c", key)])
    grant_id = _grant(db, tenant, agent_id, admin, {"key": {"equals": key}})
    run_id = start_run(client, tenant.owner, agent_id)

    assert _settled(client, tenant, run_id) == "succeeded"
    assert executions(key) == 1
    assert tool_results(client, tenant.owner, run_id)["c"]["content"] == f"counted {key} (1)"
    row = _rows(db, run_id)["c"]
    assert (row.state, row.decision, row.decided_by, row.grant_id, row.execution) == (
        "decided",
        "approve",
        admin.user_id,
        grant_id,
        "done",
    )
    assert "run.awaiting_approval" not in event_types(db, run_id)
    [audit] = [a for a in audit_rows(db, tenant.id, "approval.auto_approve") if a.target_id == str(row.id)]
    assert (audit.actor_kind, audit.outcome) == ("system", "success")
    assert audit.detail == {
        "decided_by": str(admin.user_id),
        "decision": "approve",
        "grant_id": str(grant_id),
        "tool_name": "count",
        "tool_call_id": "c",
        "run_id": run_id,
    }


def test_a_grant_covers_only_its_calls_and_the_batch_waits_for_the_rest(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    covered, other = uuid.uuid4().hex, uuid.uuid4().hex
    agent_id = _agent(client, tenant, [_count("a", covered), _count("b", other)])
    grant_id = _grant(db, tenant, agent_id, tenant.owner, {"key": {"equals": covered}})
    run_id = start_run(client, tenant.owner, agent_id)

    assert _settled(client, tenant, run_id) == "awaiting_approval"
    assert [item["tool_call_id"] for item in pending(client, tenant.owner, run_id)] == ["b"]
    rows = _rows(db, run_id)
    assert (rows["a"].state, rows["a"].grant_id, rows["b"].state, rows["b"].grant_id) == (
        "decided",
        grant_id,
        "pending",
        None,
    )
    assert executions(covered) == 0, "a granted call ran before its batch"
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "b", "decision": "approve"}).status_code == 200
    assert _settled(client, tenant, run_id) == "succeeded"
    assert (executions(covered), executions(other)) == (1, 1)
    assert {row.execution for row in _rows(db, run_id).values()} == {"done"}


@pytest.mark.parametrize(
    "which", ["expired", "revoked", "no match", "another run", "another agent", "no approve", "quorum"]
)
def test_a_grant_that_is_not_live_or_does_not_match_leaves_the_call_to_a_human(
    client: FlaskClient, tenant: TenantFixture, db: Database, which: str
) -> None:
    key = uuid.uuid4().hex
    rules: dict[str, Any] = {
        "no approve": {"allowed_decisions": ["reject", "respond"]},
        "quorum": {"approvals_required": 2},
    }
    rule = rules.get(which, True)
    agent_id = _agent(client, tenant, [_count("c", key)], rule)
    if which == "expired":
        _grant(db, tenant, agent_id, tenant.owner, None, expires_in=timedelta(seconds=-1))
    elif which == "revoked":
        _grant(db, tenant, agent_id, tenant.owner, None, revoked=True)
    elif which == "no match":
        _grant(db, tenant, agent_id, tenant.owner, {"key": {"equals": key + "x"}})
    elif which == "another run":
        earlier = start_run(client, tenant.owner, agent_id)
        assert _settled(client, tenant, earlier) == "awaiting_approval"
        _grant(db, tenant, agent_id, tenant.owner, None, run_id=earlier)
    elif which == "another agent":
        _grant(db, tenant, _agent(client, tenant, [_count("c", key)]), tenant.owner, None)
    else:
        _grant(db, tenant, agent_id, tenant.owner, None)
    run_id = start_run(client, tenant.owner, agent_id)

    assert _settled(client, tenant, run_id) == "awaiting_approval"
    assert _rows(db, run_id)["c"].grant_id is None
    assert executions(key) == 0


def test_a_call_whose_grant_was_revoked_after_the_lookup_is_stored_pending(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    agent_id = _agent(client, tenant, [_count("c", "k")])
    live = _grant(db, tenant, agent_id, tenant.owner, None)
    gone = _grant(db, tenant, agent_id, tenant.owner, None, revoked=True)
    run_id = uuid.UUID(start_run(client, tenant.owner, agent_id))
    now = datetime.now(UTC)
    held = [
        PendingCall(ToolCall(call_id, "count", {"key": "k"}), ("approve",), granted=StandingApproval(grant, by))
        for call_id, grant, by in [("a", live, tenant.owner.user_id), ("b", gone, tenant.owner.user_id)]
    ]
    rows = standing.approval_rows(tenant.id, run_id, 1, held, now)
    with db.transaction() as session:
        withdrawn = standing.confirm(session, rows, now)
    assert [row.tool_call_id for row in withdrawn] == ["b"]
    assert [(row.state, row.grant_id, row.decided_by) for row in rows] == [
        ("decided", live, tenant.owner.user_id),
        ("pending", None, None),
    ]
    assert [event[1]["tool_call_id"] for event in standing.decided_events(rows)] == ["a"]


def test_a_grant_made_through_the_api_applies_until_revoked_there_and_every_step_is_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    agent_id = _agent(client, tenant, [_count("c", key)])
    body = {"agent_id": agent_id, "tool_name": "count", "when": {"key": {"equals": key}}, "ttl": "1h"}
    created = client.post("/v1/grants", json=body, headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    grant_id = created.json["id"]

    applied = start_run(client, tenant.owner, agent_id)
    assert _settled(client, tenant, applied) == "succeeded"
    [item] = pending(client, tenant.owner, applied, "all")
    assert (item["state"], item["decision"], item["grant_id"], item["execution"]) == (
        "decided",
        "approve",
        grant_id,
        "done",
    )

    assert client.delete(f"/v1/grants/{grant_id}", headers=tenant.owner.headers).status_code == 204
    after = start_run(client, tenant.owner, agent_id)
    assert _settled(client, tenant, after) == "awaiting_approval"
    assert executions(key) == 1

    assert [row.target_id for row in audit_rows(db, tenant.id, "grant.create")] == [grant_id]
    assert [row.detail["grant_id"] for row in audit_rows(db, tenant.id, "approval.auto_approve")] == [grant_id]
    assert [row.target_id for row in audit_rows(db, tenant.id, "grant.revoke")] == [grant_id]


def test_without_self_approval_a_run_creators_own_grant_does_not_approve_their_run(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    assert client.put("/v1/tenant", json={"self_approval": False}, headers=tenant.owner.headers).status_code == 200
    admin = tenant.add("admin")
    key = uuid.uuid4().hex
    agent_id = _agent(client, tenant, [_count("c", key)])
    _grant(db, tenant, agent_id, tenant.owner, None)
    own = start_run(client, tenant.owner, agent_id)
    assert _settled(client, tenant, own) == "awaiting_approval", "the creator approved their own run by a grant"

    theirs = _grant(db, tenant, agent_id, admin, None)
    run_id = start_run(client, tenant.owner, agent_id)
    assert _settled(client, tenant, run_id) == "succeeded"
    assert _rows(db, run_id)["c"].grant_id == theirs
