"""Tenant isolation, proven table by table through the store functions the server uses.

Every table with a ``tenant_id`` column needs a case here: a row is seeded in tenant A and read back through its
store function as four callers: A's owner, the A member who created the run, another A member, and B's owner.
Another tenant never sees the row; a member sees run-scoped rows only of the runs they created. Adding a
tenant-owned table without a case fails :func:`test_every_tenant_owned_table_has_a_case`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.errors import Forbidden, NotFound
from hango.kernel.models import (
    Agent,
    ApprovalVote,
    File,
    Grant,
    McpServer,
    Message,
    PendingApproval,
    Run,
    RunEvent,
    SubagentCall,
    Thread,
    Webhook,
    WebhookDelivery,
)
from hango.kernel.pagination import PageRequest
from hango.kernel.secret_box import SecretBox
from hango.platform.db import Database
from hango.services import audit, tenancy
from hango.services.tenancy import require_manager
from hango.store import (
    agents,
    approval_events,
    approvals,
    events,
    files,
    grants,
    mcp_servers,
    messages,
    runs,
    subagent_calls,
    threads,
    tokens,
    webhooks,
)
from hango.store import tenants as tenant_store
from hango.store.audit import AuditFilter, AuditRecord
from hango.store.grants import GrantFilter

Reader = Callable[[Principal], bool]


@dataclass
class World:
    """Two tenants; in A an owner, a member who creates the run, and another member."""

    db: Database
    owner_a: Principal
    creator_a: Principal
    other_member_a: Principal
    owner_b: Principal
    agent: Agent
    run: Run

    def viewers(self) -> dict[str, Principal]:
        return {
            "owner_a": self.owner_a,
            "creator_a": self.creator_a,
            "other_member_a": self.other_member_a,
            "owner_b": self.owner_b,
        }


def _owner(db: Database, name: str) -> Principal:
    created = tenancy.create_tenant(db, name, f"owner-{uuid.uuid4().hex[:8]}@example.com")
    return Principal(created.tenant_id, created.user_id, "owner")


def _member(db: Database, owner: Principal) -> Principal:
    created = tenancy.create_member(db, owner, f"m-{uuid.uuid4().hex[:8]}@example.com", "member")
    return Principal(owner.tenant_id, created.membership.user_id, "member")


@pytest.fixture
def world(db: Database) -> World:
    owner_a, owner_b = _owner(db, "a"), _owner(db, "b")
    creator_a, other_member_a = _member(db, owner_a), _member(db, owner_a)
    with db.transaction() as session:
        agent = Agent(
            id=uuid.uuid4(),
            tenant_id=owner_a.tenant_id,
            name="bot",
            model={"provider": "scripted"},
            created_by=owner_a.user_id,
        )
        session.add(agent)
        session.flush()
        run = Run(
            id=uuid.uuid4(),
            tenant_id=owner_a.tenant_id,
            agent_id=agent.id,
            agent_snapshot={},
            created_by=creator_a.user_id,
        )
        session.add(run)
    return World(db, owner_a, creator_a, other_member_a, owner_b, agent, run)


def _visible(world: World, read: Callable[[Session, Principal], object]) -> Reader:
    def reader(principal: Principal) -> bool:
        try:
            with world.db.transaction() as session:
                return bool(read(session, principal))
        except (NotFound, Forbidden):
            return False

    return reader


def _seed(world: World, row: object) -> None:
    with world.db.transaction() as session:
        session.add(row)


def case_memberships(world: World) -> Reader:
    user_id = world.creator_a.user_id
    return _visible(world, lambda s, p: tenant_store.get_membership(s, p.tenant_id, user_id))


def case_api_tokens(world: World) -> Reader:
    with world.db.transaction() as session:
        token_id = tokens.create_token(session, world.owner_a.tenant_id, world.creator_a.user_id, uuid.uuid4().hex).id
    return _visible(world, lambda s, p: tokens.get_token(s, p.tenant_id, token_id))


def case_agents(world: World) -> Reader:
    agent_id = world.agent.id

    def read(session: Session, principal: Principal) -> bool:
        listed = any(a.id == agent_id for a in agents.list_agents(session, principal.tenant_id, PageRequest()).items)
        try:
            fetched = agents.get_agent(session, principal.tenant_id, agent_id) is not None
        except NotFound:
            fetched = False
        assert listed == fetched, "the list and the get disagree on visibility"
        return fetched

    return _visible(world, read)


def case_runs(world: World) -> Reader:
    run_id = world.run.id

    def read(session: Session, principal: Principal) -> bool:
        listed = any(r.id == run_id for r in runs.list_runs(session, principal, PageRequest()).items)
        try:
            fetched = runs.get_run(session, principal, run_id) is not None
        except NotFound:
            fetched = False
        assert listed == fetched, "the list and the get disagree on visibility"
        return fetched

    return _visible(world, read)


def case_threads(world: World) -> Reader:
    # Created by the run's creator: a thread is seen like a run, by its creator and the tenant's managers.
    thread = Thread(
        id=uuid.uuid4(),
        tenant_id=world.creator_a.tenant_id,
        agent_id=world.agent.id,
        created_by=world.creator_a.user_id,
        meta={},
    )
    _seed(world, thread)

    def read(session: Session, principal: Principal) -> bool:
        listed = any(row.id == thread.id for row in threads.list_threads(session, principal, PageRequest()).items)
        try:
            fetched = threads.get_thread(session, principal, thread.id) is not None
        except NotFound:
            fetched = False
        assert listed == fetched, "the list and the get disagree on visibility"
        # The thread's event stream: where it looks for the next run, and its keep-alive's check.
        try:
            streamed = threads.run_from(session, principal, thread.id, 1) is None
        except NotFound:
            streamed = False
        checked = threads.visible_run_count(session, principal, thread.id) is not None
        assert streamed == checked == fetched, "the thread's stream and the get disagree on visibility"
        return fetched

    return _visible(world, read)


def case_messages(world: World) -> Reader:
    _seed(world, Message(tenant_id=world.run.tenant_id, run_id=world.run.id, seq=1, role="user", content=[]))
    run_id = world.run.id
    return _visible(world, lambda s, p: messages.list_messages(s, p, run_id, PageRequest()).items)


def case_run_events(world: World) -> Reader:
    _seed(world, RunEvent(tenant_id=world.run.tenant_id, run_id=world.run.id, seq=1, type="run.queued", data={}))
    run_id = world.run.id
    return _visible(world, lambda s, p: events.list_events_after(s, p, run_id, 0, 10))


def case_subagent_calls(world: World) -> Reader:
    call = SubagentCall(
        id=uuid.uuid4(),
        tenant_id=world.run.tenant_id,
        run_id=world.run.id,
        tool_call_id="call_1",
        subagent_type="researcher",
        depth=1,
    )
    _seed(world, call)
    return _visible(world, lambda s, p: subagent_calls.get_subagent_call(s, p, call.id))


def case_files(world: World) -> Reader:
    """Both kinds of file: the agent's memories (tenant-wide) and a run's scratch file (run-scoped)."""
    tenant_id = world.run.tenant_id
    _seed(world, File(id=uuid.uuid4(), tenant_id=tenant_id, agent_id=world.agent.id, path="/memories/AGENTS.md"))
    _seed(world, File(id=uuid.uuid4(), tenant_id=tenant_id, run_id=world.run.id, path="/notes.txt"))
    agent_id, run_id = world.agent.id, world.run.id

    def read(session: Session, principal: Principal) -> bool:
        memory = files.get_agent_file(session, principal.tenant_id, agent_id, "/memories/AGENTS.md")
        scratch = files.get_run_file(session, principal, run_id, "/notes.txt")
        return memory is not None and scratch is not None

    return _visible(world, read)


def case_audit_events(world: World) -> Reader:
    action = f"test.{uuid.uuid4().hex[:8]}"
    audit.record(
        world.db,
        [
            AuditRecord(
                world.owner_a.tenant_id, "user", world.owner_a.user_id, action, "run", str(world.run.id), "success"
            )
        ],
    )

    def read(session: Session, principal: Principal) -> bool:
        return bool(audit.list_events(world.db, principal, AuditFilter(action=action), PageRequest()).items)

    return _visible(world, read)


def case_pending_approvals(world: World) -> Reader:
    approval = PendingApproval(
        id=uuid.uuid4(),
        tenant_id=world.run.tenant_id,
        run_id=world.run.id,
        turn=1,
        tool_call_id="call_1",
        tool_name="write_file",
        arguments={},
        allowed_decisions=["approve"],
    )
    _seed(world, approval)

    def read(session: Session, principal: Principal) -> bool:
        listed = approvals.list_for_run(session, principal, world.run.id, "all", PageRequest()).items
        queue = approvals.list_for_tenant(session, principal, "all", PageRequest()).items
        in_queue = approval.id in {row.id for row in queue}
        assert in_queue == bool(listed), "the run's list and the tenant queue disagree on visibility"
        return in_queue

    return _visible(world, read)


def case_approval_votes(world: World) -> Reader:
    approval = PendingApproval(
        id=uuid.uuid4(),
        tenant_id=world.run.tenant_id,
        run_id=world.run.id,
        turn=1,
        tool_call_id="call_q",
        tool_name="write_file",
        arguments={},
        allowed_decisions=["approve", "reject"],
        approvals_required=2,
    )
    _seed(world, approval)
    vote = ApprovalVote(
        id=uuid.uuid4(),
        tenant_id=world.run.tenant_id,
        run_id=world.run.id,
        approval_id=approval.id,
        user_id=world.owner_a.user_id,
        vote="approve",
    )
    _seed(world, vote)

    def read(session: Session, principal: Principal) -> bool:
        # Votes are read only with their approval: the run's list and the tenant's queue.
        listed = approvals.list_for_run(session, principal, world.run.id, "all", PageRequest()).items
        queue = approvals.list_for_tenant(session, principal, "all", PageRequest()).items
        voted = [[v.user_id for v in row.votes] for rows in (listed, queue) for row in rows if row.id == approval.id]
        assert voted in ([], [[vote.user_id], [vote.user_id]]), "the run's list and the queue disagree on votes"
        return bool(voted)

    return _visible(world, read)


def case_approval_events(world: World) -> Reader:
    approval_id = uuid.uuid4()
    with world.db.transaction() as session:
        seq = approval_events.reserve(session, world.run.tenant_id, 1)
        row = {
            "tenant_id": world.run.tenant_id,
            "seq": seq,
            "type": "approval.requested",
            "approval_id": approval_id,
            "run_creator": world.run.created_by,
            "data": {"id": str(approval_id)},
        }
        approval_events.insert_events(session, [row])

    def read(session: Session, principal: Principal) -> bool:
        return any(row.approval_id == approval_id for row in approval_events.visible_after(session, principal, 0, 100))

    return _visible(world, read)


def _webhook(world: World) -> Webhook:
    webhook = Webhook(
        id=uuid.uuid4(),
        tenant_id=world.owner_a.tenant_id,
        url="https://93.184.215.14/hook",
        events=["run.finished"],
        secret="plain:whsec_x",
    )
    _seed(world, webhook)
    return webhook


def case_webhooks(world: World) -> Reader:
    webhook_id = _webhook(world).id

    def read(session: Session, principal: Principal) -> bool:
        require_manager(principal)  # the service's check: webhooks are managed by owners and admins
        listed = any(w.id == webhook_id for w in webhooks.page(session, principal.tenant_id, PageRequest()).items)
        try:
            fetched = webhooks.get(session, principal.tenant_id, webhook_id) is not None
        except NotFound:
            fetched = False
        assert listed == fetched, "the list and the lookup disagree on visibility"
        return fetched

    return _visible(world, read)


def case_webhook_deliveries(world: World) -> Reader:
    webhook = _webhook(world)
    delivery = WebhookDelivery(
        id=uuid.uuid4(),
        tenant_id=webhook.tenant_id,
        webhook_id=webhook.id,
        event_id=uuid.uuid4(),
        event_type="run.finished",
        payload={},
        retry_until=datetime.now(UTC),
    )
    _seed(world, delivery)

    def read(session: Session, principal: Principal) -> bool:
        require_manager(principal)
        found = webhooks.get(session, principal.tenant_id, webhook.id)
        listed = any(d.id == delivery.id for d in webhooks.delivery_page(session, found, PageRequest()).items)
        assert listed == (webhooks.get_delivery(session, found, delivery.id) is not None)
        return listed

    return _visible(world, read)


def case_mcp_servers(world: World) -> Reader:
    name = f"srv-{uuid.uuid4().hex[:8]}"
    server = McpServer(
        id=uuid.uuid4(),
        tenant_id=world.owner_a.tenant_id,
        name=name,
        url="https://93.184.215.14/mcp",
        headers="plain:{}",
    )
    _seed(world, server)
    box = SecretBox(())

    def read(session: Session, principal: Principal) -> bool:
        # Everyone in the tenant reads its servers (api.md); the worker finds them by name for the run's tenant.
        listed = any(row.id == server.id for row in mcp_servers.list_servers(session, principal.tenant_id))
        found = mcp_servers.find_server(session, principal.tenant_id, name, {}, box) is not None
        assert listed == found == (mcp_servers.find(session, principal.tenant_id, name) is not None)
        return found

    return _visible(world, read)


def case_grants(world: World) -> Reader:
    grant = Grant(
        id=uuid.uuid4(),
        tenant_id=world.owner_a.tenant_id,
        agent_id=world.agent.id,
        tool_name="write_file",
        created_by=world.owner_a.user_id,
        expires_at=datetime.now(UTC) + timedelta(hours=1),
    )
    _seed(world, grant)

    def read(session: Session, principal: Principal) -> bool:
        require_manager(principal)  # the service's check: grants are managed by owners and admins
        now = datetime.now(UTC)
        listed = grant.id in {
            g.id for g in grants.page(session, principal.tenant_id, GrantFilter(), PageRequest(), now).items
        }
        try:
            fetched = grants.get(session, principal.tenant_id, grant.id) is not None
        except NotFound:
            fetched = False
        looked_up = grants.candidates(
            session,
            tenant_id=principal.tenant_id,
            agent_id=world.agent.id,
            run_id=world.run.id,
            tool_name="write_file",
            now=now,
        )
        assert listed == fetched == bool(looked_up), "the list, the lookup and the loop's query disagree"
        return fetched

    return _visible(world, read)


RUN_SCOPED = {"owner_a": True, "creator_a": True, "other_member_a": False, "owner_b": False}
TENANT_WIDE = {"owner_a": True, "creator_a": True, "other_member_a": True, "owner_b": False}
MANAGERS_ONLY = {"owner_a": True, "creator_a": False, "other_member_a": False, "owner_b": False}

CASES: dict[str, tuple[Callable[[World], Reader], dict[str, bool]]] = {
    "memberships": (case_memberships, TENANT_WIDE),
    "api_tokens": (case_api_tokens, TENANT_WIDE),
    "agents": (case_agents, TENANT_WIDE),
    "runs": (case_runs, RUN_SCOPED),
    "threads": (case_threads, RUN_SCOPED),
    "messages": (case_messages, RUN_SCOPED),
    "run_events": (case_run_events, RUN_SCOPED),
    "subagent_calls": (case_subagent_calls, RUN_SCOPED),
    "files": (case_files, RUN_SCOPED),
    "audit_events": (case_audit_events, MANAGERS_ONLY),
    "pending_approvals": (case_pending_approvals, RUN_SCOPED),
    "approval_events": (case_approval_events, RUN_SCOPED),
    "approval_votes": (case_approval_votes, RUN_SCOPED),
    "webhooks": (case_webhooks, MANAGERS_ONLY),
    "webhook_deliveries": (case_webhook_deliveries, MANAGERS_ONLY),
    "grants": (case_grants, MANAGERS_ONLY),
    "mcp_servers": (case_mcp_servers, TENANT_WIDE),
}


def test_every_tenant_owned_table_has_a_case(db: Database) -> None:
    with db.transaction() as session:
        tables = set(
            session.execute(
                text(
                    "SELECT table_name FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND column_name = 'tenant_id'"
                )
            ).scalars()
        )
    assert tables == set(CASES), "add a case to tests/integration/test_tenancy.py for every tenant-owned table"


@pytest.mark.parametrize("table", sorted(CASES))
def test_rows_are_visible_only_inside_their_tenant_and_run_scope(world: World, table: str) -> None:
    make_reader, expected = CASES[table]
    reader = make_reader(world)
    seen = {name: reader(principal) for name, principal in world.viewers().items()}
    assert seen == expected


def _pending(tenant_id: uuid.UUID, run_id: uuid.UUID, call_id: str, state: str = "pending") -> PendingApproval:
    return PendingApproval(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        run_id=run_id,
        turn=1,
        tool_call_id=call_id,
        tool_name="write_file",
        arguments={"file_path": "/memories/AGENTS.md", "content": call_id},
        allowed_decisions=["approve"],
        state=state,
    )


def _run_with_approvals(world: World, owner: Principal, creator: Principal, count: int) -> list[uuid.UUID]:
    """A run of ``creator``'s in ``owner``'s tenant with ``count`` pending approvals and one decided."""
    with world.db.transaction() as session:
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
            id=uuid.uuid4(), tenant_id=owner.tenant_id, agent_id=agent.id, agent_snapshot={}, created_by=creator.user_id
        )
        session.add(run)
        session.flush()
        rows = [_pending(owner.tenant_id, run.id, f"call_{index}") for index in range(count)]
        session.add_all([*rows, _pending(owner.tenant_id, run.id, "decided", state="decided")])
        return [row.id for row in rows]


def test_each_tenant_queue_shows_exactly_its_own_approvals(world: World) -> None:
    """The tenant queue (``GET /v1/approvals``) across two tenants that both have pending approvals."""
    creator_b = _member(world.db, world.owner_b)
    of_creator_a = _run_with_approvals(world, world.owner_a, world.creator_a, 2)
    of_other_a = _run_with_approvals(world, world.owner_a, world.other_member_a, 1)
    of_owner_b = _run_with_approvals(world, world.owner_b, world.owner_b, 2)
    of_creator_b = _run_with_approvals(world, world.owner_b, creator_b, 1)
    expected = {
        "owner_a": of_creator_a + of_other_a,
        "creator_a": of_creator_a,
        "other_member_a": of_other_a,
        "owner_b": of_owner_b + of_creator_b,
        "creator_b": of_creator_b,
    }
    viewers = {**world.viewers(), "creator_b": creator_b}
    with world.db.transaction() as session:
        queues = {
            name: [row.id for row in approvals.list_for_tenant(session, principal, "pending", PageRequest()).items]
            for name, principal in viewers.items()
        }
    assert {name: sorted(ids) for name, ids in queues.items()} == {name: sorted(ids) for name, ids in expected.items()}
