"""What the API calls for a tenant's MCP servers: adding, replacing and removing them, listing them with the
operator's, and listing a server's tools as it gives them now.

Everyone in the tenant may read servers and their tools; only owners and admins change them. A server's headers
are secrets: sealed at rest with the webhook secrets' box, opened only to reach the server, never returned,
audited or logged. Each function owns its transaction; nothing is sent over the network inside one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from hango.agent.mcp import SERVER_NAME, PinnedTool
from hango.kernel import addresses
from hango.kernel.auth import Principal
from hango.kernel.errors import Conflict, FieldError, InvalidInput, NotFound
from hango.kernel.models import McpServer
from hango.kernel.secret_box import SecretBox
from hango.mcp.config import ServerSpec
from hango.platform.runtime import Runtime
from hango.services.tenancy import require_manager
from hango.store import mcp_servers as store

log = logging.getLogger(__name__)
# Headers the MCP transport sets itself, or that would point a request elsewhere than the checked address: a
# tenant's value for one of them would break the protocol or its checks.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "accept",
        "last-event-id",
        "mcp-session-id",
        "mcp-protocol-version",
    }
)


@dataclass(frozen=True)
class ServerCommand:
    """A tenant server as ``POST`` or ``PUT /v1/mcp-servers`` gives it, parsed but not yet checked.

    ``name`` is ``None`` on a ``PUT`` that leaves it out; ``headers`` is ``None`` on a ``PUT`` that keeps them.
    """

    name: str | None
    url: str
    trusted: bool
    description: str
    headers: Mapping[str, str] | None


@dataclass(frozen=True)
class Listing:
    """Every server a tenant's agents may name: the operator's, then the tenant's own, each by name."""

    operator: list[ServerSpec]
    tenant: list[McpServer]


@dataclass(frozen=True)
class Updated:
    """A tenant server as an update left it, and whether its headers were replaced (for the audit)."""

    server: McpServer
    headers_replaced: bool


def header_errors(headers: Mapping[str, str]) -> list[FieldError]:
    """What is wrong with a server's headers beyond their form: a name hango sets itself, or one given twice
    (header names are case-insensitive)."""
    errors: list[FieldError] = []
    seen: set[str] = set()
    for name in headers:
        folded = name.lower()
        if folded in RESERVED_HEADERS or folded.startswith("proxy-"):
            errors.append(FieldError(f"headers.{name}", "is set by hango's MCP client, not by a server's headers"))
        elif folded in seen:
            errors.append(FieldError(f"headers.{name}", "is given twice (header names are case-insensitive)"))
        seen.add(folded)
    return errors


def command_errors(command: ServerCommand, name: str) -> list[FieldError]:
    """What is wrong with a command for the server ``name`` (the URL's addresses aside)."""
    errors: list[FieldError] = []
    if not SERVER_NAME.fullmatch(name):
        errors.append(FieldError("name", "must match [a-z0-9-]{1,32} (no underscore)"))
    elif command.name is not None and command.name != name:
        errors.append(FieldError("name", f"must be {name}, the server's name in the URL, or be left out"))
    errors.extend(header_errors(command.headers or {}))
    return errors


def create(runtime: Runtime, principal: Principal, command: ServerCommand) -> McpServer:
    """Add a server to the tenant.

    Raises:
        Forbidden: the caller is a member.
        InvalidInput: the name, a header or the URL is refused, each named.
        Conflict: the name is taken (by the tenant, or by an operator server), or the tenant has
            ``HANGO_MAX_MCP_SERVERS_PER_TENANT`` servers already.
    """
    require_manager(principal)
    name = command.name or ""
    _check(runtime, principal, command, name)
    server = McpServer(
        tenant_id=principal.tenant_id,
        name=name,
        url=command.url,
        headers=store.seal_headers(_sealing_box(runtime), command.headers or {}),
        trusted=command.trusted,
        description=command.description,
        created_by=principal.user_id,
    )
    with runtime.db.transaction() as session:
        store.lock_tenant(session, principal.tenant_id)
        _refuse_shadowing(runtime, name)
        if store.find(session, principal.tenant_id, name) is not None:
            raise Conflict(f"the tenant already has an MCP server named {name}")
        limit = runtime.settings.max_mcp_servers_per_tenant
        if store.count(session, principal.tenant_id) >= limit:
            raise Conflict(f"the tenant already has {limit} MCP servers (HANGO_MAX_MCP_SERVERS_PER_TENANT)")
        return store.add(session, server)


def update(runtime: Runtime, principal: Principal, name: str, command: ServerCommand) -> Updated:
    """Replace a tenant server's URL, trust and description, and its headers when the command gives them.

    Raises:
        Forbidden: the caller is a member.
        NotFound: the tenant has no server of that name.
        Conflict: the name is an operator server's, which a tenant cannot change.
        InvalidInput: the name differs from the URL's, or a header or the URL is refused.
    """
    require_manager(principal)
    with runtime.db.read() as session:
        _own(runtime, session, principal, name)
    _check(runtime, principal, command, name)
    sealed = None if command.headers is None else store.seal_headers(_sealing_box(runtime), command.headers)
    with runtime.db.transaction() as session:
        server = _own(runtime, session, principal, name, lock=True)
        server.url, server.trusted, server.description = command.url, command.trusted, command.description
        if sealed is not None:
            server.headers = sealed
        server.updated_at = datetime.now(UTC)
        session.flush()
    return Updated(server, headers_replaced=sealed is not None)


def delete(runtime: Runtime, principal: Principal, name: str) -> McpServer:
    """Remove a tenant server; its row as it was.

    Raises:
        Forbidden: the caller is a member.
        NotFound: the tenant has no server of that name.
        Conflict: an agent's tools (or a subagent's) name it, or it is an operator server.
    """
    require_manager(principal)
    with runtime.db.transaction() as session:
        server = _own(runtime, session, principal, name, lock=True)
        agents = store.servers_named_by_agents(session, principal.tenant_id, name)
        if agents:
            listed = ", ".join(str(agent_id) for agent_id in agents[:10])
            more = f" and {len(agents) - 10} more" if len(agents) > 10 else ""
            raise Conflict(f"MCP server {name} is named by the tools of agents {listed}{more}: change them first")
        store.delete(session, server)
    return server


def list_servers(runtime: Runtime, principal: Principal) -> Listing:
    """The operator's servers and the tenant's own, each by name (anyone in the tenant)."""
    with runtime.db.read() as session:
        tenant = store.list_servers(session, principal.tenant_id)
    operator = [runtime.mcp.operator[name] for name in sorted(runtime.mcp.operator)]
    return Listing(operator=operator, tenant=tenant)


def get(runtime: Runtime, principal: Principal, name: str) -> ServerSpec | McpServer:
    """The server the tenant's agents mean by ``name``: the operator's of that name, else the tenant's own.

    Raises:
        NotFound: neither exists (another tenant's server is never found).
    """
    _require_name(name)
    if name in runtime.mcp.operator:
        return runtime.mcp.operator[name]
    with runtime.db.read() as session:
        return store.get(session, principal.tenant_id, name)


def tools(runtime: Runtime, principal: Principal, name: str) -> list[PinnedTool]:
    """The server's tools as it lists them now, each as a run would pin it (anyone in the tenant).

    Raises:
        NotFound: the tenant can name no server ``name``.
        McpUnavailable: the server did not answer within ``HANGO_MCP_TIMEOUT``, refused, or answered wrongly.
    """
    _require_name(name)
    with runtime.db.read() as session:
        box = SecretBox(runtime.settings.webhook_secret_keys)
        server = store.find_server(session, principal.tenant_id, name, runtime.mcp.operator, box)
    if server is None:
        raise NotFound(f"MCP server {name} not found")
    listed = runtime.mcp.list_tools(principal.tenant_id, server)
    return [PinnedTool.of_listing(server.name, tool, trusted=server.trusted) for tool in listed]


def _check(runtime: Runtime, principal: Principal, command: ServerCommand, name: str) -> None:
    """Refuse a malformed command, naming every field, then a URL the SSRF rules refuse (resolving its name)."""
    errors = command_errors(command, name)
    if errors:
        raise InvalidInput.of(errors)
    settings = runtime.settings
    try:
        addresses.resolve(
            command.url, allow_private=settings.mcp_allow_private_urls, max_length=settings.mcp_max_url_length
        )
    except addresses.RefusedUrl as exc:
        extra = {"tenant_id": str(principal.tenant_id), "user_id": str(principal.user_id), **exc.log_fields()}
        log.warning("MCP server URL refused", extra=extra)
        raise InvalidInput.field("url", str(exc)) from exc


def _refuse_shadowing(runtime: Runtime, name: str) -> None:
    if name in runtime.mcp.operator:
        raise Conflict(f"{name} is the name of one of the operator's MCP servers: choose another")


def _require_name(name: str) -> None:
    """A name no server can have is a :class:`NotFound` before any query (it may hold what no column compares)."""
    if not SERVER_NAME.fullmatch(name):
        raise NotFound(f"MCP server {name[:40]} not found")


def _own(runtime: Runtime, session: Session, principal: Principal, name: str, *, lock: bool = False) -> McpServer:
    """The tenant's own server of that name; an operator server's name is a :class:`Conflict` (it is not the
    tenant's to change), any other a :class:`NotFound`."""
    _require_name(name)
    server = store.find(session, principal.tenant_id, name, lock=lock)
    if server is not None:
        return server
    if name in runtime.mcp.operator:
        raise Conflict(f"{name} is one of the operator's MCP servers (HANGO_MCP_CONFIG): a tenant cannot change it")
    raise NotFound(f"MCP server {name} not found")


def _sealing_box(runtime: Runtime) -> SecretBox:
    box = SecretBox(runtime.settings.webhook_secret_keys)
    if not box.encrypts:
        log.warning("MCP server headers are stored unencrypted: set HANGO_WEBHOOK_SECRET_KEYS to encrypt them at rest")
    return box
