"""The approval queue served by an index in every visibility case.

``pending_approvals.run_creator`` copies the run's creator, filled by a trigger on insert (a run's creator never
changes), so a member's queue — the approvals of their own runs — is one index range like an owner's, instead of
a join that filters a whole tenant's queue. Each listing (one state, or all) has a ``(…, created_at, id)`` index
matching its keyset order.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TABLE = "pending_approvals"
INDEXES = (
    ("tenant_id", "state", "created_at", "id"),
    ("tenant_id", "created_at", "id"),
    ("tenant_id", "run_creator", "state", "created_at", "id"),
    ("tenant_id", "run_creator", "created_at", "id"),
)
FILL_CREATOR = """
CREATE FUNCTION pending_approvals_run_creator() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.run_creator := (SELECT created_by FROM runs WHERE id = NEW.run_id);
    RETURN NEW;
END
$$;
CREATE TRIGGER pending_approvals_run_creator BEFORE INSERT ON pending_approvals
    FOR EACH ROW EXECUTE FUNCTION pending_approvals_run_creator();
"""


def _name(columns: tuple[str, ...]) -> str:
    return f"ix_{TABLE}_{'_'.join(columns)}"


def upgrade() -> None:
    op.add_column(TABLE, sa.Column("run_creator", sa.UUID(), nullable=True))
    op.execute("UPDATE pending_approvals a SET run_creator = r.created_by FROM runs r WHERE r.id = a.run_id")
    op.alter_column(TABLE, "run_creator", nullable=False)
    op.execute(FILL_CREATOR)
    op.drop_index(op.f("ix_pending_approvals_tenant_id_state_created_at"), table_name=TABLE)
    for columns in INDEXES:
        op.create_index(op.f(_name(columns)), TABLE, list(columns))


def downgrade() -> None:
    for columns in INDEXES:
        op.drop_index(op.f(_name(columns)), table_name=TABLE)
    op.create_index(
        op.f("ix_pending_approvals_tenant_id_state_created_at"), TABLE, ["tenant_id", "state", "created_at"]
    )
    op.execute("DROP TRIGGER pending_approvals_run_creator ON pending_approvals")
    op.execute("DROP FUNCTION pending_approvals_run_creator()")
    op.drop_column(TABLE, "run_creator")
