"""The run row's conditional UPDATE is built once per shape (:func:`hango.store.runs.move`): what a call binds must
be that call's values, never a value left in a statement built for an earlier one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, text

from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Run, RunState
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import service, transitions
from hango.store import runs as run_store
from hango.store.runs import Add
from tests.integration.conftest import TenantFixture, create_agent

RUNNING: tuple[RunState, ...] = ("running",)


@pytest.fixture
def running(settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture) -> tuple[Runtime, Run]:
    # A queue no worker listens on: only this test moves the run.
    runtime = Runtime.build(settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}"), db=db)
    agent_id = uuid.UUID(create_agent(client, tenant.owner, [{"text": "never driven"}]))
    principal = Principal(tenant.id, tenant.owner.user_id, "owner")
    run = service.create_run(runtime, principal, agent_id, [user_message("go")])
    with unit_of_work(runtime) as work:
        claimed = transitions.claim(work, run.id, "w1", timedelta(seconds=30))
    assert claimed is not None
    return runtime, claimed


def test_one_shape_reuses_its_statement_and_binds_each_calls_values(running: tuple[Runtime, Run]) -> None:
    runtime, run = running
    counters = []
    for amount, stamp in ((2, datetime(2030, 1, 1, tzinfo=UTC)), (3, datetime(2031, 1, 1, tzinfo=UTC))):
        with runtime.db.transaction() as session:
            moved = run_store.advance(session, run.id, "w1", {"message_seq": Add(amount), "updated_at": stamp})
            assert moved is not None
            counters.append(moved.message_seq)
            assert session.get(Run, run.id, populate_existing=True).updated_at == stamp  # type: ignore[union-attr]
    assert counters == [run.message_seq + 2, run.message_seq + 5]
    values = {"message_seq": Add(1), "updated_at": datetime.now(UTC)}
    first = run_store._guarded(run.id, RUNNING, values, "w1", None, 0, returning=None)[0]
    again = run_store._guarded(uuid.uuid4(), RUNNING, values, "w2", None, 0, returning=None)[0]
    assert first is again


def test_a_value_given_as_sql_builds_its_statement_each_time(running: tuple[Runtime, Run]) -> None:
    runtime, run = running
    values = {"updated_at": func.now()}
    first = run_store._guarded(run.id, RUNNING, values, "w1", None, 0, returning=None)[0]
    again = run_store._guarded(run.id, RUNNING, values, "w1", None, 0, returning=None)[0]
    assert first is not again
    with runtime.db.transaction() as session:
        assert run_store.advance(session, run.id, "w1", values) is not None


def test_the_statements_kept_are_bounded(monkeypatch: pytest.MonkeyPatch, running: tuple[Runtime, Run]) -> None:
    _, run = running
    monkeypatch.setattr(run_store, "_STATEMENTS", {})
    monkeypatch.setattr(run_store, "_MOST_STATEMENTS", 2)
    for column in ("updated_at", "lease_expires_at", "awaiting_since", "finished_at"):
        run_store._guarded(run.id, RUNNING, {column: None}, None, None, 0, returning=None)
    assert len(run_store._STATEMENTS) == 2


def test_none_is_sql_null_in_a_json_column_too(running: tuple[Runtime, Run]) -> None:
    runtime, run = running
    with runtime.db.transaction() as session:
        assert run_store.advance(session, run.id, "w1", {"trace_context": {"trace_id": "t"}}) is not None
    with runtime.db.transaction() as session:
        assert run_store.advance(session, run.id, "w1", {"trace_context": None}) is not None
        stored = session.execute(text("SELECT trace_context IS NULL FROM runs WHERE id = :id"), {"id": run.id})
        assert stored.scalar_one() is True
