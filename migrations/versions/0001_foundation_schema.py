"""Foundation schema: tenancy, auth, agents, runs, messages, events, subagent calls, files and audit.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("email", name=op.f("uq_users_email")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("system_prompt", sa.Text(), server_default="", nullable=False),
        sa.Column("model", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tools", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "interrupt_on",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column(
            "subagents",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("max_turns", sa.Integer(), server_default="50", nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.UUID(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("max_turns > 0", name=op.f("ck_agents_max_turns_positive")),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], name=op.f("fk_agents_created_by_users")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_agents_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_agents_tenant_id_name")),
    )
    op.create_index(
        op.f("ix_agents_tenant_id_created_at_id"), "agents", ["tenant_id", "created_at", "id"], unique=False
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_api_tokens_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_api_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_index(op.f("ix_api_tokens_tenant_id_user_id"), "api_tokens", ["tenant_id", "user_id"], unique=False)
    op.create_table(
        "audit_events",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=True),
        sa.Column("actor_kind", sa.Text(), nullable=False),
        sa.Column("actor_id", sa.UUID(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_kind", sa.Text(), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column(
            "detail",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("trace_id", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("actor_kind IN ('user', 'system')", name=op.f("ck_audit_events_actor_kind")),
        sa.CheckConstraint("outcome IN ('success', 'denied', 'error')", name=op.f("ck_audit_events_outcome")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_audit_events_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(
        op.f("ix_audit_events_tenant_id_created_at_id"),
        "audit_events",
        ["tenant_id", "created_at", "id"],
        unique=False,
    )
    op.create_index(
        op.f("ix_audit_events_tenant_id_target_kind_target_id"),
        "audit_events",
        ["tenant_id", "target_kind", "target_id"],
        unique=False,
    )
    op.create_table(
        "memberships",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("role IN ('owner', 'admin', 'member')", name=op.f("ck_memberships_role")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_memberships_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memberships")),
        sa.UniqueConstraint("tenant_id", "user_id", name=op.f("uq_memberships_tenant_id_user_id")),
    )
    op.create_index(
        op.f("ix_memberships_tenant_id_created_at_id"),
        "memberships",
        ["tenant_id", "created_at", "id"],
        unique=False,
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("agent_snapshot", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_by", sa.UUID(), nullable=False),
        sa.Column("state", sa.Text(), server_default="queued", nullable=False),
        sa.Column(
            "state_json",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("turn", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("queue_generation", sa.Integer(), server_default="0", nullable=False),
        sa.Column("message_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("event_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("trace_context", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name=op.f("ck_runs_state")
        ),
        sa.CheckConstraint("turn >= 0", name=op.f("ck_runs_turn_not_negative")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_runs_agent_id_agents"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], name=op.f("fk_runs_created_by_users")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_runs_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_state_lease_expires_at"), "runs", ["state", "lease_expires_at"], unique=False)
    op.create_index(op.f("ix_runs_tenant_id_created_at_id"), "runs", ["tenant_id", "created_at", "id"], unique=False)
    op.create_index(
        op.f("ix_runs_tenant_id_created_by_created_at"),
        "runs",
        ["tenant_id", "created_by", "created_at"],
        unique=False,
    )
    op.create_table(
        "files",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=True),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("path LIKE '/%%'", name=op.f("ck_files_path_absolute")),
        sa.CheckConstraint("(agent_id IS NULL) <> (run_id IS NULL)", name=op.f("ck_files_one_owner")),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_files_agent_id_agents"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_files_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_files_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    op.create_index(op.f("ix_files_tenant_id"), "files", ["tenant_id"], unique=False)
    op.create_index(
        "uq_files_agent_id_path",
        "files",
        ["agent_id", "path"],
        unique=True,
        postgresql_where=sa.text("agent_id IS NOT NULL"),
    )
    op.create_index(
        "uq_files_run_id_path",
        "files",
        ["run_id", "path"],
        unique=True,
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.create_table(
        "run_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column(
            "data",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_run_events_seq_positive")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_events_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_run_events_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_events")),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_run_events_run_id_seq")),
    )
    op.create_index(op.f("ix_run_events_tenant_id_run_id"), "run_events", ["tenant_id", "run_id"], unique=False)
    op.create_table(
        "subagent_calls",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("parent_subagent_call_id", sa.UUID(), nullable=True),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("subagent_type", sa.Text(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), server_default="running", nullable=False),
        sa.Column(
            "state_json",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('running', 'succeeded', 'failed')", name=op.f("ck_subagent_calls_state")),
        sa.CheckConstraint("depth >= 1", name=op.f("ck_subagent_calls_depth_positive")),
        sa.ForeignKeyConstraint(
            ["parent_subagent_call_id"],
            ["subagent_calls.id"],
            name=op.f("fk_subagent_calls_parent_subagent_call_id_subagent_calls"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_subagent_calls_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_subagent_calls_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_subagent_calls")),
        sa.UniqueConstraint("run_id", "tool_call_id", name=op.f("uq_subagent_calls_run_id_tool_call_id")),
    )
    op.create_index(op.f("ix_subagent_calls_tenant_id_run_id"), "subagent_calls", ["tenant_id", "run_id"], unique=False)
    op.create_table(
        "messages",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("content", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("subagent_call_id", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("role IN ('user', 'assistant', 'tool')", name=op.f("ck_messages_role")),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_messages_seq_positive")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_messages_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["subagent_call_id"],
            ["subagent_calls.id"],
            name=op.f("fk_messages_subagent_call_id_subagent_calls"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_messages_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_messages_run_id_seq")),
    )
    op.create_index(op.f("ix_messages_tenant_id_run_id"), "messages", ["tenant_id", "run_id"], unique=False)
    _forbid_updates("messages")
    _forbid_updates("run_events")


def downgrade() -> None:
    op.execute("DROP FUNCTION hango_forbid_update() CASCADE")
    op.drop_index(op.f("ix_messages_tenant_id_run_id"), table_name="messages")
    op.drop_table("messages")
    op.drop_index(op.f("ix_subagent_calls_tenant_id_run_id"), table_name="subagent_calls")
    op.drop_table("subagent_calls")
    op.drop_index(op.f("ix_run_events_tenant_id_run_id"), table_name="run_events")
    op.drop_table("run_events")
    op.drop_index("uq_files_run_id_path", table_name="files", postgresql_where=sa.text("run_id IS NOT NULL"))
    op.drop_index("uq_files_agent_id_path", table_name="files", postgresql_where=sa.text("agent_id IS NOT NULL"))
    op.drop_index(op.f("ix_files_tenant_id"), table_name="files")
    op.drop_table("files")
    op.drop_index(op.f("ix_runs_tenant_id_created_by_created_at"), table_name="runs")
    op.drop_index(op.f("ix_runs_tenant_id_created_at_id"), table_name="runs")
    op.drop_index(op.f("ix_runs_state_lease_expires_at"), table_name="runs")
    op.drop_table("runs")
    op.drop_index(op.f("ix_memberships_tenant_id_created_at_id"), table_name="memberships")
    op.drop_table("memberships")
    op.drop_index(op.f("ix_audit_events_tenant_id_target_kind_target_id"), table_name="audit_events")
    op.drop_index(op.f("ix_audit_events_tenant_id_created_at_id"), table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index(op.f("ix_api_tokens_tenant_id_user_id"), table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_index(op.f("ix_agents_tenant_id_created_at_id"), table_name="agents")
    op.drop_table("agents")
    op.drop_table("users")
    op.drop_table("tenants")


def _forbid_updates(table: str) -> None:
    """Make ``table`` append-only: rows may be inserted (and cascade-deleted with their run), never changed."""
    op.execute(
        """
        CREATE OR REPLACE FUNCTION hango_forbid_update() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
        END $$
        """
    )
    op.execute(
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION hango_forbid_update()"
    )
