"""Tenants' MCP servers: every query scoped to one tenant."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.kernel.config import Settings
from hango.kernel.models import McpServer
from hango.kernel.secret_box import SecretBox
from hango.mcp.config import ServerSpec


def spec_of(row: McpServer, box: SecretBox) -> ServerSpec:
    """A tenant's server as the MCP client connects to it, its headers opened."""
    return ServerSpec(
        row.name,
        "tenant",
        trusted=row.trusted,
        description=row.description,
        url=row.url,
        headers=json.loads(box.open(row.headers)),
    )


def find_tenant_server(session: Session, tenant_id: uuid.UUID, name: str, settings: Settings) -> ServerSpec | None:
    """The tenant's server of that name, ready to connect to; ``None`` when it has none."""
    row = session.scalars(select(McpServer).where(McpServer.tenant_id == tenant_id, McpServer.name == name)).first()
    return None if row is None else spec_of(row, SecretBox(settings.webhook_secret_keys))


def server_names(session: Session, tenant_id: uuid.UUID) -> list[str]:
    """The names of the tenant's servers."""
    return list(session.scalars(select(McpServer.name).where(McpServer.tenant_id == tenant_id)))
