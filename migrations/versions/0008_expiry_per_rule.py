"""Expiry per rule: an approval's own deadline (a rule's ``ttl``), what its expiry does (``on_expiry``), when it was
escalated, and what its expiry did (``expiry_action``: the run failed, or the call was rejected).

``expires_at`` stays null for calls whose rule has no ``ttl`` (and for every approval stored before this
revision): those expire ``HANGO_APPROVAL_TTL`` after their creation, as before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pending_approvals", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("pending_approvals", sa.Column("on_expiry", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("pending_approvals", sa.Column("escalated_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("pending_approvals", sa.Column("expiry_action", sa.Text(), nullable=True))
    op.create_check_constraint(
        op.f("ck_pending_approvals_expiry_action"), "pending_approvals", "expiry_action IN ('fail', 'reject')"
    )
    op.create_index(op.f("ix_pending_approvals_state_expires_at"), "pending_approvals", ["state", "expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pending_approvals_state_expires_at"), table_name="pending_approvals")
    op.drop_constraint(op.f("ck_pending_approvals_expiry_action"), "pending_approvals", type_="check")
    for column in ("expiry_action", "escalated_at", "on_expiry", "expires_at"):
        op.drop_column("pending_approvals", column)
