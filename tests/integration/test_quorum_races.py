"""Quorum votes racing on real PostgreSQL, with the overlap forced as in ``test_hitl_races``: every round holds the
run's row lock from a third connection until both voters are proven to wait on it, then lets them go at once."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import func, select

from hango.kernel.models import ApprovalVote, PendingApproval
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import event_types, write_memory
from tests.integration.test_hitl_races import _race

pytestmark = pytest.mark.usefixtures("worker_process")
ROUNDS = 10
APPROVE = {"tool_call_id": "w", "decision": "approve"}


def _suspended_runs(app: Flask, tenant: TenantFixture, count: int) -> list[str]:
    client = app.test_client()
    rules = {"write_file": {"approvals_required": 2}}
    script = [{"tool_calls": [write_memory(call_id="w")]}, {"text": "ok"}]
    agent_id = create_agent(client, tenant.owner, script, interrupt_on=rules)
    runs = [start_run(client, tenant.owner, agent_id) for _ in range(count)]
    for run_id in runs:
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"}, timeout=60)
    return runs


def _vote(app: Flask, person: Person, run_id: str) -> Callable[[], tuple[int, Any]]:
    def post() -> tuple[int, Any]:
        body = {"decisions": [APPROVE]}
        response = app.test_client().post(f"/v1/runs/{run_id}/approvals", json=body, headers=person.headers)
        return response.status_code, response.json

    return post


def _votes(db: Database, run_id: str) -> int:
    with db.transaction() as session:
        return int(session.scalar(select(func.count()).where(ApprovalVote.run_id == uuid.UUID(run_id))) or 0)


def _approval(db: Database, run_id: str) -> PendingApproval:
    with db.transaction() as session:
        row = session.scalars(select(PendingApproval).where(PendingApproval.run_id == uuid.UUID(run_id))).one()
        session.expunge(row)
        return row


def _ran_once(app: Flask, tenant: TenantFixture, db: Database, run_id: str) -> None:
    """One transition to ``queued``, one resume, one execution of the call."""
    assert wait_for_state(app.test_client(), tenant.owner, run_id, {"succeeded"})
    types = event_types(db, run_id)
    assert types.count("approval.decided") == 1
    assert types.count("run.queued") == 2  # at creation, and once by the deciding vote
    assert types.count("run.resumed") == 1
    assert types.count("tool.started") == 1


def test_two_concurrent_final_votes_make_one_transition(app: Flask, tenant: TenantFixture, db: Database) -> None:
    first, second, third = tenant.add("admin"), tenant.add("admin"), tenant.add("admin")
    for run_id in _suspended_runs(app, tenant, ROUNDS):
        assert _vote(app, first, run_id)()[0] == 200
        answers = _race(db, run_id, [_vote(app, second, run_id), _vote(app, third, run_id)])
        assert sorted(status for status, _ in answers) == [200, 409], answers
        refused = next(body for status, body in answers if status == 409)
        assert refused["type"] == "urn:hango:problem:not-awaiting-approval"
        winner = next(body for status, body in answers if status == 200)
        assert winner["approvals"][0]["state"] == "decided"
        assert _votes(db, run_id) == 2  # the loser stored nothing
        assert str(_approval(db, run_id).decided_by) == winner["approvals"][0]["decided_by"]
        _ran_once(app, tenant, db, run_id)


def test_two_concurrent_votes_reaching_the_quorum_together_decide_it_once(
    app: Flask, tenant: TenantFixture, db: Database
) -> None:
    # The voter that waited on the lock must count the vote committed meanwhile, or the run would wait forever.
    first, second = tenant.add("admin"), tenant.add("admin")
    for run_id in _suspended_runs(app, tenant, ROUNDS):
        answers = _race(db, run_id, [_vote(app, first, run_id), _vote(app, second, run_id)])
        assert [status for status, _ in answers] == [200, 200], answers
        states = sorted(body["approvals"][0]["state"] for _, body in answers)
        assert states == ["decided", "pending"]
        assert sorted(body["run"]["state"] for _, body in answers) == ["awaiting_approval", "queued"]
        assert _votes(db, run_id) == 2
        _ran_once(app, tenant, db, run_id)


def test_the_same_user_voting_twice_at_once_counts_once(app: Flask, tenant: TenantFixture, db: Database) -> None:
    voter = tenant.add("admin")
    for run_id in _suspended_runs(app, tenant, ROUNDS):
        answers = _race(db, run_id, [_vote(app, voter, run_id), _vote(app, voter, run_id)])
        assert sorted(status for status, _ in answers) == [200, 409], answers
        refused = next(body for status, body in answers if status == 409)
        assert refused["type"] == "urn:hango:problem:already-voted"
        assert _votes(db, run_id) == 1
        row = _approval(db, run_id)
        assert row.state == "pending"
        assert event_types(db, run_id).count("run.queued") == 1


def test_a_batch_decided_by_two_reviewers_at_once_keeps_the_first_decision(
    app: Flask, tenant: TenantFixture, db: Database
) -> None:
    # The voter that waited on the lock must see the plain call decided meanwhile, not overwrite that decision.
    first, second = tenant.add("admin"), tenant.add("admin")
    client = app.test_client()
    calls = [write_memory(call_id="w"), {"name": "ls", "args": {"path": "/"}, "id": "l"}]
    rules = {"write_file": {"approvals_required": 2}, "ls": True}
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": calls}, {"text": "ok"}], interrupt_on=rules)
    runs = [start_run(client, tenant.owner, agent_id) for _ in range(ROUNDS)]
    both = {"decisions": [APPROVE, {"tool_call_id": "l", "decision": "approve"}]}

    def vote(person: Person, run_id: str) -> Callable[[], tuple[int, Any]]:
        def post() -> tuple[int, Any]:
            response = app.test_client().post(f"/v1/runs/{run_id}/approvals", json=both, headers=person.headers)
            return response.status_code, response.json

        return post

    for run_id in runs:
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"}, timeout=60)
        answers = _race(db, run_id, [vote(first, run_id), vote(second, run_id)])
        assert sorted(status for status, _ in answers) == [200, 409], answers
        assert next(body for status, body in answers if status == 409)["type"] == (
            "urn:hango:problem:not-awaiting-approval"
        )
        winner = next(body for status, body in answers if status == 200)
        decided_by = {item["tool_call_id"]: item["decided_by"] for item in winner["approvals"]}
        with db.transaction() as session:
            rows = session.scalars(select(PendingApproval).where(PendingApproval.run_id == uuid.UUID(run_id)))
            stored = {row.tool_call_id: (row.state, str(row.decided_by) if row.decided_by else None) for row in rows}
        assert stored == {"w": ("pending", None), "l": ("decided", decided_by["l"])}
        assert _votes(db, run_id) == 1
        assert event_types(db, run_id).count("approval.decided") == 1
