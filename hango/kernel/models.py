"""The relational schema as typed SQLAlchemy models.

The Alembic migrations in ``migrations/versions`` create exactly this schema (a test compares them). Every
tenant-owned table carries ``tenant_id``; store functions always filter by it.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    FetchedValue,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from hango.kernel.canonical import sha256_hex

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

Role = Literal["owner", "admin", "member"]
RunState = Literal["queued", "running", "awaiting_approval", "succeeded", "failed", "cancelled"]
ApprovalState = Literal["pending", "decided", "expired", "cancelled"]
Decision = Literal["approve", "edit", "reject", "respond"]
MessageRole = Literal["user", "assistant", "tool"]
SubagentState = Literal["running", "succeeded", "failed"]
ActorKind = Literal["user", "system"]
WebhookEventType = Literal[
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "approval.escalated",
    "approval.cancelled",
    "approval.reminder",
    "run.finished",
]
DeliveryState = Literal["pending", "delivered", "failed"]
Outcome = Literal["success", "denied", "error"]
Execution = Literal["not_started", "executing", "done", "outcome_unknown"]
Vote = Literal["approve", "reject"]
ExpiryAction = Literal["fail", "reject"]

ROLES: tuple[Role, ...] = get_args(Role)
DECISIONS: tuple[Decision, ...] = get_args(Decision)
APPROVAL_STATES: tuple[ApprovalState, ...] = get_args(ApprovalState)
RUN_STATES: tuple[RunState, ...] = get_args(RunState)
WEBHOOK_EVENT_TYPES: tuple[WebhookEventType, ...] = get_args(WebhookEventType)
DELIVERY_STATES: tuple[DeliveryState, ...] = get_args(DeliveryState)
EXECUTIONS: tuple[Execution, ...] = get_args(Execution)
VOTES: tuple[Vote, ...] = get_args(Vote)
EXPIRY_ACTIONS: tuple[ExpiryAction, ...] = get_args(ExpiryAction)
TERMINAL_RUN_STATES: frozenset[RunState] = frozenset({"succeeded", "failed", "cancelled"})
ACTIVE_RUN_STATES: tuple[RunState, ...] = ("queued", "running", "awaiting_approval")


def _in(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


ACTIVE_RUN_SQL = _in("state", ACTIVE_RUN_STATES)


class Base(DeclarativeBase):
    """Declarative base carrying the constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        uuid.UUID: UUID(as_uuid=True),
        datetime: DateTime(timezone=True),
        dict[str, Any]: JSONB,
        list[Any]: JSONB,
    }


def _id() -> Mapped[uuid.UUID]:
    return mapped_column(primary_key=True, default=uuid.uuid4)


def _tenant_fk() -> Mapped[uuid.UUID]:
    return mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)


def _run_fk() -> Mapped[uuid.UUID]:
    return mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)


def _created_at() -> Mapped[datetime]:
    return mapped_column(server_default=func.now(), nullable=False)


class Tenant(Base):
    """An isolated customer of the server; everything else hangs off one."""

    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = _id()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    # The last number given to an event of the tenant's approval stream (``approval_events.seq``).
    approval_event_seq: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    # Whether a run's creator may decide that run's approvals (as an owner or admin); ``PUT /v1/tenant``.
    self_approval: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=true())
    # Whether the tenant may have a webhook (true from its first webhook's creation, false again once its last is
    # deleted): a transaction that writes events reads the tenant's subscriptions only when it is set.
    has_webhooks: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    created_at: Mapped[datetime] = _created_at()


class User(Base):
    """A person, identified by email; tenant access comes from memberships."""

    __tablename__ = "users"

    id: Mapped[uuid.UUID] = _id()
    email: Mapped[str] = mapped_column(Text, nullable=False, unique=True)
    created_at: Mapped[datetime] = _created_at()


class Membership(Base):
    """A user's role in one tenant."""

    __tablename__ = "memberships"
    __table_args__ = (
        UniqueConstraint("tenant_id", "user_id"),
        CheckConstraint(_in("role", ROLES), name="role"),
        Index(None, "tenant_id", "created_at", "id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = _created_at()

    user: Mapped[User] = relationship(lazy="joined", innerjoin=True)


class ApiToken(Base):
    """A bearer token of one user in one tenant, stored only as its SHA-256 digest."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index(None, "tenant_id", "user_id"),)

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), nullable=False)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = _created_at()
    revoked_at: Mapped[datetime | None] = mapped_column(nullable=True)


class Agent(Base):
    """An agent definition: model, prompt, tools, subagents, interrupt rules and limits."""

    __tablename__ = "agents"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint("max_turns > 0", name="max_turns_positive"),
        Index(None, "tenant_id", "created_at", "id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    system_prompt: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    model: Mapped[dict[str, Any]] = mapped_column(nullable=False)
    tools: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False, server_default="{}")
    interrupt_on: Mapped[dict[str, Any]] = mapped_column(nullable=False, server_default=text("'{}'::jsonb"))
    subagents: Mapped[list[Any]] = mapped_column(nullable=False, server_default=text("'[]'::jsonb"))
    max_turns: Mapped[int] = mapped_column(Integer, nullable=False, server_default="50")
    max_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # What a thread's run shows the model of the thread's earlier conversation (migration 0012): null for all of
    # it, or {"max_messages": N}.
    history: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    created_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()


class Thread(Base):
    """A conversation with one agent that goes on across runs, one run at a time.

    Its conversation is the messages of its runs (``messages.thread_id``), numbered thread-wide, after — for a
    fork — the first ``base_seq`` numbers of its ancestors' (:class:`ThreadAncestor`), shared, not copied.
    Its status, last run and message count are derived from its runs and messages when read, so that no run's
    step writes this row. A deleted thread whose messages a fork still shares keeps its row with ``deleted_at``
    set, invisible, until the last such fork goes.
    """

    __tablename__ = "threads"
    __table_args__ = (
        Index(None, "tenant_id", "created_at", "id"),
        Index(None, "tenant_id", "created_by", "created_at"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    agent_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), nullable=False)
    created_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), nullable=False)
    # ``metadata`` is the declarative base's own attribute: the column keeps its name under another attribute.
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, server_default=text("'{}'::jsonb"))
    run_seq: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    base_seq: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    base_count: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()
    deleted_at: Mapped[datetime | None] = mapped_column(nullable=True)


class ThreadAncestor(Base):
    """A thread a fork shares messages with: those numbered up to ``up_to_seq``."""

    __tablename__ = "thread_ancestors"
    __table_args__ = (Index(None, "ancestor_id"),)

    thread_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True)
    ancestor_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True)
    up_to_seq: Mapped[int] = mapped_column(Integer, nullable=False)


class Run(Base):
    """One execution of an agent, with a snapshot of the agent as it was when the run was created."""

    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint(_in("state", RUN_STATES), name="state"),
        CheckConstraint("turn >= 0", name="turn_not_negative"),
        Index(None, "tenant_id", "created_at", "id"),
        Index(None, "tenant_id", "created_by", "created_at"),
        Index(None, "state", "lease_expires_at"),
        UniqueConstraint("thread_id", "thread_position"),
        Index("ix_runs_thread_active", "thread_id", "thread_position", postgresql_where=text(ACTIVE_RUN_SQL)),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    agent_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), nullable=False)
    # A thread's run (migration 0012): its place among the thread's runs, where its own messages start (null until
    # it starts: they follow whatever the run before it left) and, until then, its input messages.
    thread_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("threads.id", ondelete="CASCADE"), nullable=True)
    thread_position: Mapped[int | None] = mapped_column(Integer, nullable=True)
    first_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    input: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # Another run was added to the thread while this one was active (migration 0013): its end starts the next.
    followed: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    agent_snapshot: Mapped[dict[str, Any]] = mapped_column(nullable=False)
    created_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), nullable=False)
    state: Mapped[RunState] = mapped_column(Text, nullable=False, server_default="queued")
    state_json: Mapped[dict[str, Any]] = mapped_column(nullable=False, server_default=text("'{}'::jsonb"))
    turn: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    queue_generation: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    message_seq: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    event_seq: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    input_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    output_tokens: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    lease_owner: Mapped[str | None] = mapped_column(Text, nullable=True)
    lease_expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    trace_context: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    # The MCP tool definitions listed at the run's first step (migration 0011), as
    # :meth:`hango.agent.mcp.PinnedTool.to_json`; the model sees these for the whole run. Null until then.
    mcp_tools: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    created_at: Mapped[datetime] = _created_at()
    started_at: Mapped[datetime | None] = mapped_column(nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)
    updated_at: Mapped[datetime] = _created_at()
    awaiting_since: Mapped[datetime | None] = mapped_column(nullable=True)
    # Set on the runs a deleted thread keeps because a fork shares their messages: nobody sees them any more.
    deleted_at: Mapped[datetime | None] = mapped_column(nullable=True)


class SubagentCall(Base):
    """A child loop spawned by a ``task`` tool call, with its own persisted state."""

    __tablename__ = "subagent_calls"
    __table_args__ = (
        UniqueConstraint("run_id", "tool_call_id"),
        CheckConstraint(_in("state", ("running", "succeeded", "failed")), name="state"),
        CheckConstraint("depth >= 1", name="depth_positive"),
        Index(None, "tenant_id", "run_id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    run_id: Mapped[uuid.UUID] = _run_fk()
    parent_subagent_call_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("subagent_calls.id", ondelete="CASCADE"), nullable=True
    )
    tool_call_id: Mapped[str] = mapped_column(Text, nullable=False)
    subagent_type: Mapped[str] = mapped_column(Text, nullable=False)
    depth: Mapped[int] = mapped_column(Integer, nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="running")
    state_json: Mapped[dict[str, Any]] = mapped_column(nullable=False, server_default=text("'{}'::jsonb"))
    result: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _created_at()
    finished_at: Mapped[datetime | None] = mapped_column(nullable=True)


class Message(Base):
    """One message of a run's conversation; append-only (a trigger refuses updates)."""

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("run_id", "seq"),
        CheckConstraint(_in("role", ("user", "assistant", "tool")), name="role"),
        CheckConstraint("seq >= 1", name="seq_positive"),
        Index(None, "tenant_id", "run_id"),
        Index(
            "ix_messages_thread_conversation",
            "thread_id",
            "seq",
            postgresql_where=text("thread_id IS NOT NULL AND subagent_call_id IS NULL"),
        ),
        Index(
            "uq_messages_thread_id_seq", "thread_id", "seq", unique=True, postgresql_where=text("thread_id IS NOT NULL")
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    run_id: Mapped[uuid.UUID] = _run_fk()
    # A thread's message: ``seq`` is then thread-wide (migration 0012).
    thread_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("threads.id", ondelete="CASCADE"), nullable=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    role: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[list[Any]] = mapped_column(nullable=False)
    subagent_call_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("subagent_calls.id", ondelete="CASCADE"), nullable=True
    )
    created_at: Mapped[datetime] = _created_at()


class RunEvent(Base):
    """One entry of a run's event log, what SSE replays; append-only (a trigger refuses updates)."""

    __tablename__ = "run_events"
    __table_args__ = (
        UniqueConstraint("run_id", "seq"),
        CheckConstraint("seq >= 1", name="seq_positive"),
        Index(None, "tenant_id", "run_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    run_id: Mapped[uuid.UUID] = _run_fk()
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    data: Mapped[dict[str, Any]] = mapped_column(nullable=False, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = _created_at()


class File(Base):
    """A file of the agents' virtual filesystem: owned by an agent (memories, skills), one run or one thread."""

    __tablename__ = "files"
    __table_args__ = (
        CheckConstraint("num_nonnulls(agent_id, run_id, thread_id) = 1", name="one_owner"),
        CheckConstraint("path LIKE '/%'", name="path_absolute"),
        Index(
            "uq_files_agent_id_path",
            "agent_id",
            "path",
            unique=True,
            postgresql_where=text("agent_id IS NOT NULL"),
        ),
        Index("uq_files_run_id_path", "run_id", "path", unique=True, postgresql_where=text("run_id IS NOT NULL")),
        Index(
            "uq_files_thread_id_path", "thread_id", "path", unique=True, postgresql_where=text("thread_id IS NOT NULL")
        ),
        Index(None, "tenant_id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    agent_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), nullable=True)
    run_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=True)
    # A thread's scratch file, kept across the thread's runs (migration 0012).
    thread_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("threads.id", ondelete="CASCADE"), nullable=True)
    path: Mapped[str] = mapped_column(Text, nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()


class AuditEvent(Base):
    """Who did what to which resource, with what outcome. Never holds secrets or tool arguments.

    ``tenant_id`` is null only for requests whose tenant is unknown (a missing or bad token); those rows are
    for the operator and no tenant ever sees them.
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        CheckConstraint(_in("actor_kind", ("user", "system")), name="actor_kind"),
        CheckConstraint(_in("outcome", ("success", "denied", "error")), name="outcome"),
        Index(None, "tenant_id", "created_at", "id"),
        Index(None, "tenant_id", "target_kind", "target_id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=True)
    actor_kind: Mapped[str] = mapped_column(Text, nullable=False)
    actor_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True)
    action: Mapped[str] = mapped_column(Text, nullable=False)
    target_kind: Mapped[str] = mapped_column(Text, nullable=False)
    target_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    outcome: Mapped[str] = mapped_column(Text, nullable=False)
    detail: Mapped[dict[str, Any]] = mapped_column(nullable=False, server_default=text("'{}'::jsonb"))
    trace_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _created_at()


def _arguments_sha256(context: DefaultExecutionContext) -> str:
    """The default of ``pending_approvals.arguments_sha256``: computed from the row's ``arguments``."""
    parameters: dict[str, Any] = context.get_current_parameters()  # type: ignore[no-untyped-call]
    return sha256_hex(parameters["arguments"])


class PendingApproval(Base):
    """A tool call waiting for (or having had) a human decision; owned, audited and expiring."""

    __tablename__ = "pending_approvals"
    __table_args__ = (
        UniqueConstraint("run_id", "tool_call_id"),
        CheckConstraint(_in("state", APPROVAL_STATES), name="state"),
        CheckConstraint(_in("decision", ("", *DECISIONS)), name="decision"),
        CheckConstraint(_in("execution", EXECUTIONS), name="execution"),
        CheckConstraint("approvals_required BETWEEN 1 AND 5", name="approvals_required"),
        CheckConstraint(_in("expiry_action", EXPIRY_ACTIONS), name="expiry_action"),
        # The queue's keyset orders, for an owner or admin (the tenant's) and a member (their own runs').
        Index(None, "tenant_id", "state", "created_at", "id"),
        Index(None, "tenant_id", "created_at", "id"),
        Index(None, "tenant_id", "run_creator", "state", "created_at", "id"),
        Index(None, "tenant_id", "run_creator", "created_at", "id"),
        Index(None, "tenant_id", "run_id"),
        Index(None, "state", "created_at"),
        # The sweeper's question for approvals with a deadline of their own (migration 0008).
        Index(None, "state", "expires_at"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    run_id: Mapped[uuid.UUID] = _run_fk()
    turn: Mapped[int] = mapped_column(Integer, nullable=False)
    tool_call_id: Mapped[str] = mapped_column(Text, nullable=False)
    tool_name: Mapped[str] = mapped_column(Text, nullable=False)
    # The run's creator, copied by a trigger on insert (migration 0003): what a member's queue filters on.
    run_creator: Mapped[uuid.UUID] = mapped_column(nullable=False, server_default=FetchedValue())
    # The run's thread, copied by the same trigger (migration 0012); null for a run without one.
    thread_id: Mapped[uuid.UUID | None] = mapped_column(nullable=True, server_default=FetchedValue())
    arguments: Mapped[dict[str, Any]] = mapped_column(nullable=False)
    # The hex SHA-256 of ``arguments``' canonical JSON, stored when the approval is created (migration 0016):
    # every rendering of the approval shows it, and a decision may name it.
    arguments_sha256: Mapped[str] = mapped_column(Text, nullable=False, default=_arguments_sha256)
    allowed_decisions: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    subagent_call_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("subagent_calls.id", ondelete="CASCADE"), nullable=True
    )
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="pending")
    decision: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    decision_args: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    decision_message: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    decided_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    decided_at: Mapped[datetime | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = _created_at()
    # When the ``approval.reminder`` webhooks were written (once per approval; migration 0005).
    reminded_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Where an approved call stands (migration 0007): ``executing`` commits before the tool starts, ``done`` with
    # its result; ``outcome_unknown`` when a worker died mid-call and the tool is not idempotent.
    execution: Mapped[str] = mapped_column(Text, nullable=False, server_default="not_started")
    # Who may decide, copied from the rule at suspension: ``{"roles": [...], "users": [...]}``; null for anyone
    # the roles allow.
    reviewers: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # Distinct approving votes the call needs (the rule's ``approvals_required``; 1 is a plain decision).
    approvals_required: Mapped[int] = mapped_column(Integer, nullable=False, server_default="1")
    # Its own deadline, from its rule's ``ttl`` or an escalation (migration 0008); null: ``created_at`` plus
    # ``HANGO_APPROVAL_TTL``.
    expires_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # What the deadline does, the rule's ``on_expiry`` as written: ``"reject"``, ``{"escalate": ..., "ttl": ...}``;
    # null: the run fails.
    on_expiry: Mapped[Any] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # When the first deadline escalated it; the next one fails the run.
    escalated_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # What its expiry did: ``fail`` (the run failed with it) or ``reject`` (the call got an error, the run went on).
    expiry_action: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Why the call waits, in the words of the rule that held it (migration 0009); null: the rule gave none.
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The preview of a decided approve or edit of a file tool, worked out at decision time with the arguments that
    # run (migration 0010), as :class:`hango.services.previews.Preview` fields; null: none was kept.
    decision_preview: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # For a call of an MCP tool (migration 0011): its server and the pinned definition's title, description,
    # annotations and ``definition_sha256`` (:meth:`hango.agent.mcp.PinnedTool.shown`); null for any other tool.
    mcp: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True), nullable=True)
    # The standing approval that decided this call without a human, if one did.
    grant_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("grants.id", ondelete="SET NULL"), nullable=True)
    # A quorum's votes, oldest first (written in Core by the decision service, hence read-only here). Loaded in
    # one query per page of approvals by the store; a plain approval has none.
    votes: Mapped[list[ApprovalVote]] = relationship(
        viewonly=True, order_by=lambda: (ApprovalVote.created_at, ApprovalVote.id)
    )


class ApprovalVote(Base):
    """One reviewer's vote on an approval of a quorum rule: who, when, and what (the message of a reject)."""

    __tablename__ = "approval_votes"
    __table_args__ = (
        UniqueConstraint("approval_id", "user_id"),
        CheckConstraint(_in("vote", VOTES), name="vote"),
        Index(None, "tenant_id", "run_id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    run_id: Mapped[uuid.UUID] = _run_fk()
    approval_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("pending_approvals.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), nullable=False)
    vote: Mapped[str] = mapped_column(Text, nullable=False)
    message: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    created_at: Mapped[datetime] = _created_at()


class Grant(Base):
    """A standing approval: calls of ``tool_name`` by ``agent_id`` that match ``when`` (and, if set, belong to
    ``run_id``) run without waiting for a human until ``expires_at`` or a revocation."""

    __tablename__ = "grants"
    __table_args__ = (
        Index(None, "tenant_id", "agent_id", "tool_name"),
        Index(None, "tenant_id", "created_at", "id"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    agent_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), nullable=False)
    tool_name: Mapped[str] = mapped_column(Text, nullable=False)
    # Matchers as in an interrupt rule's ``when``; null matches every call of the tool.
    when: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    # A ``remember`` of exactly one call (migration 0009): ``when`` pins each of its arguments, defaults filled in,
    # and a call with any argument ``when`` does not name does not match.
    exact: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    run_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=True)
    created_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id"), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    expires_at: Mapped[datetime] = mapped_column(nullable=False)
    revoked_at: Mapped[datetime | None] = mapped_column(nullable=True)
    revoked_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id"), nullable=True)


class ApprovalEvent(Base):
    """One entry of a tenant's approval stream: an approval as it was when it was requested, decided, expired or
    cancelled. Numbered per tenant in commit order (under the tenant row's lock), so a reader that resumes after
    a number misses nothing; kept for ``Settings.approval_events_retention()``."""

    __tablename__ = "approval_events"
    __table_args__ = (
        CheckConstraint("seq >= 1", name="seq_positive"),
        # A member's stream: the approvals of their own runs, in order.
        Index(None, "tenant_id", "run_creator", "seq"),
        Index(None, "created_at"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True, nullable=False
    )
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    type: Mapped[str] = mapped_column(Text, nullable=False)
    approval_id: Mapped[uuid.UUID] = mapped_column(nullable=False)
    run_creator: Mapped[uuid.UUID] = mapped_column(nullable=False)
    data: Mapped[dict[str, Any]] = mapped_column(nullable=False)
    created_at: Mapped[datetime] = _created_at()


class Webhook(Base):
    """A tenant's subscription: which events are POSTed to which URL, signed with the webhook's secret.

    ``secret`` is sealed by :mod:`hango.services.webhooks.secrets` (Fernet-encrypted when keys are configured) and is
    shown in clear only in the response that created it.
    """

    __tablename__ = "webhooks"
    __table_args__ = (Index(None, "tenant_id", "created_at", "id"),)

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    url: Mapped[str] = mapped_column(Text, nullable=False)
    events: Mapped[list[str]] = mapped_column(ARRAY(Text), nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    secret: Mapped[str] = mapped_column(Text, nullable=False)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("true"))
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = _created_at()


class McpServer(Base):
    """A tenant's MCP server (streamable HTTP). ``headers`` are sealed like webhook secrets and never shown."""

    __tablename__ = "mcp_servers"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        CheckConstraint("name ~ '^[a-z0-9-]{1,32}$'", name="name"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    name: Mapped[str] = mapped_column(Text, nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    headers: Mapped[str] = mapped_column(Text, nullable=False)
    trusted: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=text("false"))
    description: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _created_at()


class WebhookDelivery(Base):
    """One event for one webhook: the outbox row written in the transaction that made the event, then the
    delivery's log (attempts, last answer, next attempt). ``event_id`` is the ``webhook-id`` of every attempt."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        CheckConstraint(_in("state", DELIVERY_STATES), name="state"),
        CheckConstraint("attempts >= 0", name="attempts_not_negative"),
        Index(None, "tenant_id", "webhook_id", "created_at", "id"),
        # The sweeper's question: pending deliveries that are due.
        Index(None, "state", "next_attempt_at"),
        Index(None, "webhook_id", "state"),
        # The sweeper's other question: the oldest finished deliveries, past their retention.
        Index(None, "created_at"),
    )

    id: Mapped[uuid.UUID] = _id()
    tenant_id: Mapped[uuid.UUID] = _tenant_fk()
    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False)
    event_id: Mapped[uuid.UUID] = mapped_column(nullable=False)
    event_type: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(nullable=False)
    state: Mapped[str] = mapped_column(Text, nullable=False, server_default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, server_default="0")
    last_status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(nullable=True)
    # Retried until then; a manual retry opens a new window.
    retry_until: Mapped[datetime] = mapped_column(nullable=False)
    # Beat leaves a delivery alone until then: it is on the queue already.
    enqueued_until: Mapped[datetime | None] = mapped_column(nullable=True)
    # One attempt at a time: a task that claimed the delivery holds it until then.
    claimed_until: Mapped[datetime | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime] = _created_at()
    delivered_at: Mapped[datetime | None] = mapped_column(nullable=True)
