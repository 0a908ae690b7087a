"""Tenants' MCP servers: their rows (every query filtered by tenant), their sealed headers, and the one lookup by
name that the API, the agents' checks and the worker share (:func:`find_server`).

A server's ``headers`` column holds the JSON object of its headers sealed with the same box and keys as webhook
secrets: it is opened only to reach the server, never to show it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping

from sqlalchemy import String, cast, func, or_, select
from sqlalchemy.orm import Session

from hango.agent.mcp import PREFIX, SEPARATOR, servers_named
from hango.kernel.errors import NotFound
from hango.kernel.models import Agent, McpServer, Tenant
from hango.kernel.secret_box import SecretBox
from hango.mcp.config import ServerSpec


def seal_headers(box: SecretBox, headers: Mapping[str, str]) -> str:
    """What the ``headers`` column stores for a server's headers."""
    return box.seal(json.dumps(dict(headers), separators=(",", ":"), sort_keys=True))


def open_headers(box: SecretBox, stored: str) -> dict[str, str]:
    """A server's headers as they were given.

    Raises:
        ConfigError: they were sealed with a key missing from ``HANGO_WEBHOOK_SECRET_KEYS``.
    """
    headers = json.loads(box.open(stored))
    return {str(name): str(value) for name, value in headers.items()}


def spec_of(row: McpServer, box: SecretBox) -> ServerSpec:
    """A tenant's server as the MCP client connects to it, its headers opened."""
    return ServerSpec(
        row.name,
        "tenant",
        trusted=row.trusted,
        description=row.description,
        url=row.url,
        headers=open_headers(box, row.headers),
    )


def existing_names(session: Session, tenant_id: uuid.UUID, names: Collection[str], *, share: bool = False) -> set[str]:
    """Which of ``names`` the tenant's servers bear. With ``share`` their rows are held ``FOR SHARE`` until the
    transaction ends: an agent saved naming them waits for, or holds off, their deletion (which locks the row for
    update)."""
    if not names:
        return set()
    statement = select(McpServer.name).where(McpServer.tenant_id == tenant_id, McpServer.name.in_(list(names)))
    return set(session.scalars(statement.with_for_update(read=True) if share else statement))


def lock_tenant(session: Session, tenant_id: uuid.UUID) -> None:
    """Hold the tenant's row until the transaction ends: two creations at once count each other's servers."""
    session.execute(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())


def count(session: Session, tenant_id: uuid.UUID) -> int:
    """How many servers the tenant has added."""
    found: int = session.scalar(select(func.count()).where(McpServer.tenant_id == tenant_id)) or 0
    return found


def add(session: Session, server: McpServer) -> McpServer:
    """Insert a server; its ``created_at`` and ``updated_at`` are read back."""
    session.add(server)
    session.flush()
    session.refresh(server)
    return server


def find(session: Session, tenant_id: uuid.UUID, name: str, *, lock: bool = False) -> McpServer | None:
    """The tenant's server of that name (locked for update when ``lock``), or ``None``."""
    statement = select(McpServer).where(McpServer.tenant_id == tenant_id, McpServer.name == name)
    return session.scalar(statement.with_for_update() if lock else statement)


def get(session: Session, tenant_id: uuid.UUID, name: str, *, lock: bool = False) -> McpServer:
    """The tenant's server of that name; :class:`NotFound` for another tenant's or an unknown one."""
    found = find(session, tenant_id, name, lock=lock)
    if found is None:
        raise NotFound(f"MCP server {name} not found")
    return found


def list_servers(session: Session, tenant_id: uuid.UUID) -> list[McpServer]:
    """The tenant's servers by name (a tenant has at most ``HANGO_MAX_MCP_SERVERS_PER_TENANT``)."""
    return list(session.scalars(select(McpServer).where(McpServer.tenant_id == tenant_id).order_by(McpServer.name)))


def delete(session: Session, server: McpServer) -> None:
    """Remove a server's row."""
    session.delete(server)
    session.flush()


def find_server(
    session: Session,
    tenant_id: uuid.UUID,
    name: str,
    operator: Mapping[str, ServerSpec],
    box: SecretBox,
) -> ServerSpec | None:
    """The server a tenant's agents mean by ``name``: the operator's of that name if any, else the tenant's own
    (headers unsealed); ``None`` when neither exists.

    Raises:
        ConfigError: the headers were sealed with a key missing from ``HANGO_WEBHOOK_SECRET_KEYS``.
    """
    if name in operator:
        return operator[name]
    statement = select(McpServer).where(McpServer.tenant_id == tenant_id, McpServer.name == name)
    row = session.scalar(statement)
    return None if row is None else spec_of(row, box)


def servers_named_by_agents(session: Session, tenant_id: uuid.UUID, name: str) -> list[uuid.UUID]:
    """The tenant's agents whose ``tools``, or a subagent's ``tools``, name a tool of the server ``name``.

    PostgreSQL narrows the agents to those whose tools mention ``mcp__<name>__`` anywhere; each is then read as the
    agent layer reads names (:func:`hango.agent.mcp.servers_named`), so a server of a longer name sharing the prefix
    does not count.
    """
    mention = f"%{_like_escaped(PREFIX + name + SEPARATOR)}%"
    statement = (
        select(Agent.id, Agent.tools, Agent.subagents)
        .where(
            Agent.tenant_id == tenant_id,
            or_(
                cast(Agent.tools, String).like(mention, escape="\\"),
                cast(Agent.subagents, String).like(mention, escape="\\"),
            ),
        )
        .order_by(Agent.created_at, Agent.id)
    )
    return [agent_id for agent_id, tools, subagents in session.execute(statement) if name in _named(tools, subagents)]


def _named(tools: list[str], subagents: list[object]) -> list[str]:
    names = list(tools)
    for subagent in subagents:
        if isinstance(subagent, Mapping):
            names.extend(str(tool) for tool in subagent.get("tools") or ())
    return servers_named(names)


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
