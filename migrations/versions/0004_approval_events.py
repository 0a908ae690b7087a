"""The tenant approval stream's log: approval_events, numbered per tenant by tenants.approval_event_seq.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("approval_event_seq", sa.BigInteger(), server_default="0", nullable=False))
    op.create_table(
        "approval_events",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("approval_id", sa.UUID(), nullable=False),
        sa.Column("run_creator", sa.UUID(), nullable=False),
        sa.Column("data", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_approval_events_seq_positive")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_approval_events_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("tenant_id", "seq", name=op.f("pk_approval_events")),
    )
    op.create_index(
        op.f("ix_approval_events_tenant_id_run_creator_seq"), "approval_events", ["tenant_id", "run_creator", "seq"]
    )
    op.create_index(op.f("ix_approval_events_created_at"), "approval_events", ["created_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_approval_events_created_at"), table_name="approval_events")
    op.drop_index(op.f("ix_approval_events_tenant_id_run_creator_seq"), table_name="approval_events")
    op.drop_table("approval_events")
    op.drop_column("tenants", "approval_event_seq")
