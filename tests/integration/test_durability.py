"""Durability with real processes: workers killed with SIGKILL, frozen workers, duplicate deliveries, lost messages.

Each test has a queue of its own, so only the workers it starts can take its runs.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Run, RunEvent
from hango.platform.db import Database
from hango.platform.queue import RUN_TASK
from hango.platform.runtime import Runtime
from hango.run import service
from tests.integration.conftest import TenantFixture, create_agent
from tests.support.processes import logged, wait_until, worker, worker_log_name
from tests.support.tools import executions

pytestmark = pytest.mark.slow


@pytest.fixture
def isolated(settings: Settings, db: Database) -> Iterator[tuple[Settings, Runtime]]:
    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")
    return own, Runtime.build(own, db=db)


def _owner(tenant: TenantFixture) -> Principal:
    return Principal(tenant.id, tenant.owner.user_id, "owner")


def _run(db: Database, run_id: uuid.UUID) -> Run:
    with db.transaction() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run


def _events(db: Database, run_id: uuid.UUID) -> list[tuple[str, dict[str, Any]]]:
    with db.transaction() as session:
        rows = session.scalars(select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.seq))
        return [(row.type, row.data) for row in rows]


def _started(db: Database, run_id: uuid.UUID, tool: str) -> bool:
    return any(t == "tool.started" and data["tool_name"] == tool for t, data in _events(db, run_id))


def _tool_results(client: FlaskClient, tenant: TenantFixture, run_id: uuid.UUID) -> list[dict[str, Any]]:
    messages = client.get(f"/v1/runs/{run_id}/messages", headers=tenant.owner.headers).json["items"]
    return [block for m in messages if m["role"] == "tool" for block in m["content"]]


def _crash_script(before: str, after: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"id": "c1", "name": "count", "args": {"key": before}}]},
        {"tool_calls": [{"id": "s1", "name": "sleep", "args": {"seconds": 20}}]},
        {"tool_calls": [{"id": "c2", "name": "count", "args": {"key": after}}]},
        {"text": "finished"},
    ]


def test_a_killed_worker_leaves_a_run_the_reconciler_finishes(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime]
) -> None:
    settings, runtime = isolated
    before, after = uuid.uuid4().hex, uuid.uuid4().hex
    agent_id = uuid.UUID(create_agent(client, tenant.owner, _crash_script(before, after)))
    run = service.create_run(runtime, _owner(tenant), agent_id, [user_message("go")])

    with worker(settings, concurrency=1, beat=False, name="doomed") as doomed:
        wait_until(lambda: _started(db, run.id, "sleep"), timeout=30)
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=10)
    assert _run(db, run.id).state == "running"

    with worker(settings, concurrency=1, beat=True, name="rescuer"):
        wait_until(lambda: _run(db, run.id).state in {"succeeded", "failed"}, timeout=60)

    final = _run(db, run.id)
    assert final.state == "succeeded", final.error
    assert executions(before) == 1, "a completed call ran again after the crash"
    assert executions(after) == 1
    sleep_result = next(r for r in _tool_results(client, tenant, run.id) if r["tool_use_id"] == "s1")
    assert sleep_result == {
        "type": "tool_result",
        "tool_use_id": "s1",
        "content": "tool call interrupted",
        "is_error": True,
    }
    assert ("run.queued", {"reason": "worker lost", "attempt": 2}) in _events(db, run.id)


def test_a_frozen_worker_cannot_write_after_its_run_was_taken_over(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime]
) -> None:
    settings, runtime = isolated
    before, after = uuid.uuid4().hex, uuid.uuid4().hex
    script = _crash_script(before, after)
    script[1]["tool_calls"][0]["args"]["seconds"] = 2
    agent_id = uuid.UUID(create_agent(client, tenant.owner, script))
    run = service.create_run(runtime, _owner(tenant), agent_id, [user_message("go")])

    with worker(settings, concurrency=1, beat=False, name="frozen") as frozen:
        wait_until(lambda: _started(db, run.id, "sleep"), timeout=30)
        os.killpg(frozen.pid, signal.SIGSTOP)
        try:
            with worker(settings, concurrency=1, beat=True, name="successor"):
                wait_until(lambda: _run(db, run.id).state == "succeeded", timeout=60)
        finally:
            os.killpg(frozen.pid, signal.SIGCONT)
        # The frozen worker wakes up, finishes its sleep and tries to write its batch: the lease fence refuses it.
        log = worker_log_name(settings, "frozen")
        wait_until(lambda: logged(log, "run stopped", str(run.id)) or logged(log, "run finished", str(run.id)))
        assert logged(log, "run stopped", str(run.id))
        seqs = [m["seq"] for m in client.get(f"/v1/runs/{run.id}/messages", headers=tenant.owner.headers).json["items"]]
    assert executions(after) == 1
    assert _run(db, run.id).state == "succeeded"
    results = _tool_results(client, tenant, run.id)
    assert [r["tool_use_id"] for r in results] == ["c1", "s1", "c2"], "a second worker wrote into the run"
    assert seqs == sorted(set(seqs))


def test_duplicate_deliveries_execute_the_run_once(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime]
) -> None:
    settings, runtime = isolated
    key = uuid.uuid4().hex
    agent_id = uuid.UUID(
        create_agent(client, tenant.owner, [{"tool_calls": [{"name": "count", "args": {"key": key}}]}])
    )
    run = service.create_run(runtime, _owner(tenant), agent_id, [user_message("go")])
    celery = runtime.queue._celery
    for copy in range(4):
        celery.send_task(RUN_TASK, args=[str(run.id)], task_id=f"duplicate-{copy}-{run.id}", queue=settings.queue)

    with worker(settings, concurrency=3, beat=False, name="duplicates"):
        wait_until(lambda: _run(db, run.id).state == "succeeded", timeout=30)
        wait_until(lambda: executions(key) >= 1)
    assert executions(key) == 1
    started = [t for t, _ in _events(db, run.id) if t == "run.started"]
    assert len(started) == 1


def test_a_run_whose_message_was_lost_is_enqueued_again(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime], settings: Settings
) -> None:
    own, _ = isolated
    # Enqueue onto a queue nobody consumes: the message is as good as lost.
    lost = Runtime.build(own.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}"), db=db)
    agent_id = uuid.UUID(create_agent(client, tenant.owner, [{"text": "hello"}]))
    run = service.create_run(lost, _owner(tenant), agent_id, [user_message("go")])
    with worker(own, concurrency=1, beat=True, name="reconciling"):
        wait_until(lambda: _run(db, run.id).state == "succeeded", timeout=30)


def test_a_run_that_keeps_losing_workers_fails_with_a_reason(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime]
) -> None:
    settings, runtime = isolated
    settings = settings.replace(max_run_attempts=1)
    agent_id = uuid.UUID(
        create_agent(client, tenant.owner, [{"tool_calls": [{"name": "sleep", "args": {"seconds": 20}}]}])
    )
    run = service.create_run(runtime, _owner(tenant), agent_id, [user_message("go")])
    with worker(settings, concurrency=1, beat=False, name="doomed-once") as doomed:
        wait_until(lambda: _started(db, run.id, "sleep"), timeout=30)
        os.killpg(doomed.pid, signal.SIGKILL)
    with worker(settings, concurrency=1, beat=True, name="judge"):
        wait_until(lambda: _run(db, run.id).state == "failed", timeout=30)
    assert _run(db, run.id).error == "the worker running this run was lost 1 times"
    assert _events(db, run.id)[-1] == ("run.finished", {"state": "failed", "error": _run(db, run.id).error})


def test_a_killed_workers_run_is_taken_back_by_the_reconciler_once_its_lease_lapses(
    client: FlaskClient, tenant: TenantFixture, db: Database, isolated: tuple[Settings, Runtime]
) -> None:
    # A short lease and reconciler period, so the run comes back within seconds (the defaults keep lease + one period
    # + a worker's pick-up under 20 s: tests/unit/test_config.py).
    settings, runtime = isolated
    settings = settings.replace(run_lease=timedelta(seconds=4), reconcile_interval=timedelta(seconds=1))
    agent_id = uuid.UUID(
        create_agent(client, tenant.owner, [{"tool_calls": [{"name": "sleep", "args": {"seconds": 30}}]}])
    )
    run = service.create_run(runtime, _owner(tenant), agent_id, [user_message("go")])
    with worker(settings, concurrency=1, beat=False, name="killed") as killed:
        wait_until(lambda: _started(db, run.id, "sleep"), timeout=30)
        with worker(settings, concurrency=1, beat=True, name="standby"):
            time.sleep(1)  # the standby is consuming before the kill, so its start-up is not counted
            os.killpg(killed.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            # The second claim's event, not the state: once claimed, the repaired run may finish within milliseconds.
            wait_until(lambda: ("run.started", {"attempt": 2}) in _events(db, run.id), timeout=30, interval=0.05)
            elapsed = time.monotonic() - killed_at
    # Taken back by the reconciler once the lease lapsed: nothing else moves a running run whose worker is gone.
    assert ("run.queued", {"reason": "worker lost", "attempt": 2}) in _events(db, run.id)
    # How long that took is measured, not asserted (a loaded machine stretches it): docs/benchmarks.md has figures.
    promise = (settings.run_lease + settings.reconcile_interval).total_seconds()
    print(f"the run ran again {elapsed:.1f}s after the kill; lease + one reconciler period is {promise:.0f}s")
