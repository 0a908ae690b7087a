"""Races on real PostgreSQL, with the overlap forced: every round holds the run's row lock from a third
connection until both contenders are proven to be waiting on it, then lets them go at once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import text

from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_run
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import event_types, pending, write_memory
from tests.support.processes import wait_until

pytestmark = pytest.mark.usefixtures("worker_process")
ROUNDS = 50


def _suspended_runs(app: Flask, tenant: TenantFixture, count: int) -> list[str]:
    client = app.test_client()
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [write_memory(call_id="w")]}, {"text": "ok"}])
    runs = [start_run(client, tenant.owner, agent_id) for _ in range(count)]
    for run_id in runs:
        assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"}, timeout=60)
    return runs


@contextmanager
def _run_locked(db: Database, run_id: str) -> Iterator[None]:
    with db.engine.connect() as connection, connection.begin():
        connection.execute(text("SELECT id FROM runs WHERE id = :id FOR UPDATE"), {"id": run_id})
        yield


def _waiting_on_run_locks(db: Database) -> int:
    # Statements of this database waiting on a lock while reading runs: pg_stat_activity keeps only the first
    # kilobyte of a query, which may end before its FOR UPDATE clause, or even before its FROM (the decision's
    # locking join lists every column of runs and pending_approvals first).
    with db.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND (query ILIKE '%FROM runs%' OR query ILIKE 'SELECT runs.%')"
            )
        ).scalar_one()


def _race(db: Database, run_id: str, contenders: list[Callable[[], Any]]) -> list[Any]:
    """Start every contender while the run is locked, prove they all wait on the lock, then release it."""
    with ThreadPoolExecutor(len(contenders)) as pool:
        with _run_locked(db, run_id):
            futures = [pool.submit(contender) for contender in contenders]
            wait_until(lambda: _waiting_on_run_locks(db) == len(contenders), timeout=20, interval=0.01)
        return [future.result(timeout=30) for future in futures]


def _decide(app: Flask, tenant: TenantFixture, run_id: str) -> Callable[[], int]:
    def post() -> int:
        body = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
        response = app.test_client().post(f"/v1/runs/{run_id}/approvals", json=body, headers=tenant.owner.headers)
        return response.status_code

    return post


def test_two_concurrent_final_decisions_make_one_transition_and_one_execution(
    app: Flask, tenant: TenantFixture, db: Database
) -> None:
    client = app.test_client()
    for run_id in _suspended_runs(app, tenant, ROUNDS):
        statuses = _race(db, run_id, [_decide(app, tenant, run_id), _decide(app, tenant, run_id)])
        assert sorted(statuses) == [200, 409]
        wait_for_state(client, tenant.owner, run_id, {"succeeded"})
        types = event_types(db, run_id)
        assert types.count("approval.decided") == 1
        assert types.count("run.queued") == 2  # at creation, and once by the single winning decision
        assert types.count("run.resumed") == 1
        assert types.count("tool.started") == 1


def test_a_decision_racing_the_sweeper_has_exactly_one_outcome(
    app: Flask, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    sweeper = Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db)
    client = app.test_client()
    outcomes = set()
    for run_id in _suspended_runs(app, tenant, 20):
        cutoff = datetime.now(UTC) + timedelta(hours=1)
        expire = lambda run_id=run_id, cutoff=cutoff: expire_run(sweeper, uuid.UUID(run_id), cutoff, uuid.uuid4().hex)  # noqa: E731
        status, expired = _race(db, run_id, [_decide(app, tenant, run_id), expire])
        run = wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})
        [approval] = pending(client, tenant.owner, run_id, "all")
        if status == 200:
            assert (expired, run["state"], approval["state"]) == (False, "succeeded", "decided")
        else:
            assert (status, expired, run["state"], run["error"]) == (409, True, "failed", "approval expired")
            assert approval["state"] == "expired"
        outcomes.add(status)
    assert outcomes <= {200, 409}


def test_a_decision_racing_a_cancel_leaves_a_consistent_run(app: Flask, tenant: TenantFixture, db: Database) -> None:
    client = app.test_client()

    def cancel(run_id: str) -> Callable[[], int]:
        return lambda: app.test_client().post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers).status_code

    for run_id in _suspended_runs(app, tenant, 20):
        decided, cancelled = _race(db, run_id, [_decide(app, tenant, run_id), cancel(run_id)])
        assert cancelled == 200, "a suspended or queued run can always be cancelled"
        run = wait_for_state(client, tenant.owner, run_id, {"cancelled", "succeeded"})
        [approval] = pending(client, tenant.owner, run_id, "all")
        if decided == 200:
            assert approval["state"] == "decided"
        else:
            assert (decided, approval["state"]) == (409, "cancelled")
        assert run["state"] == "cancelled"
        assert event_types(db, run_id).count("run.finished") == 1


def test_overlap_is_forced_not_hoped_for(app: Flask, tenant: TenantFixture, db: Database) -> None:
    """The harness itself: with the lock held, both requests are in flight at once, and neither finishes early."""
    [run_id] = _suspended_runs(app, tenant, 1)
    done = threading.Event()
    with ThreadPoolExecutor(2) as pool, _run_locked(db, run_id):
        futures = [pool.submit(_decide(app, tenant, run_id)) for _ in range(2)]
        wait_until(lambda: _waiting_on_run_locks(db) == 2, timeout=20, interval=0.01)
        assert not any(future.done() for future in futures)
        done.set()
    assert sorted(future.result() for future in futures) == [200, 409]


def test_two_sweepers_at_once_expire_each_run_once(
    app: Flask, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    from hango.run.expiry import expire_stale
    from tests.integration.hitl_helpers import audit_rows

    sweeper = Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db)
    runs = _suspended_runs(app, tenant, 10)
    with ThreadPoolExecutor(2) as pool, _run_locked(db, runs[0]):
        futures = [pool.submit(expire_stale, sweeper) for _ in range(2)]
        wait_until(lambda: _waiting_on_run_locks(db) == 2, timeout=20, interval=0.01)
    expired = [future.result(timeout=60) for future in futures]
    assert sum(expired) >= len(runs)
    client = app.test_client()
    approval_ids = []
    for run_id in runs:
        run = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json
        assert (run["state"], run["error"]) == ("failed", "approval expired")
        assert event_types(db, run_id).count("run.finished") == 1
        [approval] = pending(client, tenant.owner, run_id, "all")
        assert approval["state"] == "expired"
        approval_ids.append(approval["id"])
    rows = audit_rows(db, tenant.id, "approval.expire")
    # Exactly one row per expired approval: none missing, none written twice by the second sweeper.
    assert sorted(row.target_id for row in rows) == sorted(approval_ids)
    for row in rows:
        assert (row.actor_kind, row.actor_id, row.target_kind, row.outcome) == (
            "system",
            None,
            "pending_approval",
            "success",
        )
        assert row.detail == {"decided_by": None, "decision": None, "tool_name": "write_file", "tool_call_id": "w"}
