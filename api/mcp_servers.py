"""MCP servers: the tenant's own (streamable HTTP, added by owners and admins) and the operator's, and their tools."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import marshmallow as ma
from marshmallow import fields, validate

from hango.agent.mcp import SERVER_NAME, PinnedTool
from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import JsonBoolean, NoQuery, list_of, refusal
from hango.kernel.models import McpServer as McpServerRow
from hango.mcp.config import ServerSpec
from hango.services import mcp_servers as service
from hango.services.mcp_servers import RESERVED_HEADERS, ServerCommand

blp = Blueprint(
    "mcp_servers", __name__, url_prefix="/v1", description="MCP servers: tools from the Model Context Protocol"
)

NAME = f"^{SERVER_NAME.pattern}$"  # the whole name, as hango.agent.mcp spells it
# RFC 9110: a header name is a token; a value is visible ASCII, spaces and tabs (no line break can end it early).
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
HEADER_VALUE = r"^[\t\x20-\x7e]*$"
MAX_HEADERS = 32
MAX_HEADER_NAME = 256
MAX_HEADER_VALUE = 8192
HEADERS = (
    f"HTTP headers sent with every request to the server (an API key, say), as name: value; secrets, written "
    f"only: never returned, logged or audited, and encrypted at rest when HANGO_WEBHOOK_SECRET_KEYS is set. At most "
    f"{MAX_HEADERS}; a name is an HTTP token of at most {MAX_HEADER_NAME} characters, given once whatever its case, "
    f"and not one hango's MCP client sets itself ({', '.join(sorted(RESERVED_HEADERS))}, proxy-*); a value is "
    f"visible ASCII, spaces and tabs, at most {MAX_HEADER_VALUE} characters. A bad one is a 400 naming "
    f"headers.<name>"
)


class HeaderMap(fields.Dict):
    """Header names mapped to values; an invalid entry is reported as ``headers.<name>``, whether its name or its
    value is wrong (marshmallow would say ``headers.<name>.key`` or ``.value``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, str]:
        try:
            loaded: dict[str, str] = super()._deserialize(value, attr, data, **kwargs)  # type: ignore[no-untyped-call]
        except ma.ValidationError as error:
            raise ma.ValidationError(_by_name(error.messages)) from error
        return loaded


def _by_name(messages: Any) -> Any:
    if not isinstance(messages, dict):
        return messages
    return {
        name: [text for part in found.values() for text in part] if isinstance(found, dict) else found
        for name, found in messages.items()
    }


def _at_most_headers(headers: dict[str, str]) -> None:
    # A plain function, not validate.Length: apispec would document that as a string's maxLength.
    if len(headers) > MAX_HEADERS:
        raise ma.ValidationError(f"at most {MAX_HEADERS} headers")


def _headers(description: str) -> HeaderMap:
    return HeaderMap(
        keys=fields.String(
            validate=[validate.Length(min=1, max=MAX_HEADER_NAME), validate.Regexp(HEADER_NAME)],
            metadata={"description": "a header name"},
        ),
        values=fields.String(
            validate=[validate.Length(max=MAX_HEADER_VALUE), validate.Regexp(HEADER_VALUE)],
            metadata={"description": "its value"},
        ),
        validate=_at_most_headers,
        metadata={"description": description, "writeOnly": True, "maxProperties": MAX_HEADERS},
    )


class McpServerCreate(ma.Schema):
    name = fields.String(
        required=True,
        validate=validate.Regexp(NAME),
        metadata={
            "description": "how agents name the server's tools (mcp__<name>__<tool>): [a-z0-9-]{1,32}, no underscore; "
            "unique in the tenant and not the name of an operator server (409)"
        },
    )
    url = fields.String(required=True, metadata={"description": "the server's streamable HTTP endpoint"})
    headers = _headers(f"{HEADERS}; default none")
    trusted = JsonBoolean(
        load_default=False,
        metadata={
            "description": "true: the server's tool annotations are believed, so a tool saying readOnlyHint: true "
            "runs without a reviewer by default; false (the default): every call of its tools waits for one"
        },
    )
    description = fields.String(
        load_default="",
        validate=validate.Length(max=1000),
        metadata={"description": "a note for people, at most 1000 characters; default empty"},
    )


class McpServerUpdate(McpServerCreate):
    name = fields.String(
        validate=validate.Regexp(NAME),
        metadata={"description": "the server's name as in the URL, if given: a server is never renamed (400)"},
    )
    headers = _headers(f"{HEADERS}; left out, the stored headers are kept; given ({{}} included), they replace them")


class McpServer(ma.Schema):
    name = fields.String(required=True, metadata={"description": "the server's name, as agents' tools name it"})
    scope = fields.String(
        required=True,
        validate=validate.OneOf(("operator", "tenant")),
        metadata={
            "description": "operator: declared by the server's operator (HANGO_MCP_CONFIG), trusted, read-only "
            "here; tenant: added by the tenant"
        },
    )
    transport = fields.String(
        required=True,
        validate=validate.OneOf(("stdio", "streamable_http")),
        metadata={"description": "how hango reaches it: a process it starts (stdio, operators only) or HTTP"},
    )
    trusted = fields.Boolean(
        required=True, metadata={"description": "whether its tools' annotations count for the default rule"}
    )
    description = fields.String(required=True, metadata={"description": "a note for people"})
    url = fields.String(metadata={"description": "tenant servers only: the endpoint (never its headers)"})
    created_by = fields.UUID(
        allow_none=True,
        metadata={"description": "tenant servers only: who added it; null once that user is deleted"},
    )
    created_at = fields.DateTime(metadata={"description": "tenant servers only: when it was added"})
    updated_at = fields.DateTime(metadata={"description": "tenant servers only: when it was last replaced"})


class McpServerTool(ma.Schema):
    name = fields.String(required=True, metadata={"description": "the tool's name, as its server knows it"})
    hango_name = fields.String(
        required=True, metadata={"description": "mcp__<server>__<tool>: how agents' tools and rules name it"}
    )
    title = fields.String(
        required=True, allow_none=True, metadata={"description": "its human title, if the server gives one"}
    )
    description = fields.String(required=True, metadata={"description": "what the server says the tool does"})
    input_schema = fields.Dict(
        required=True, metadata={"description": "the JSON Schema of its arguments (inputSchema)"}
    )
    annotations = fields.Dict(
        required=True,
        metadata={
            "description": "the hints the server gives (readOnlyHint, destructiveHint, idempotentHint, "
            "openWorldHint...), believed only of a trusted server"
        },
    )
    definition_sha256 = fields.String(
        required=True,
        metadata={
            "description": "SHA-256 of the RFC 8785 canonical JSON of the tool exactly as the server listed it, "
            "as a run pins it and an approval carries it"
        },
    )


McpServerList = list_of(McpServer, "McpServerList")
UNAVAILABLE = examples.problem(
    502,
    "mcp-unavailable",
    "MCP server unavailable",
    "MCP server docs is unavailable: did not list its tools within 10s",
    server="docs",
)


@blp.route("/mcp-servers", methods=["POST"])
@blp.problems(400, 403, 409)
@blp.arguments(McpServerCreate, example=examples.MCP_SERVER_CREATE)
@blp.response(201, McpServer, example=examples.MCP_SERVER)
@audited("mcp_server.create", "mcp_server")
def create_server(body: dict[str, Any]) -> dict[str, Any]:
    """Add an MCP server to the tenant (owner, admin).

    Its tools become mcp__<name>__<tool> for the tenant's agents. The URL must be https, or http to a private
    address where HANGO_MCP_ALLOW_PRIVATE_URLS allows it, and resolve to addresses the server may reach (400
    otherwise). Nothing is sent to the server here: GET /v1/mcp-servers/{name}/tools tries it. A member gets a 403;
    a name already used in the tenant or by an operator server, or a tenant that already has
    HANGO_MAX_MCP_SERVERS_PER_TENANT servers, a 409. Audited as mcp_server.create, with the URL's host only.
    """
    server = service.create(services().runtime, principal(), _command(body, body["name"]))
    audit_target(
        "mcp_server", server.name, id=str(server.id), host=urlsplit(server.url).hostname, trusted=server.trusted
    )
    return _tenant_server(server)


@blp.route("/mcp-servers", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.response(200, McpServerList, example=examples.MCP_SERVERS)
def list_servers(args: dict[str, Any]) -> dict[str, Any]:
    """Every MCP server the tenant's agents may name (everyone in the tenant).

    The operator's servers first (scope operator: their name, trust, description and transport only), then the
    tenant's own (scope tenant), each by name, all in one page (next_cursor is null). Headers are never shown. A
    tenant server whose name an operator server took later is listed, but agents get the operator's.
    """
    listing = service.list_servers(services().runtime, principal())
    items = [_operator_server(spec) for spec in listing.operator] + [_tenant_server(row) for row in listing.tenant]
    return {"items": items, "next_cursor": None}


@blp.route("/mcp-servers/<name>", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.problems(404)
@blp.response(200, McpServer, example=examples.MCP_SERVER)
def get_server(args: dict[str, Any], name: str) -> dict[str, Any]:
    """One MCP server, as the tenant's agents mean its name (everyone in the tenant).

    The operator's server of that name if there is one, else the tenant's own; never its headers. Any other name,
    another tenant's server included, is a 404.
    """
    found = service.get(services().runtime, principal(), name)
    return _operator_server(found) if isinstance(found, ServerSpec) else _tenant_server(found)


@blp.route("/mcp-servers/<name>", methods=["PUT"])
@blp.problems(400, 403, 404, 409)
@blp.arguments(McpServerUpdate, example=examples.MCP_SERVER_UPDATE)
@blp.response(200, McpServer, example=examples.MCP_SERVER)
@audited("mcp_server.update", "mcp_server", target_arg="name")
def update_server(body: dict[str, Any], name: str) -> dict[str, Any]:
    """Replace a tenant MCP server (owner, admin).

    The body of POST, without name or with the same one: url, trusted and description are replaced (left out,
    trusted and description take their defaults); headers left out are kept, headers given replace them. The URL is
    checked as on POST. A member gets a 403; a name the tenant has no server of a 404, an operator server's a
    409. Audited as mcp_server.update, with the URL's host and whether the headers were replaced (never them).
    """
    updated = service.update(services().runtime, principal(), name, _command(body, body.get("name")))
    server = updated.server
    audit_target(
        "mcp_server",
        server.name,
        id=str(server.id),
        host=urlsplit(server.url).hostname,
        trusted=server.trusted,
        headers_replaced=updated.headers_replaced,
    )
    return _tenant_server(server)


@blp.route("/mcp-servers/<name>", methods=["DELETE"])
@blp.problems(403, 404, 409)
@blp.response(204)
@blp.doc(
    responses={
        "409": refusal(
            409,
            examples.problem(
                409,
                "conflict",
                "Conflict",
                f"MCP server docs is named by the tools of agents {examples.AGENT_ID}: change them first",
            ),
        )
    }
)
@audited("mcp_server.delete", "mcp_server", target_arg="name")
def delete_server(name: str) -> None:
    """Remove a tenant MCP server (owner, admin).

    Refused with a 409 while an agent's tools, or one of its subagents' tools, name the server (mcp__<name>__...),
    and for an operator server. A member gets a 403; a name the tenant has no server of a 404. Audited as
    mcp_server.delete.
    """
    server = service.delete(services().runtime, principal(), name)
    audit_target("mcp_server", server.name, id=str(server.id), host=urlsplit(server.url).hostname)


@blp.route("/mcp-servers/<name>/tools", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.problems(404, 502)
@blp.response(200, McpServerTool(many=True), example=examples.MCP_TOOLS)
@blp.doc(responses={"502": refusal(502, UNAVAILABLE)})
def list_tools(args: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The server's tools as it lists them now (everyone in the tenant).

    Each with its hango name, title, description, input schema, annotations and definition_sha256, as a run would
    pin it. A server that does not answer within HANGO_MCP_TIMEOUT, refuses, or answers wrongly is a 502
    urn:hango:problem:mcp-unavailable naming it (server); a name the tenant cannot use a 404.
    """
    return [_tool(tool) for tool in service.tools(services().runtime, principal(), name)]


def _command(body: dict[str, Any], name: str | None) -> ServerCommand:
    return ServerCommand(
        name=name,
        url=body["url"],
        trusted=body["trusted"],
        description=body["description"],
        headers=body.get("headers"),
    )


def _tenant_server(row: McpServerRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "scope": "tenant",
        "transport": "streamable_http",
        "trusted": row.trusted,
        "description": row.description,
        "url": row.url,
        "created_by": row.created_by,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }


def _operator_server(spec: ServerSpec) -> dict[str, Any]:
    # Never its URL, command, arguments, environment or headers: any of them may hold the operator's secrets.
    return {
        "name": spec.name,
        "scope": "operator",
        "transport": spec.transport,
        "trusted": spec.trusted,
        "description": spec.description,
    }


def _tool(tool: PinnedTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "hango_name": tool.hango_name,
        "title": tool.title,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations,
        "definition_sha256": tool.definition_sha256,
    }
