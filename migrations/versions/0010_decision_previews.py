"""What the reviewer saw: the preview of a decided call, kept as it was at decision time.

A ``write_file`` or ``edit_file`` call that a reviewer approved or edited changes its file when it runs, so a preview
worked out afterwards diffs the file against itself and shows nothing. The decision service now works the preview
out at decision time, with the arguments that will run (an edit's own), and keeps it here; a standing approval's
automatic decision keeps none (nobody looked). Rows decided before this revision have none either.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pending_approvals", sa.Column("decision_preview", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("pending_approvals", "decision_preview")
