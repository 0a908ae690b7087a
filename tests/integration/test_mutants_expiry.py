"""The approval expiry sweeper in-process on real PostgreSQL: what it fails, what it leaves, what it records.

Runs and their approvals are written straight into the database weeks in the past, and the sweeper is given a TTL
of days, so it reaches only this module's rows and never those of tests running beside it. Written to kill the
mutants that survived mutation testing (docs/mutation-testing.md).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext
from sqlalchemy import delete, select

from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Agent, AuditEvent, PendingApproval, Run, RunEvent
from hango.kernel.models import Tenant as TenantRow
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_run, expire_stale
from hango.services import tenancy

TTL = timedelta(days=10)
NOW = datetime.now(UTC)


@pytest.fixture
def runtime(settings: Settings, db: Database) -> Runtime:
    return Runtime.build(settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}", approval_ttl=TTL), db=db)


@pytest.fixture
def owner(db: Database) -> Iterator[Principal]:
    created = tenancy.create_tenant(db, "sweeps", f"o-{uuid.uuid4().hex[:8]}@example.com")
    yield Principal(created.tenant_id, created.user_id, "owner")
    with db.transaction() as session:
        session.execute(delete(TenantRow).where(TenantRow.id == created.tenant_id))


def _run(
    db: Database, owner: Principal, *approvals: tuple[str, str, timedelta], state: str = "awaiting_approval"
) -> Run:
    """A run in ``state`` with approvals ``(tool_call_id, state, age)``."""
    with db.transaction() as session:
        agent = Agent(
            id=uuid.uuid4(),
            tenant_id=owner.tenant_id,
            name=f"bot-{uuid.uuid4().hex[:8]}",
            model={},
            created_by=owner.user_id,
        )
        session.add(agent)
        session.flush()
        run = Run(
            id=uuid.uuid4(),
            tenant_id=owner.tenant_id,
            agent_id=agent.id,
            agent_snapshot={},
            created_by=owner.user_id,
            state=state,
            awaiting_since=NOW - timedelta(days=30),
            updated_at=NOW - timedelta(days=30),
        )
        session.add(run)
        session.flush()
        session.add_all(
            PendingApproval(
                id=uuid.uuid4(),
                tenant_id=owner.tenant_id,
                run_id=run.id,
                turn=1,
                tool_call_id=call_id,
                tool_name="write_file",
                arguments={"file_path": "/memories/AGENTS.md", "content": "x"},
                allowed_decisions=["approve"],
                state=approval_state,
                decision="approve" if approval_state == "decided" else "",
                created_at=NOW - age,
            )
            for call_id, approval_state, age in approvals
        )
    return run


def _reread(db: Database, run: Run) -> tuple[Run, dict[str, PendingApproval], list[tuple[str, dict[str, Any]]]]:
    with db.transaction() as session:
        row = session.get(Run, run.id)
        assert row is not None
        rows = session.scalars(select(PendingApproval).where(PendingApproval.run_id == run.id)).all()
        events = session.scalars(select(RunEvent).where(RunEvent.run_id == run.id).order_by(RunEvent.seq)).all()
        found = row, {r.tool_call_id: r for r in rows}, [(e.type, e.data) for e in events]
        session.expunge_all()
    return found


def _audit(db: Database, owner: Principal) -> list[AuditEvent]:
    with db.transaction() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.tenant_id == owner.tenant_id, AuditEvent.action == "approval.expire")
        ).all()
        session.expunge_all()
    return list(rows)


def _untouched(db: Database, run: Run, **states: str) -> None:
    """The run, its approvals (``tool_call_id=state``) and its event log are as the test wrote them."""
    row, approvals, events = _reread(db, run)
    assert (row.state, row.error, row.finished_at) == (run.state, None, None)
    assert (row.awaiting_since, row.updated_at) == (run.awaiting_since, run.updated_at)
    assert {call_id: approval.state for call_id, approval in approvals.items()} == states
    assert events == []


@pytest.mark.usefixtures("far_east")
def test_a_stale_run_is_failed_with_its_pending_approvals_expired_and_audited(
    runtime: Runtime, db: Database, owner: Principal, caplog: pytest.LogCaptureFixture
) -> None:
    run = _run(
        db,
        owner,
        ("old", "pending", timedelta(days=20)),
        ("young", "pending", timedelta(days=1)),
        ("done", "decided", timedelta(days=25)),
    )
    before = datetime.now(UTC)
    with caplog.at_level(logging.INFO, logger="hango.run.expiry"):
        assert expire_stale(runtime) == 1
    after = datetime.now(UTC)

    failed, approvals, events = _reread(db, run)
    assert (failed.state, failed.error, failed.awaiting_since) == ("failed", "approval expired", None)
    assert failed.finished_at is not None
    assert before <= failed.finished_at <= after
    assert failed.updated_at == failed.finished_at
    # Every pending call of the run expires with it, the young one too; a decided one stays decided.
    assert {c: a.state for c, a in approvals.items()} == {"old": "expired", "young": "expired", "done": "decided"}
    assert events == [("run.finished", {"state": "failed", "error": "approval expired"})]

    audit = {row.target_id: row for row in _audit(db, owner)}
    assert set(audit) == {str(approvals["old"].id), str(approvals["young"].id)}
    for call_id in ("old", "young"):
        row = audit[str(approvals[call_id].id)]
        assert (row.tenant_id, row.actor_kind, row.actor_id, row.outcome) == (
            owner.tenant_id,
            "system",
            None,
            "success",
        )
        assert (row.action, row.target_kind) == ("approval.expire", "pending_approval")
        assert row.detail == {"decided_by": None, "decision": None, "tool_name": "write_file", "tool_call_id": call_id}
    [trace_id] = {row.trace_id for row in audit.values()}
    assert trace_id is not None
    assert re.fullmatch("[0-9a-f]{32}", trace_id)

    logged = [r for r in caplog.records if r.getMessage() == "approval expired"]
    assert sorted((r.run_id, r.tool, r.tool_call_id, r.approval_id) for r in logged) == [  # type: ignore[attr-defined]
        (str(run.id), "write_file", call_id, str(approvals[call_id].id)) for call_id in ("old", "young")
    ]


def test_each_sweep_has_its_own_trace_id_or_the_active_ones(runtime: Runtime, db: Database, owner: Principal) -> None:
    first = _run(db, owner, ("a", "pending", timedelta(days=20)))
    assert expire_stale(runtime) == 1
    second = _run(db, owner, ("b", "pending", timedelta(days=20)))
    active = SpanContext(trace_id=0xABC, span_id=0x1, is_remote=False)
    with trace.use_span(NonRecordingSpan(active)):
        assert expire_stale(runtime) == 1
    by_target = {row.target_id: row.trace_id for row in _audit(db, owner)}
    first_id = _reread(db, first)[1]["a"].id
    second_id = _reread(db, second)[1]["b"].id
    assert by_target[str(second_id)] == format(0xABC, "032x")
    assert by_target[str(first_id)] != by_target[str(second_id)]


def test_a_sweep_fails_at_most_batch_runs_oldest_first(runtime: Runtime, db: Database, owner: Principal) -> None:
    oldest = _run(db, owner, ("a", "pending", timedelta(days=40)))
    middle = _run(db, owner, ("b", "pending", timedelta(days=30)))
    newest = _run(db, owner, ("c", "pending", timedelta(days=20)))
    assert expire_stale(runtime, batch=1) == 1
    assert [_reread(db, run)[0].state for run in (oldest, middle, newest)] == ["failed", *["awaiting_approval"] * 2]
    assert expire_stale(runtime, batch=2) == 2
    assert [_reread(db, run)[0].state for run in (middle, newest)] == ["failed", "failed"]
    assert expire_stale(runtime) == 0


@pytest.mark.usefixtures("far_east")
def test_runs_within_the_ttl_or_without_a_stale_pending_call_are_left_alone(
    runtime: Runtime, db: Database, owner: Principal
) -> None:
    young = _run(db, owner, ("a", "pending", TTL - timedelta(hours=1)))
    answered = _run(db, owner, ("a", "decided", timedelta(days=20)), ("b", "expired", timedelta(days=20)))
    assert expire_stale(runtime) == 0
    _untouched(db, young, a="pending")
    _untouched(db, answered, a="decided", b="expired")
    assert _audit(db, owner) == []


def test_expire_run_fails_only_a_waiting_run_that_is_still_stale(
    db: Database, owner: Principal, runtime: Runtime
) -> None:
    cutoff = NOW - TTL
    queued = _run(db, owner, ("a", "pending", timedelta(days=20)), state="queued")
    assert expire_run(runtime, queued.id, cutoff, "t") is False
    _untouched(db, queued, a="pending")
    assert expire_run(runtime, uuid.uuid4(), cutoff, "t") is False
    # Exactly at the cutoff is not older than it.
    edge = _run(db, owner, ("a", "pending", NOW - cutoff))
    assert expire_run(runtime, edge.id, cutoff, "t") is False
    _untouched(db, edge, a="pending")
    assert expire_run(runtime, edge.id, cutoff + timedelta(microseconds=1), "t") is True
    assert _reread(db, edge)[0].state == "failed"
    assert [row.trace_id for row in _audit(db, owner)] == ["t"]
    # A stale approval that is no longer pending does not make the run stale; a young pending one does not either.
    answered = _run(db, owner, ("a", "decided", timedelta(days=20)), ("b", "pending", timedelta(days=1)))
    assert expire_run(runtime, answered.id, cutoff, "t") is False
    _untouched(db, answered, a="decided", b="pending")
    # Failed already: a second sweep of the same run does nothing.
    assert expire_run(runtime, edge.id, cutoff + timedelta(days=1), "t") is False
    assert len(_audit(db, owner)) == 1
