"""A decision racing each ``on_expiry`` action of the sweeper, on real PostgreSQL with the session's worker, the
overlap forced as in ``test_hitl_races``: the run's row is locked from a third connection until the decision and
``expire_run`` are both proven to wait on it, then both go at once. Every round has exactly one outcome.

The rules' deadlines are an hour away, so no beat sweep reaches these runs; the contender ``expire_run`` is given a
clock two hours ahead.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask

from hango.agent.middleware.hitl import EXPIRED_REJECTION
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_run
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, event_types, pending, tool_results
from tests.integration.test_hitl_races import _race
from tests.support.tools import executions

pytestmark = pytest.mark.usefixtures("worker_process")
ROUNDS = 10


def _suspended(app: Flask, tenant: TenantFixture, rule: dict[str, Any]) -> list[tuple[str, str]]:
    """``ROUNDS`` runs of one agent awaiting approval of a ``count`` call ``c``, each with its own key."""
    client = app.test_client()
    runs = []
    for _ in range(ROUNDS):
        key = uuid.uuid4().hex
        script = [{"tool_calls": [{"name": "count", "args": {"key": key}, "id": "c"}]}, {"text": "ok"}]
        agent_id = create_agent(client, tenant.owner, script, interrupt_on={"count": rule})
        runs.append((start_run(client, tenant.owner, agent_id), key))
    for run_id, _ in runs:
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"}, timeout=60)
    return runs


def _decide(app: Flask, person: Person, run_id: str) -> Callable[[], int]:
    def post() -> int:
        body = {"decisions": [{"tool_call_id": "c", "decision": "approve"}]}
        response = app.test_client().post(f"/v1/runs/{run_id}/approvals", json=body, headers=person.headers)
        return response.status_code

    return post


def _expire(sweeper: Runtime, run_id: str) -> Callable[[], bool]:
    now = datetime.now(UTC) + timedelta(hours=2)
    cutoff = now - timedelta(days=1)  # no default-TTL approval of this module is due
    return lambda: expire_run(sweeper, uuid.UUID(run_id), cutoff, uuid.uuid4().hex, now=now)


@pytest.fixture
def sweeper(settings: Settings, db: Database) -> Runtime:
    return Runtime.build(settings, db=db)


def test_a_decision_racing_fail_either_wins_or_gets_a_409(
    app: Flask, tenant: TenantFixture, db: Database, sweeper: Runtime
) -> None:
    client = app.test_client()
    outcomes = []
    for run_id, key in _suspended(app, tenant, {"ttl": "1h", "on_expiry": "fail"}):
        status, expired = _race(db, run_id, [_decide(app, tenant.owner, run_id), _expire(sweeper, run_id)])
        run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
        [approval] = pending(client, tenant.owner, run_id, "all")
        types = event_types(db, run_id)
        if status == 200:
            assert (expired, run["state"], approval["state"], executions(key)) == (False, "succeeded", "decided", 1)
            assert types.count("run.queued") == 2
        else:
            assert (status, expired, run["state"], run["error"]) == (409, True, "failed", "approval expired")
            assert (approval["state"], executions(key)) == ("expired", 0)
            assert types.count("run.queued") == 1
        assert types.count("run.finished") == 1
        outcomes.append(status)
    assert set(outcomes) <= {200, 409}
    assert len(audit_rows(db, tenant.id, "approval.expire")) == outcomes.count(409)


def test_a_decision_racing_reject_is_decided_or_expired_never_both_and_queued_once(
    app: Flask, tenant: TenantFixture, db: Database, sweeper: Runtime
) -> None:
    client = app.test_client()
    expiries = 0
    for run_id, key in _suspended(app, tenant, {"ttl": "1h", "on_expiry": "reject"}):
        status, expired = _race(db, run_id, [_decide(app, tenant.owner, run_id), _expire(sweeper, run_id)])
        run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
        assert (run["state"], run["error"]) == ("succeeded", None)
        [approval] = pending(client, tenant.owner, run_id, "all")
        result = tool_results(client, tenant.owner, run_id)["c"]
        types = event_types(db, run_id)
        if status == 200:
            assert (expired, approval["state"], executions(key)) == (False, "decided", 1)
            assert not result["is_error"]
        else:
            assert (status, expired, approval["state"], executions(key)) == (409, True, "expired", 0)
            assert (result["content"], result["is_error"]) == (EXPIRED_REJECTION, True)
            expiries += 1
        assert types.count("approval.decided") + types.count("approval.expired") == 1
        assert types.count("run.queued") == 2  # at creation, and once by the winner
        assert types.count("run.resumed") == 1
    assert len(audit_rows(db, tenant.id, "approval.expire")) == expiries


def test_a_decision_by_a_reviewer_of_both_sets_racing_escalate_makes_one_transition(
    app: Flask, tenant: TenantFixture, db: Database, sweeper: Runtime
) -> None:
    client = app.test_client()
    both, added = tenant.add("admin"), tenant.add("admin")
    escalation = {"escalate": {"users": [str(both.user_id), str(added.user_id)]}, "ttl": "1h"}
    rule = {"ttl": "1h", "reviewers": {"users": [str(both.user_id)]}, "on_expiry": escalation}
    escalations = 0
    for run_id, key in _suspended(app, tenant, rule):
        status, escalated = _race(db, run_id, [_decide(app, both, run_id), _expire(sweeper, run_id)])
        assert status == 200
        assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
        [approval] = pending(client, tenant.owner, run_id, "all")
        assert (approval["state"], approval["decided_by"], executions(key)) == ("decided", str(both.user_id), 1)
        types = event_types(db, run_id)
        if escalated:
            assert approval["escalated_at"] is not None
            assert types.index("approval.escalated") < types.index("approval.decided")
            escalations += 1
        else:
            assert approval["escalated_at"] is None
        assert types.count("approval.escalated") == int(escalated)
        assert types.count("approval.decided") == 1
        assert types.count("run.queued") == 2
    assert len(audit_rows(db, tenant.id, "approval.escalate")) == escalations


@pytest.mark.parametrize("reserved", [True, False], ids=["rule-names-reviewers", "rule-open-to-every-admin"])
def test_a_decision_by_an_old_reviewer_racing_escalate_is_either_decided_or_refused(
    app: Flask, tenant: TenantFixture, db: Database, sweeper: Runtime, reserved: bool
) -> None:
    """The harder race: the escalation takes the call away from the reviewer who is deciding it. Without reviewers
    on the rule, only the approvals read again after the lock (for a rule with ``on_expiry``) see the escalation."""
    client = app.test_client()
    old, new = tenant.add("admin"), tenant.add("admin")
    escalation = {"escalate": {"users": [str(new.user_id)]}, "ttl": "1h"}
    rule: dict[str, Any] = {"ttl": "1h", "on_expiry": escalation}
    if reserved:
        rule["reviewers"] = {"users": [str(old.user_id)]}
    for run_id, key in _suspended(app, tenant, rule):
        status, escalated = _race(db, run_id, [_decide(app, old, run_id), _expire(sweeper, run_id)])
        types = event_types(db, run_id)
        if status == 200:
            assert escalated is False
            assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
            [approval] = pending(client, tenant.owner, run_id, "all")
            assert (approval["state"], approval["escalated_at"], approval["decided_by"]) == (
                "decided",
                None,
                str(old.user_id),
            )
            assert "approval.escalated" not in types
        else:
            assert (status, escalated) == (403, True)
            [approval] = pending(client, tenant.owner, run_id)
            assert approval["reviewers"] == {"users": [str(new.user_id)]}
            assert types.count("approval.escalated") == 1
            assert "approval.decided" not in types
            assert _decide(app, new, run_id)() == 200
            assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
        assert executions(key) == 1
        assert event_types(db, run_id).count("run.queued") == 2
