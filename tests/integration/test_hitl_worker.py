"""What a suspension holds (nothing), what a crash during an approved call does, and the beat-driven sweeper."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from flask.testing import FlaskClient
from sqlalchemy import text

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.queue import STATS_TASK
from hango.platform.runtime import Runtime
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, write_memory
from tests.support.processes import wait_until, worker, worker_answer


@pytest.fixture
def own(settings: Settings, db: Database) -> tuple[Settings, FlaskClient, Runtime]:
    own_settings = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")
    return own_settings, create_app(own_settings, db=db).test_client(), Runtime.build(own_settings, db=db)


def _stats(runtime: Runtime) -> dict[str, object]:
    stats: dict[str, object] = json.loads(worker_answer(runtime, STATS_TASK, timeout=30))
    return stats


def _open_transactions(db: Database) -> int:
    with db.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"
            )
        ).scalar_one()


def test_a_suspended_run_holds_no_slot_thread_or_connection(
    own: tuple[Settings, FlaskClient, Runtime], tenant: TenantFixture, db: Database
) -> None:
    settings, client, runtime = own
    held = create_agent(client, tenant.owner, [{"tool_calls": [write_memory(call_id="w")]}, {"text": "ok"}])
    plain = create_agent(
        client, tenant.owner, [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"text": "ok"}]
    )
    with worker(settings, concurrency=1, beat=False, name="leak"):
        suspended = start_run(client, tenant.owner, held)
        assert wait_for_state(client, tenant.owner, suspended, {"awaiting_approval"})["state"] == "awaiting_approval"
        # The only slot is free: other runs finish while the first one waits for a human.
        others = [start_run(client, tenant.owner, plain) for _ in range(3)]
        for run_id in others:
            assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
        stats = _stats(runtime)
        assert stats["connections_checked_out"] == 0
        assert not [name for name in stats["threads"] if str(name).startswith("heartbeat-")]  # type: ignore[attr-defined]
        # Other processes share the database (the session worker's beat sweeps): a transaction of theirs may be
        # caught between two statements. One the suspended run left open would stay; theirs end within moments.
        wait_until(lambda: _open_transactions(db) == 0, timeout=10, interval=0.2)
        assert decide(client, tenant.owner, suspended, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
        assert wait_for_state(client, tenant.owner, suspended, {"succeeded", "failed"})["state"] == "succeeded"


def test_the_beat_scheduled_sweeper_expires_a_stale_run(
    own: tuple[Settings, FlaskClient, Runtime], tenant: TenantFixture
) -> None:
    settings, client, _ = own
    settings = settings.replace(approval_ttl=timedelta(seconds=1), approval_sweep_interval=timedelta(seconds=0.5))
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [write_memory(call_id="w")]}])
    with worker(settings, concurrency=1, beat=True, name="sweeping"):
        run_id = start_run(client, tenant.owner, agent_id)
        run = wait_for_state(client, tenant.owner, run_id, {"failed", "succeeded"}, timeout=30)
    assert (run["state"], run["error"]) == ("failed", "approval expired")
