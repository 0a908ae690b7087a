"""The run state machine under real concurrency: every transition racing another on one run has one winner.

Each round holds the run's row lock from a third connection until every contender is proven to be waiting on
it, then lets them all go at once, so the statements really overlap (not merely run one after the other).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, text

from hango.agent.loop import RunStopped
from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.errors import Conflict
from hango.kernel.models import PendingApproval, Run, RunEvent
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import service, transitions
from hango.run.transitions import Lease
from hango.store import runs as run_store
from tests.integration.conftest import TenantFixture, create_agent
from tests.support.processes import wait_until

ROUNDS = 15
LEASE = timedelta(seconds=30)


@pytest.fixture
def runtime(settings: Settings, db: Database) -> Runtime:
    # A queue no worker listens on: only the transitions called here move these runs.
    return Runtime.build(settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}"), db=db)


@pytest.fixture
def agent_id(client: FlaskClient, tenant: TenantFixture) -> uuid.UUID:
    return uuid.UUID(create_agent(client, tenant.owner, [{"text": "never driven"}]))


def _queued(runtime: Runtime, tenant: TenantFixture, agent_id: uuid.UUID) -> Run:
    principal = Principal(tenant.id, tenant.owner.user_id, "owner")
    return service.create_run(runtime, principal, agent_id, [user_message("go")])


def _running(runtime: Runtime, tenant: TenantFixture, agent_id: uuid.UUID, owner: str = "w1") -> Run:
    run = _queued(runtime, tenant, agent_id)
    with unit_of_work(runtime) as work:
        claimed = transitions.claim(work, run.id, owner, LEASE)
    assert claimed is not None
    return claimed


def _awaiting(runtime: Runtime, tenant: TenantFixture, agent_id: uuid.UUID) -> Run:
    run = _running(runtime, tenant, agent_id)
    approval = PendingApproval(
        id=uuid.uuid4(),
        tenant_id=run.tenant_id,
        run_id=run.id,
        turn=1,
        tool_call_id="c1",
        tool_name="write_file",
        arguments={},
        allowed_decisions=["approve", "reject"],
    )
    with unit_of_work(runtime) as work:
        transitions.suspend(work, Lease(run.id, "w1"), [approval], {"version": 1, "private": {}}, None)
    return _run(runtime.db, run.id)


@contextmanager
def _row_locked(db: Database, run_id: uuid.UUID, prepare: str | None = None) -> Iterator[None]:
    """Hold the run's row lock; ``prepare`` changes the row under that lock, committed as the contenders go."""
    with db.engine.connect() as connection, connection.begin():
        connection.execute(text("SELECT id FROM runs WHERE id = :id FOR UPDATE"), {"id": run_id})
        if prepare:
            connection.execute(text(prepare), {"id": run_id})
        yield


def _waiting_on_locks(db: Database) -> int:
    with db.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE '%runs%'"
            )
        ).scalar_one()


def _race(
    db: Database, run_id: uuid.UUID, contenders: list[Callable[[], Any]], prepare: str | None = None
) -> list[Any]:
    """Every contender's outcome — its return value or the exception it raised — with the overlap forced."""

    def outcome(contender: Callable[[], Any]) -> Any:
        try:
            return contender()
        except (Conflict, RunStopped) as exc:
            return exc

    with ThreadPoolExecutor(len(contenders)) as pool:
        with _row_locked(db, run_id, prepare):
            futures = [pool.submit(outcome, contender) for contender in contenders]
            wait_until(lambda: _waiting_on_locks(db) == len(contenders), timeout=20, interval=0.01)
        return [future.result(timeout=30) for future in futures]


def _in_work(runtime: Runtime, move: Callable[[Any], Any]) -> Callable[[], Any]:
    def contender() -> Any:
        with unit_of_work(runtime) as work:
            return move(work)

    return contender


def _run(db: Database, run_id: uuid.UUID) -> Run:
    with db.transaction() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run


def _event_types(db: Database, run_id: uuid.UUID) -> list[str]:
    with db.transaction() as session:
        return list(session.scalars(select(RunEvent.type).where(RunEvent.run_id == run_id).order_by(RunEvent.seq)))


def test_concurrent_claims_of_one_queued_run_have_one_winner(
    runtime: Runtime, db: Database, tenant: TenantFixture, agent_id: uuid.UUID
) -> None:
    for _ in range(ROUNDS):
        run = _queued(runtime, tenant, agent_id)
        owners = [f"w{index}" for index in range(4)]
        claims = [
            _in_work(runtime, lambda work, o=owner, r=run: transitions.claim(work, r.id, o, LEASE)) for owner in owners
        ]
        results = _race(db, run.id, claims)
        winners = [owner for owner, result in zip(owners, results, strict=True) if result is not None]
        assert len(winners) == 1, results
        assert _run(db, run.id).lease_owner == winners[0]
        assert _event_types(db, run.id).count("run.started") == 1


def test_a_finish_racing_a_cancel_has_one_winner_and_one_finished_event(
    runtime: Runtime, db: Database, tenant: TenantFixture, agent_id: uuid.UUID
) -> None:
    seen = set()
    for _ in range(ROUNDS):
        run = _running(runtime, tenant, agent_id)
        finish = _in_work(runtime, lambda work, r=run: transitions.finish(work, Lease(r.id, "w1"), "succeeded", None))
        cancel = _in_work(runtime, lambda work, r=run: transitions.cancel(work, r))
        finished, cancelled = _race(db, run.id, [finish, cancel])
        # The loser raised (the finish's run counters, the cancel's run row came back to the winner).
        assert isinstance(finished, Exception) != isinstance(cancelled, Exception), (finished, cancelled)
        winner = "cancelled" if isinstance(finished, Exception) else "succeeded"
        assert isinstance(cancelled if winner == "succeeded" else finished, Conflict | RunStopped)
        final = _run(db, run.id)
        assert (final.state, final.lease_owner, final.lease_expires_at) == (winner, None, None)
        assert final.finished_at is not None
        assert _event_types(db, run.id).count("run.finished") == 1
        seen.add(winner)
    assert seen, "no round decided"


def test_a_decision_an_expiry_and_a_cancel_of_one_waiting_run_end_in_one_coherent_state(
    runtime: Runtime, db: Database, tenant: TenantFixture, agent_id: uuid.UUID
) -> None:
    # A decision and an expiry exclude each other, and so do an expiry and a cancel; a cancel that comes after a
    # decision is legitimate (a queued run may be cancelled) and ends the run cancelled.
    allowed = {("requeue_decided", "cancel"): "cancelled", ("cancel",): "cancelled", ("expire",): "failed"}
    seen = set()
    for _ in range(ROUNDS):
        run = _awaiting(runtime, tenant, agent_id)
        contenders = [
            _in_work(runtime, lambda work, r=run: transitions.requeue_decided(work, r, [])),
            _in_work(runtime, lambda work, r=run: transitions.expire(work, r, "approval expired")),
            _in_work(runtime, lambda work, r=run: transitions.cancel(work, r)),
        ]
        results = _race(db, run.id, contenders)
        names = ("requeue_decided", "expire", "cancel")
        won = tuple(name for name, result in zip(names, results, strict=True) if isinstance(result, Run | list))
        assert won in allowed, results
        final = _run(db, run.id)
        assert final.state == allowed[won]
        assert final.awaiting_since is None
        types = _event_types(db, run.id)
        assert types.count("run.finished") == 1
        assert types.count("run.queued") == 1 + ("requeue_decided" in won)
        seen.add(won)
    assert seen, "no round decided"


def test_a_heartbeat_racing_the_reclaim_of_its_expired_lease_has_one_winner(
    runtime: Runtime, db: Database, tenant: TenantFixture, agent_id: uuid.UUID
) -> None:
    outcomes = set()
    for _ in range(ROUNDS):
        run = _running(runtime, tenant, agent_id)

        def beat(r: Run = run) -> bool:
            with db.transaction() as session:
                return transitions.extend_lease(session, Lease(r.id, "w1"), LEASE)

        def reclaim_locked(work: Any, r: Run = run) -> Any:
            # As the reconciler does: lock the row, then try the transition.
            locked = run_store.lock_run(work.session, r.id)
            assert locked is not None
            return transitions.reclaim_lost(work, locked, max_attempts=3)

        reclaim = _in_work(runtime, reclaim_locked)
        # The lease ends under the lock, so no reconciler (the session worker's shares this database) can take the
        # run before the two contenders do.
        expire = "UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = :id"
        extended, reclaimed = _race(db, run.id, [beat, reclaim], prepare=expire)
        assert extended != (reclaimed == "requeued"), (extended, reclaimed)
        final = _run(db, run.id)
        if extended:
            assert (final.state, final.lease_owner, final.attempts) == ("running", "w1", 0)
        else:
            assert (final.state, final.lease_owner, final.attempts) == ("queued", None, 1)
        outcomes.add(extended)
    assert outcomes, "no round decided"
