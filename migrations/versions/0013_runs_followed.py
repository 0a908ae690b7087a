"""``runs.followed``: a run of a thread that another run was added after while it was active.

Creating a thread's run marks the thread's active runs followed, in the statement that locks them. A run that ends
followed looks for its thread's next run to start; one that nobody followed (the usual chat turn, sent after the
turn before it ended) ends without that look. The thread runs active at upgrade are marked followed, so that none of
them ends without looking.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("followed", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.execute(
        "UPDATE runs SET followed = true "
        "WHERE thread_id IS NOT NULL AND state IN ('queued', 'running', 'awaiting_approval')"
    )


def downgrade() -> None:
    op.drop_column("runs", "followed")
