"""What the reviewer sees is what runs: a rule's ``description`` on each of its approvals, and grants that cover
exactly one call (``exact``).

``description`` is the reason the call waits, in the words of the rule that held it (null: the rule gave none).
``exact`` marks a grant made by a ``remember`` without ``when``: its ``when`` pins every argument of the approved
call, defaults filled in, and a call carrying any other argument does not match it. Grants stored before this
revision keep their meaning (``exact`` false).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pending_approvals", sa.Column("description", sa.Text(), nullable=True))
    op.add_column("grants", sa.Column("exact", sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    op.drop_column("grants", "exact")
    op.drop_column("pending_approvals", "description")
