"""Tools from MCP servers: the tenants' servers, the definitions a run pinned, and what an MCP approval shows.

- ``mcp_servers``: a tenant's streamable HTTP servers (operator servers live in ``HANGO_MCP_CONFIG``, not here).
  ``headers`` are sealed like webhook secrets (Fernet-encrypted when ``HANGO_WEBHOOK_SECRET_KEYS`` is set).
- ``runs.mcp_tools``: the MCP tool definitions the worker listed at the run's first step, which the model sees for
  the whole run; null until then.
- ``pending_approvals.mcp``: for a call of an MCP tool, its server and the pinned definition's title, description,
  annotations and ``definition_sha256``, as the reviewer is shown them and as the drift check compares them.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mcp_servers",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("headers", sa.Text(), nullable=False),
        sa.Column("trusted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("created_by", sa.UUID(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("name ~ '^[a-z0-9-]{1,32}$'", name=op.f("ck_mcp_servers_name")),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_mcp_servers_created_by_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_mcp_servers_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mcp_servers")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_mcp_servers_tenant_id_name")),
    )
    op.add_column("runs", sa.Column("mcp_tools", postgresql.JSONB(), nullable=True))
    op.add_column("pending_approvals", sa.Column("mcp", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("pending_approvals", "mcp")
    op.drop_column("runs", "mcp_tools")
    op.drop_table("mcp_servers")
