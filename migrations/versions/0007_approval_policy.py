"""Approval policy: where an approved call's execution stands, assigned reviewers and quorum votes, standing
approvals (grants).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "grants",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("when", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("created_by", sa.UUID(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.UUID(), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_grants_agent_id_agents"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], name=op.f("fk_grants_created_by_users")),
        sa.ForeignKeyConstraint(["revoked_by"], ["users.id"], name=op.f("fk_grants_revoked_by_users")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_grants_run_id_runs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_grants_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grants")),
    )
    op.create_index(op.f("ix_grants_tenant_id_agent_id_tool_name"), "grants", ["tenant_id", "agent_id", "tool_name"])
    op.create_index(op.f("ix_grants_tenant_id_created_at_id"), "grants", ["tenant_id", "created_at", "id"])
    op.add_column("pending_approvals", sa.Column("execution", sa.Text(), server_default="not_started", nullable=False))
    op.add_column("pending_approvals", sa.Column("reviewers", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column(
        "pending_approvals", sa.Column("approvals_required", sa.Integer(), server_default="1", nullable=False)
    )
    op.add_column("pending_approvals", sa.Column("grant_id", sa.UUID(), nullable=True))
    op.create_foreign_key(
        op.f("fk_pending_approvals_grant_id_grants"),
        "pending_approvals",
        "grants",
        ["grant_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_check_constraint(
        op.f("ck_pending_approvals_execution"),
        "pending_approvals",
        "execution IN ('not_started', 'executing', 'done', 'outcome_unknown')",
    )
    op.create_check_constraint(
        op.f("ck_pending_approvals_approvals_required"), "pending_approvals", "approvals_required BETWEEN 1 AND 5"
    )
    op.create_table(
        "approval_votes",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("approval_id", sa.UUID(), nullable=False),
        sa.Column("user_id", sa.UUID(), nullable=False),
        sa.Column("vote", sa.Text(), nullable=False),
        sa.Column("message", sa.Text(), server_default="", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("vote IN ('approve', 'reject')", name=op.f("ck_approval_votes_vote")),
        sa.ForeignKeyConstraint(
            ["approval_id"],
            ["pending_approvals.id"],
            name=op.f("fk_approval_votes_approval_id_pending_approvals"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_approval_votes_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_approval_votes_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_approval_votes_user_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_votes")),
        sa.UniqueConstraint("approval_id", "user_id", name=op.f("uq_approval_votes_approval_id_user_id")),
    )
    op.create_index(op.f("ix_approval_votes_tenant_id_run_id"), "approval_votes", ["tenant_id", "run_id"])


def downgrade() -> None:
    op.drop_table("approval_votes")
    op.drop_constraint(op.f("ck_pending_approvals_approvals_required"), "pending_approvals", type_="check")
    op.drop_constraint(op.f("ck_pending_approvals_execution"), "pending_approvals", type_="check")
    op.drop_constraint(op.f("fk_pending_approvals_grant_id_grants"), "pending_approvals", type_="foreignkey")
    for column in ("grant_id", "approvals_required", "reviewers", "execution"):
        op.drop_column("pending_approvals", column)
    op.drop_table("grants")
