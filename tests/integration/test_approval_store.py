"""The approval store's scoped operations on real PostgreSQL: each function reaches its tenant's and run's rows only.

Two tenants, each with runs created by different people and approvals in every state. Every function of
``hango.store.approvals`` is called as, or on behalf of, one of them, and must see or change exactly its own rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import Agent, PendingApproval, Run, SubagentCall
from hango.kernel.models import Tenant as TenantRow
from hango.kernel.pagination import PageRequest
from hango.platform.db import Database
from hango.services import tenancy
from hango.store import approvals

# Well inside the approval TTL, so the session worker's sweeper leaves these runs alone while a test reads them.
LONG_AGO = datetime.now(UTC) - timedelta(hours=3)


@dataclass
class Tenant:
    """A tenant with an owner, two members, an agent and a run by each member."""

    owner: Principal
    alice: Principal
    bob: Principal
    alice_run: Run
    bob_run: Run
    rows: dict[str, PendingApproval] = field(default_factory=dict)


def _principal(db: Database, owner: Principal | None = None) -> Principal:
    email = f"p-{uuid.uuid4().hex[:8]}@example.com"
    if owner is None:
        created = tenancy.create_tenant(db, "t", email)
        return Principal(created.tenant_id, created.user_id, "owner")
    member = tenancy.create_member(db, owner, email, "member")
    return Principal(owner.tenant_id, member.membership.user_id, "member")


def _run(db: Database, owner: Principal, creator: Principal) -> Run:
    with db.transaction() as session:
        agent = Agent(
            id=uuid.uuid4(),
            tenant_id=owner.tenant_id,
            name=f"bot-{uuid.uuid4().hex[:8]}",
            model={"provider": "scripted"},
            created_by=owner.user_id,
        )
        session.add(agent)
        session.flush()
        run = Run(
            id=uuid.uuid4(),
            tenant_id=owner.tenant_id,
            agent_id=agent.id,
            agent_snapshot={},
            created_by=creator.user_id,
            state="awaiting_approval",
        )
        session.add(run)
    return run


def _approval(run: Run, call_id: str, state: str, minutes: int, child: uuid.UUID | None = None) -> PendingApproval:
    return PendingApproval(
        id=uuid.uuid4(),
        tenant_id=run.tenant_id,
        run_id=run.id,
        turn=1,
        tool_call_id=call_id,
        tool_name="write_file",
        arguments={"file_path": "/memories/AGENTS.md", "content": call_id},
        allowed_decisions=["approve", "reject"],
        state=state,
        decision="approve" if state == "decided" else "",
        subagent_call_id=child,
        created_at=LONG_AGO + timedelta(minutes=minutes),
    )


def _tenant(db: Database, offset: int) -> Tenant:
    owner = _principal(db)
    alice, bob = _principal(db, owner), _principal(db, owner)
    tenant = Tenant(owner, alice, bob, _run(db, owner, alice), _run(db, owner, bob))
    child = SubagentCall(
        id=uuid.uuid4(),
        tenant_id=owner.tenant_id,
        run_id=tenant.alice_run.id,
        tool_call_id="task",
        subagent_type="researcher",
        depth=1,
    )
    with db.transaction() as session:
        session.add(child)
        session.flush()
        tenant.rows = {
            "alice_pending": _approval(tenant.alice_run, "p1", "pending", offset + 1),
            "alice_pending_2": _approval(tenant.alice_run, "p2", "pending", offset + 3),
            "alice_decided": _approval(tenant.alice_run, "d1", "decided", offset + 2),
            "alice_child_decided": _approval(tenant.alice_run, "d2", "decided", offset + 4, child.id),
            "alice_expired": _approval(tenant.alice_run, "e1", "expired", offset + 5),
            "bob_pending": _approval(tenant.bob_run, "p1", "pending", offset + 6),
            "bob_decided": _approval(tenant.bob_run, "d1", "decided", offset + 7),
        }
        session.add_all(tenant.rows.values())
    return tenant


@pytest.fixture
def two(db: Database) -> Iterator[tuple[Tenant, Tenant]]:
    tenants = _tenant(db, 0), _tenant(db, 100)
    yield tenants
    # Leave no waiting runs behind for the sweepers of later tests.
    with db.transaction() as session:
        session.execute(delete(TenantRow).where(TenantRow.id.in_([t.owner.tenant_id for t in tenants])))


def _ids(tenant: Tenant, *names: str) -> list[uuid.UUID]:
    return [tenant.rows[name].id for name in names]


def _forged(run: Run, tenant_id: uuid.UUID) -> Run:
    """The same run id claimed by another tenant: what a bug passing the wrong tenant's run would look like."""
    return Run(id=run.id, tenant_id=tenant_id, agent_id=run.agent_id, agent_snapshot={}, created_by=run.created_by)


def _list_for_run(db: Database, principal: Principal, run: Run, state: str) -> list[uuid.UUID]:
    with db.transaction() as session:
        return [row.id for row in approvals.list_for_run(session, principal, run.id, state, PageRequest()).items]


def _queue(db: Database, principal: Principal, state: str) -> list[uuid.UUID]:
    with db.transaction() as session:
        return [row.id for row in approvals.list_for_tenant(session, principal, state, PageRequest()).items]


def test_list_for_run_shows_a_visible_runs_approvals_oldest_first(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, _ = two
    pending = _ids(a, "alice_pending", "alice_pending_2")
    everything = _ids(a, "alice_pending", "alice_decided", "alice_pending_2", "alice_child_decided", "alice_expired")
    for viewer in (a.owner, a.alice):
        assert _list_for_run(db, viewer, a.alice_run, "pending") == pending
        assert _list_for_run(db, viewer, a.alice_run, "all") == everything
        assert _list_for_run(db, viewer, a.alice_run, "expired") == _ids(a, "alice_expired")


def test_list_for_run_hides_another_members_and_another_tenants_runs(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, b = two
    for viewer in (a.bob, b.owner, b.alice):
        with pytest.raises(NotFound):
            _list_for_run(db, viewer, a.alice_run, "all")
    # A principal naming its own tenant but another tenant's user id still sees nothing of A.
    impostor = Principal(b.owner.tenant_id, a.owner.user_id, "owner")
    with pytest.raises(NotFound):
        _list_for_run(db, impostor, a.alice_run, "all")


def test_the_tenant_queue_holds_exactly_the_tenants_approvals_and_a_members_own(
    db: Database, two: tuple[Tenant, Tenant]
) -> None:
    a, b = two
    for tenant in (a, b):
        assert _queue(db, tenant.owner, "pending") == _ids(tenant, "alice_pending", "alice_pending_2", "bob_pending")
        assert _queue(db, tenant.alice, "pending") == _ids(tenant, "alice_pending", "alice_pending_2")
        assert _queue(db, tenant.bob, "pending") == _ids(tenant, "bob_pending")
        assert _queue(db, tenant.bob, "all") == _ids(tenant, "bob_pending", "bob_decided")
        assert _queue(db, tenant.owner, "decided") == _ids(
            tenant, "alice_decided", "alice_child_decided", "bob_decided"
        )
        assert len(_queue(db, tenant.owner, "all")) == len(tenant.rows)


def test_locked_with_approvals_locks_a_visible_run_and_reads_every_approval_oldest_first(
    db: Database, two: tuple[Tenant, Tenant]
) -> None:
    a, b = two
    everything = _ids(a, "alice_pending", "alice_decided", "alice_pending_2", "alice_child_decided", "alice_expired")
    with db.transaction() as session:
        run, rows = approvals.locked_with_approvals(session, a.owner, a.alice_run.id)
        assert (run.id, [row.id for row in rows]) == (a.alice_run.id, everything)
        with db.engine.connect() as other, pytest.raises(OperationalError, match="could not obtain lock"):
            other.execute(text("SELECT id FROM runs WHERE id = :id FOR UPDATE NOWAIT"), {"id": run.id})
    for viewer in (a.bob, b.owner, Principal(b.owner.tenant_id, a.owner.user_id, "owner")):
        with db.transaction() as session, pytest.raises(NotFound):
            approvals.locked_with_approvals(session, viewer, a.alice_run.id)


def test_locked_with_approvals_finds_a_run_that_has_none(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, _ = two
    with Session(db.engine) as session:  # rolled back: the fixture's rows stay
        session.execute(delete(PendingApproval).where(PendingApproval.run_id == a.bob_run.id))
        run, rows = approvals.locked_with_approvals(session, a.bob, a.bob_run.id)
        assert (run.id, rows) == (a.bob_run.id, [])
        session.rollback()


def test_recorded_decisions_are_stored_and_read_as_stored(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, _ = two
    now = datetime.now(UTC)
    approve = {"decision": "approve", "decision_args": None, "decision_message": "", "decided_by": a.owner.user_id}
    edit = {**approve, "decision": "edit", "decision_args": {"file_path": "/memories/y"}}
    pending, other = a.rows["alice_pending"], a.rows["alice_pending_2"]
    with Session(db.engine) as session:  # rolled back: the fixture's rows stay
        rows = [session.get(PendingApproval, row.id) for row in (pending, other)]
        assert rows[0] is not None
        assert rows[1] is not None
        approvals.record_decisions(
            session, [(rows[0], {**approve, "decided_at": now}), (rows[1], {**edit, "decided_at": now})]
        )
        assert not session.dirty  # the loaded rows read as stored: nothing left to flush
        stored = session.execute(
            text(
                "SELECT id, state, decision, decision_args IS NULL, decision_args->>'file_path' "
                "FROM pending_approvals WHERE id IN (:a, :b)"
            ),
            {"a": pending.id, "b": other.id},
        )
        # An approval's arguments are SQL NULL, not JSON null; an edit's are the object.
        assert sorted(tuple(row) for row in stored) == sorted(
            [(pending.id, "decided", "approve", True, None), (other.id, "decided", "edit", False, "/memories/y")]
        )
        assert (rows[0].state, rows[1].decision_args) == ("decided", {"file_path": "/memories/y"})
        session.rollback()


def test_decided_unanswered_is_per_loop_and_per_tenant(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, b = two
    child = a.rows["alice_child_decided"].subagent_call_id
    with db.transaction() as session:
        top = [row.id for row in approvals.decided_unanswered(session, a.alice_run, None)]
        nested = [row.id for row in approvals.decided_unanswered(session, a.alice_run, child)]
        other_child = approvals.decided_unanswered(session, a.alice_run, uuid.uuid4())
        forged = approvals.decided_unanswered(session, _forged(a.alice_run, b.owner.tenant_id), None)
    assert top == _ids(a, "alice_decided")
    assert nested == _ids(a, "alice_child_decided")
    assert other_child == []
    assert forged == []


def _states(db: Database, tenant: Tenant) -> dict[str, str]:
    with db.transaction() as session:
        return {name: session.get(PendingApproval, row.id).state for name, row in tenant.rows.items()}  # type: ignore[union-attr]


def test_close_pending_changes_only_that_runs_pending_rows(db: Database, two: tuple[Tenant, Tenant]) -> None:
    a, b = two
    before_a, before_b = _states(db, a), _states(db, b)
    with db.transaction() as session:
        assert approvals.close_pending(session, _forged(a.alice_run, b.owner.tenant_id), "expired") == []
    assert (_states(db, a), _states(db, b)) == (before_a, before_b)
    with db.transaction() as session:
        closed = sorted(row.id for row in approvals.close_pending(session, a.alice_run, "cancelled"))
    assert closed == sorted(_ids(a, "alice_pending", "alice_pending_2"))
    after = {**before_a, "alice_pending": "cancelled", "alice_pending_2": "cancelled"}
    assert (_states(db, a), _states(db, b)) == (after, before_b)


def test_stale_runs_finds_runs_with_a_pending_approval_older_than_the_cutoff(
    db: Database, two: tuple[Tenant, Tenant]
) -> None:
    """The sweeper's query is across tenants by design: it acts for the system, not for a principal."""
    a, b = two
    ours = {a.alice_run.id, a.bob_run.id, b.alice_run.id, b.bob_run.id}
    with db.transaction() as session:

        def stale(minutes: int) -> list[uuid.UUID]:
            found = approvals.stale_runs(session, datetime.now(UTC), LONG_AGO + timedelta(minutes=minutes), 10_000)
            return [run_id for run_id in found if run_id in ours]

        assert stale(1) == []  # strictly older than the cutoff
        assert stale(2) == [a.alice_run.id]
        assert stale(7) == [a.alice_run.id, a.bob_run.id]
        assert stale(200) == [a.alice_run.id, a.bob_run.id, b.alice_run.id, b.bob_run.id]
        # The expired row of alice's run (older than bob's pending one) does not make it stale on its own.
        session.query(PendingApproval).filter(
            PendingApproval.id.in_(_ids(a, "alice_pending", "alice_pending_2"))
        ).update({"state": "decided"}, synchronize_session=False)
        assert stale(200) == [a.bob_run.id, b.alice_run.id, b.bob_run.id]
