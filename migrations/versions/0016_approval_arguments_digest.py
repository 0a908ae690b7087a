"""``pending_approvals.arguments_sha256``: the digest of a call's arguments, stored when its approval is created.

Every rendering of an approval (the queue, the inbox, its events, its webhooks) showed the SHA-256 of the
arguments' canonical JSON, computed again each time. It is now a column, written with the row. The upgrade fills it
for the approvals already stored, in batches, with the same function the server uses.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hango.kernel.canonical import sha256_hex

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    op.add_column("pending_approvals", sa.Column("arguments_sha256", sa.Text(), nullable=True))
    connection = op.get_bind()
    read = sa.text(
        "SELECT id, arguments FROM pending_approvals WHERE arguments_sha256 IS NULL ORDER BY id LIMIT :batch"
    )
    write = sa.text("UPDATE pending_approvals SET arguments_sha256 = :digest WHERE id = :id")
    while rows := connection.execute(read, {"batch": _BATCH}).all():
        connection.execute(write, [{"id": row.id, "digest": sha256_hex(row.arguments)} for row in rows])
    op.alter_column("pending_approvals", "arguments_sha256", nullable=False)


def downgrade() -> None:
    op.drop_column("pending_approvals", "arguments_sha256")
