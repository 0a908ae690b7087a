"""``tenants.has_webhooks``: whether a tenant may have a webhook.

Every transaction that writes an approval event or a ``run.finished`` asked for the tenant's webhooks, which most
tenants do not have. The flag is set with a tenant's first webhook and cleared with its last; such a transaction
reads it in a statement it runs anyway (the approval stream's numbering, the run's own update) and reads the
subscriptions only when it is set. The upgrade sets it for the tenants that have webhooks now.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("has_webhooks", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.execute("UPDATE tenants t SET has_webhooks = EXISTS (SELECT 1 FROM webhooks w WHERE w.tenant_id = t.id)")


def downgrade() -> None:
    op.drop_column("tenants", "has_webhooks")
