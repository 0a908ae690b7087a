"""Expiry per rule with a real worker and beat: each ``on_expiry`` action, a rule's ``ttl`` against
``HANGO_APPROVAL_TTL``, a ``reject`` beside an approved sibling, and an escalation on every channel.

The module's worker runs on a queue of its own with a default TTL of a few seconds and a sweep every 0.3 s. The
session's worker sweeps too (rule ttls apply to it), so these tests assert end states, not which sweep did it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from hango.agent.middleware.hitl import EXPIRED_REJECTION
from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import ApprovalEvent, PendingApproval, Run
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, event_types, finished, pending, tool_results
from tests.support.processes import wait_until, worker
from tests.support.receiver import receiving
from tests.support.tools import executions

pytestmark = pytest.mark.slow

DEFAULT_TTL = timedelta(seconds=6)


@pytest.fixture(scope="module")
def own(settings: Settings, db: Database) -> Iterator[FlaskClient]:
    """An API on a queue of its own, served by a worker whose beat sweeps every 0.3 s with a short default TTL."""
    own_settings = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        approval_ttl=DEFAULT_TTL,
        approval_sweep_interval=timedelta(seconds=0.3),
    )
    started = datetime.now(UTC)
    with worker(own_settings, concurrency=2, beat=True, name="expiry"):
        # This beat sweeps the whole database with the short TTL: the calls other modules left waiting expire in
        # its first seconds. Let them go before any test reads a counter, or they would count as its expiries.
        wait_until(lambda: _left_waiting(db, started) == 0 or None, timeout=30)
        yield create_app(own_settings, db=db).test_client()


def _left_waiting(db: Database, before: datetime) -> int:
    """Pending approvals of waiting runs, older than ``before``, that follow the default TTL (their rule set no
    deadline): what the sweeper expires."""
    with db.transaction() as session:
        statement = select(func.count()).where(
            PendingApproval.run_id == Run.id,
            Run.state == "awaiting_approval",
            PendingApproval.state == "pending",
            PendingApproval.expires_at.is_(None),
            PendingApproval.created_at < before,
        )
        return int(session.scalar(statement) or 0)


def _count(key: str, call_id: str = "c") -> dict[str, Any]:
    return {"name": "count", "args": {"key": key}, "id": call_id}


def _samples(client: FlaskClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").get_data(as_text=True)
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _metric(client: FlaskClient, name: str, **labels: str) -> float:
    return _samples(client).get((name, tuple(sorted(labels.items()))), 0.0)


def _suspended(client: FlaskClient, tenant: TenantFixture, script: list[dict[str, Any]], rules: Any) -> str:
    agent_id = create_agent(client, tenant.owner, script, interrupt_on=rules)
    run_id = start_run(client, tenant.owner, agent_id)
    run = wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert run["state"] == "awaiting_approval", run
    return run_id


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


# fail


def test_fail_fails_the_run_with_exactly_approval_expired(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    before = _metric(own, "hango_approvals_expired_total", tool="count", action="fail")
    rules = {"count": {"ttl": "1s", "on_expiry": "fail"}}
    run_id = _suspended(own, tenant, [{"tool_calls": [_count(key)]}, {"text": "never"}], rules)
    run = finished(own, tenant.owner, run_id)
    assert (run["state"], run["error"]) == ("failed", "approval expired")
    [approval] = pending(own, tenant.owner, run_id, "all")
    assert (approval["state"], approval["on_expiry"], approval["escalated_at"]) == ("expired", "fail", None)
    assert executions(key) == 0
    assert event_types(db, run_id).count("run.finished") == 1
    [audit] = [row for row in audit_rows(db, tenant.id, "approval.expire") if row.target_id == approval["id"]]
    assert (audit.actor_kind, audit.detail["tool_call_id"]) == ("system", "c")
    assert _metric(own, "hango_approvals_expired_total", tool="count", action="fail") == before + 1


# ttl against the default


def test_a_rule_ttl_shorter_expires_first_and_a_longer_one_outlives_the_default(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    script = [{"tool_calls": [_count(uuid.uuid4().hex)]}, {"text": "done"}]
    # The default-TTL run is suspended first, so only its rule can make the short one fail before it.
    default = _suspended(own, tenant, script, {"count": True})
    short = _suspended(own, tenant, script, {"count": {"ttl": "2s"}})
    long = _suspended(own, tenant, script, {"count": {"ttl": "1h"}})
    items = {run_id: pending(own, tenant.owner, run_id)[0] for run_id in (default, short, long)}
    for run_id, ttl in ((default, DEFAULT_TTL), (short, timedelta(seconds=2)), (long, timedelta(hours=1))):
        item = items[run_id]
        assert _at(item["expires_at"]) - _at(item["created_at"]) == ttl, (ttl, item)

    short_run = finished(own, tenant.owner, short)
    assert (short_run["state"], short_run["error"]) == ("failed", "approval expired")
    assert own.get(f"/v1/runs/{default}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"
    default_run = finished(own, tenant.owner, default)
    assert (default_run["state"], default_run["error"]) == ("failed", "approval expired")
    assert _at(short_run["finished_at"]) < _at(default_run["finished_at"])
    # A sweep that expires default-TTL approvals has run, and a sweep after it too: the 1h rule still waits.
    later = _suspended(own, tenant, script, {"count": True})
    assert finished(own, tenant.owner, later)["state"] == "failed"
    assert own.get(f"/v1/runs/{long}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"
    [waiting] = pending(own, tenant.owner, long)
    assert waiting["expires_at"] == items[long]["expires_at"]
    assert decide(own, tenant.owner, long, {"tool_call_id": "c", "decision": "approve"}).status_code == 200
    assert finished(own, tenant.owner, long)["state"] == "succeeded"


# reject


def test_reject_in_a_batch_with_an_approved_sibling_answers_both_and_the_run_succeeds(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    approved, rejected = uuid.uuid4().hex, uuid.uuid4().hex
    admin = tenant.add("admin")
    before = _metric(own, "hango_approvals_expired_total", tool="slow_count", action="reject")
    rules = {
        "count": True,
        # Reserved for the admin, so the owner's decision of its sibling leaves it waiting (for nobody, in time).
        "slow_count": {"ttl": "3s", "on_expiry": "reject", "reviewers": {"users": [str(admin.user_id)]}},
    }
    calls = [_count(approved, "a"), {"name": "slow_count", "args": {"key": rejected, "seconds": 0}, "id": "b"}]
    run_id = _suspended(own, tenant, [{"tool_calls": calls}, {"text": "carried on"}], rules)
    assert decide(own, tenant.owner, run_id, {"tool_call_id": "a", "decision": "approve"}).status_code == 200

    run = finished(own, tenant.owner, run_id)
    assert (run["state"], run["error"]) == ("succeeded", None)
    results = tool_results(own, tenant.owner, run_id)
    assert executions(approved) == 1
    assert not results["a"]["is_error"]
    assert executions(rejected) == 0
    assert (results["b"]["content"], results["b"]["is_error"]) == (EXPIRED_REJECTION, True)
    states = {item["tool_call_id"]: item["state"] for item in pending(own, tenant.owner, run_id, "all")}
    assert states == {"a": "decided", "b": "expired"}
    types = event_types(db, run_id)
    assert types.count("approval.expired") == 1
    assert types.count("run.queued") == 2  # at creation, and once when the batch was settled
    assert types.count("run.resumed") == 1
    [audit] = [row for row in audit_rows(db, tenant.id, "approval.expire") if row.detail["tool_call_id"] == "b"]
    assert (audit.actor_kind, audit.detail["on_expiry"]) == ("system", "reject")
    assert _metric(own, "hango_approvals_expired_total", tool="slow_count", action="reject") == before + 1


def test_reject_while_a_sibling_still_waits_keeps_the_run_waiting_until_it_is_decided(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    approved, rejected = uuid.uuid4().hex, uuid.uuid4().hex
    rules = {"count": {"ttl": "1h"}, "slow_count": {"ttl": "1s", "on_expiry": "reject"}}
    calls = [_count(approved, "a"), {"name": "slow_count", "args": {"key": rejected, "seconds": 0}, "id": "b"}]
    run_id = _suspended(own, tenant, [{"tool_calls": calls}, {"text": "carried on"}], rules)
    wait_until(lambda: [i for i in pending(own, tenant.owner, run_id, "expired") if i["tool_call_id"] == "b"] or None)
    # Rejected, but the run is not re-queued while its sibling waits.
    assert own.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"
    assert event_types(db, run_id).count("run.queued") == 1
    assert [item["tool_call_id"] for item in pending(own, tenant.owner, run_id)] == ["a"]
    # The expired call can no longer be decided, and a refused request stores nothing.
    late = {"tool_call_id": "b", "decision": "approve"}
    refused = decide(own, tenant.owner, run_id, {"tool_call_id": "a", "decision": "approve"}, late)
    assert refused.status_code == 409, refused.json
    assert [item["tool_call_id"] for item in pending(own, tenant.owner, run_id)] == ["a"]
    assert decide(own, tenant.owner, run_id, {"tool_call_id": "a", "decision": "approve"}).status_code == 200
    assert finished(own, tenant.owner, run_id)["state"] == "succeeded"
    results = tool_results(own, tenant.owner, run_id)
    assert (executions(approved), executions(rejected)) == (1, 0)
    assert (results["b"]["content"], results["b"]["is_error"]) == (EXPIRED_REJECTION, True)
    assert not results["a"]["is_error"]
    assert event_types(db, run_id).count("run.queued") == 2


# escalate


def test_escalation_changes_who_decides_and_is_announced_everywhere(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    first, second = tenant.add("admin"), tenant.add("admin")
    key = uuid.uuid4().hex
    before = _metric(own, "hango_approvals_escalated_total", tool="count")
    escalation = {"escalate": {"users": [str(second.user_id)]}, "ttl": "1h"}
    rules = {"count": {"ttl": "2s", "reviewers": {"users": [str(first.user_id)]}, "on_expiry": escalation}}
    with receiving() as receiver:
        hook = own.post(
            "/v1/webhooks", json={"url": receiver.url, "events": ["approval.escalated"]}, headers=tenant.owner.headers
        )
        assert hook.status_code == 201, hook.json
        run_id = _suspended(own, tenant, [{"tool_calls": [_count(key)]}, {"text": "done"}], rules)
        item = wait_until(lambda: next((i for i in pending(own, tenant.owner, run_id) if i["escalated_at"]), None))
        assert item["reviewers"] == {"users": [str(second.user_id)]}
        assert _at(item["expires_at"]) - _at(item["escalated_at"]) == timedelta(hours=1)
        assert item["state"] == "pending"
        assert own.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"

        refused = decide(own, first, run_id, {"tool_call_id": "c", "decision": "approve"})
        assert refused.status_code == 403, refused.json
        accepted = decide(own, second, run_id, {"tool_call_id": "c", "decision": "approve"})
        assert accepted.status_code == 200, accepted.json
        assert finished(own, tenant.owner, run_id)["state"] == "succeeded"
        assert executions(key) == 1

        [delivered] = wait_until(lambda: receiver.of_type("approval.escalated") or None, timeout=30)
        assert delivered.type == "approval.escalated"
        assert item["id"] in delivered.body.decode()

    types = event_types(db, run_id)
    assert types.count("approval.escalated") == 1
    with db.transaction() as session:
        stream = list(
            session.scalars(
                select(ApprovalEvent.type).where(
                    ApprovalEvent.tenant_id == tenant.id, ApprovalEvent.approval_id == uuid.UUID(item["id"])
                )
            )
        )
    assert stream.count("approval.escalated") == 1
    [audit] = audit_rows(db, tenant.id, "approval.escalate")
    assert (audit.actor_kind, audit.actor_id, audit.target_id) == ("system", None, item["id"])
    assert audit.detail["reviewers"] == {"users": [str(second.user_id)]}
    assert _metric(own, "hango_approvals_escalated_total", tool="count") == before + 1


def test_the_second_deadline_fails_the_run_with_exactly_approval_expired(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    escalated = _metric(own, "hango_approvals_escalated_total", tool="count")
    failed = _metric(own, "hango_approvals_expired_total", tool="count", action="fail")
    rules = {"count": {"ttl": "1s", "on_expiry": {"escalate": {"roles": ["admin"]}, "ttl": "2s"}}}
    run_id = _suspended(own, tenant, [{"tool_calls": [_count(key)]}, {"text": "never"}], rules)
    run = finished(own, tenant.owner, run_id)
    assert (run["state"], run["error"]) == ("failed", "approval expired")
    [approval] = pending(own, tenant.owner, run_id, "all")
    assert approval["state"] == "expired"
    assert approval["escalated_at"] is not None
    assert _at(run["finished_at"]) - _at(approval["escalated_at"]) >= timedelta(seconds=2)
    assert executions(key) == 0
    types = event_types(db, run_id)
    assert types.count("approval.escalated") == 1
    assert types.count("run.finished") == 1
    assert len(audit_rows(db, tenant.id, "approval.escalate")) == 1
    assert len(audit_rows(db, tenant.id, "approval.expire")) == 1
    assert _metric(own, "hango_approvals_escalated_total", tool="count") == escalated + 1
    assert _metric(own, "hango_approvals_expired_total", tool="count", action="fail") == failed + 1


# the rule's fields through the agents API


def test_the_agent_shows_ttl_and_on_expiry_and_refuses_bad_values_naming_the_field(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    escalation = {"escalate": {"roles": ["admin"]}, "ttl": "1h"}
    rules = {"count": {"ttl": "4h", "on_expiry": escalation}, "sleep": {"ttl": "30m", "on_expiry": "reject"}}
    agent_id = create_agent(client, tenant.owner, [{"text": "hi"}], interrupt_on=rules)
    shown = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json["effective_interrupt_on"]
    assert (shown["count"]["ttl"], shown["count"]["on_expiry"]) == ("4h", escalation)
    assert (shown["sleep"]["ttl"], shown["sleep"]["on_expiry"]) == ("30m", "reject")

    for rule, field in (
        ({"ttl": "soon"}, "interrupt_on.count.ttl"),
        ({"ttl": "0s"}, "interrupt_on.count.ttl"),
        ({"ttl": "31d"}, "interrupt_on.count.ttl"),
        ({"on_expiry": "explode"}, "interrupt_on.count.on_expiry"),
        ({"on_expiry": {"escalate": {"roles": ["admin"]}}}, "interrupt_on.count.on_expiry.ttl"),
        (
            {"on_expiry": {"escalate": {"roles": ["member"]}, "ttl": "1h"}},
            "interrupt_on.count.on_expiry.escalate.roles",
        ),
        ({"on_expiry": {"escalate": {}, "ttl": "1h"}}, "interrupt_on.count.on_expiry.escalate"),
    ):
        body = {"name": f"bad-{uuid.uuid4().hex[:8]}", "model": {"provider": "scripted", "script": []}}
        response = client.post(
            "/v1/agents",
            json={**body, "tools": ["count"], "interrupt_on": {"count": rule}},
            headers=tenant.owner.headers,
        )
        assert response.status_code == 400, (rule, response.json)
        assert field in [error["field"] for error in response.json["errors"]], (rule, response.json)


def test_reject_inside_a_subagent_answers_the_childs_call_and_the_parent_goes_on(
    own: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    child = {
        "name": "counter",
        "description": "the counter",
        "system_prompt": "You count.",
        "tools": ["count"],
        "model": {"provider": "scripted", "script": [{"tool_calls": [_count(key)]}, {"text": "child done"}]},
        "interrupt_on": {"count": {"ttl": "1s", "on_expiry": "reject"}},
    }
    task = {"name": "task", "args": {"subagent_type": "counter", "description": "count"}, "id": "t"}
    agent_id = create_agent(
        own, tenant.owner, [{"tool_calls": [task]}, {"text": "done"}], tools=["count", "task"], subagents=[child]
    )
    run_id = start_run(own, tenant.owner, agent_id)
    run = finished(own, tenant.owner, run_id)
    assert (run["state"], run["error"]) == ("succeeded", None)
    results = tool_results(own, tenant.owner, run_id)
    assert (results["c"]["content"], results["c"]["is_error"]) == (EXPIRED_REJECTION, True)
    assert (results["t"]["content"], results["t"]["is_error"]) == ("child done", False)
    assert executions(key) == 0
    [approval] = pending(own, tenant.owner, run_id, "all")
    assert (approval["state"], approval["subagent_call_id"] is not None) == ("expired", True)
