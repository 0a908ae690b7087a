"""Threads: conversations that go on, one run at a time, sharing their messages instead of copying them.

- ``threads``: a tenant's conversation with one agent. ``run_seq`` numbers its runs (``runs.thread_position``);
  ``base_seq`` and ``base_count`` say where a fork's own messages start and how many conversation messages it
  shares with its ancestors; ``deleted_at`` marks a deleted thread whose messages a fork still shares (the API no
  longer shows it; the rows go once the last fork sharing them is deleted).
- ``thread_ancestors``: for a fork, every thread it shares messages with and up to which ``seq``.
- ``runs.thread_id``, ``thread_position``, ``first_seq`` and ``input``: a thread's run, its place among the thread's
  runs, where its own messages start (null until it starts) and its input until then (its messages are written when
  it starts, after whatever the previous run left); ``runs.deleted_at`` marks the runs a deleted thread keeps for
  its forks.
- ``messages.thread_id``: the thread of a message of a thread's run; ``seq`` is then thread-wide.
- ``files.thread_id``: a thread's scratch files, which persist across its runs.
- ``agents.history``: ``{"max_messages": N}``, how much of a thread's earlier conversation its runs show the model.
- ``pending_approvals.thread_id``: copied from the run by the insert trigger, for the lists and the streams.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

ACTIVE = "state IN ('queued', 'running', 'awaiting_approval')"

_TRIGGER = """
CREATE OR REPLACE FUNCTION pending_approvals_run_creator() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT created_by, thread_id INTO NEW.run_creator, NEW.thread_id FROM runs WHERE id = NEW.run_id;
    RETURN NEW;
END $$;
"""
_OLD_TRIGGER = """
CREATE OR REPLACE FUNCTION pending_approvals_run_creator() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.run_creator := (SELECT created_by FROM runs WHERE id = NEW.run_id);
    RETURN NEW;
END $$;
"""


def upgrade() -> None:
    op.create_table(
        "threads",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("created_by", sa.UUID(), nullable=False),
        sa.Column("metadata", postgresql.JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("run_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("base_seq", sa.Integer(), server_default="0", nullable=False),
        sa.Column("base_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_threads_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_threads_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], name=op.f("fk_threads_created_by_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_threads")),
    )
    op.create_index(op.f("ix_threads_tenant_id_created_at_id"), "threads", ["tenant_id", "created_at", "id"])
    op.create_index(
        op.f("ix_threads_tenant_id_created_by_created_at"), "threads", ["tenant_id", "created_by", "created_at"]
    )
    op.create_table(
        "thread_ancestors",
        sa.Column("thread_id", sa.UUID(), nullable=False),
        sa.Column("ancestor_id", sa.UUID(), nullable=False),
        sa.Column("up_to_seq", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["thread_id"], ["threads.id"], name=op.f("fk_thread_ancestors_thread_id_threads"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["ancestor_id"], ["threads.id"], name=op.f("fk_thread_ancestors_ancestor_id_threads"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("thread_id", "ancestor_id", name=op.f("pk_thread_ancestors")),
    )
    op.create_index(op.f("ix_thread_ancestors_ancestor_id"), "thread_ancestors", ["ancestor_id"])

    op.add_column("runs", sa.Column("thread_id", sa.UUID(), nullable=True))
    op.add_column("runs", sa.Column("thread_position", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("first_seq", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("input", postgresql.JSONB(none_as_null=True), nullable=True))
    op.add_column("runs", sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
    op.create_foreign_key(
        op.f("fk_runs_thread_id_threads"), "runs", "threads", ["thread_id"], ["id"], ondelete="CASCADE"
    )
    op.create_unique_constraint(op.f("uq_runs_thread_id_thread_position"), "runs", ["thread_id", "thread_position"])
    op.create_index("ix_runs_thread_active", "runs", ["thread_id", "thread_position"], postgresql_where=sa.text(ACTIVE))

    op.add_column("messages", sa.Column("thread_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        op.f("fk_messages_thread_id_threads"), "messages", "threads", ["thread_id"], ["id"], ondelete="CASCADE"
    )
    op.create_index(
        "ix_messages_thread_conversation",
        "messages",
        ["thread_id", "seq"],
        postgresql_where=sa.text("thread_id IS NOT NULL AND subagent_call_id IS NULL"),
    )
    op.create_index(
        "uq_messages_thread_id_seq",
        "messages",
        ["thread_id", "seq"],
        unique=True,
        postgresql_where=sa.text("thread_id IS NOT NULL"),
    )

    op.add_column("files", sa.Column("thread_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        op.f("fk_files_thread_id_threads"), "files", "threads", ["thread_id"], ["id"], ondelete="CASCADE"
    )
    op.drop_constraint(op.f("ck_files_one_owner"), "files", type_="check")
    op.create_check_constraint(op.f("ck_files_one_owner"), "files", "num_nonnulls(agent_id, run_id, thread_id) = 1")
    op.create_index(
        "uq_files_thread_id_path",
        "files",
        ["thread_id", "path"],
        unique=True,
        postgresql_where=sa.text("thread_id IS NOT NULL"),
    )

    op.add_column("pending_approvals", sa.Column("thread_id", sa.UUID(), nullable=True))
    op.add_column("agents", sa.Column("history", postgresql.JSONB(none_as_null=True), nullable=True))
    op.execute(_TRIGGER)


def downgrade() -> None:
    op.execute(_OLD_TRIGGER)
    op.drop_column("agents", "history")
    op.drop_column("pending_approvals", "thread_id")
    op.drop_index("uq_files_thread_id_path", table_name="files")
    op.drop_constraint(op.f("ck_files_one_owner"), "files", type_="check")
    op.execute("DELETE FROM files WHERE thread_id IS NOT NULL")
    op.create_check_constraint(op.f("ck_files_one_owner"), "files", "(agent_id IS NULL) <> (run_id IS NULL)")
    op.drop_column("files", "thread_id")
    op.drop_index("uq_messages_thread_id_seq", table_name="messages")
    op.drop_index("ix_messages_thread_conversation", table_name="messages")
    op.drop_column("messages", "thread_id")
    op.drop_index("ix_runs_thread_active", table_name="runs")
    op.drop_constraint(op.f("uq_runs_thread_id_thread_position"), "runs", type_="unique")
    op.drop_column("runs", "deleted_at")
    op.drop_column("runs", "input")
    op.drop_column("runs", "first_seq")
    op.drop_column("runs", "thread_position")
    op.drop_column("runs", "thread_id")
    op.drop_index(op.f("ix_thread_ancestors_ancestor_id"), table_name="thread_ancestors")
    op.drop_table("thread_ancestors")
    op.drop_index(op.f("ix_threads_tenant_id_created_by_created_at"), table_name="threads")
    op.drop_index(op.f("ix_threads_tenant_id_created_at_id"), table_name="threads")
    op.drop_table("threads")
