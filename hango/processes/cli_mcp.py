"""``hango mcp …``: the MCP servers a tenant's agents may name, and what tools each offers now; a thin edge over
:mod:`hango.client`."""

from __future__ import annotations

import click

from hango.agent.mcp import annotation_words
from hango.client import McpServer, McpServerTool
from hango.processes.cli_remote import connected, connection_options, emit_json_lines, table, terminal_safe


@click.group()
def mcp() -> None:
    """List MCP servers and their tools (needs a server: --url, --token)."""


@mcp.command("list")
@connection_options
def mcp_list(url: str, token: str, as_json: bool) -> None:
    """Every MCP server the tenant's agents may name: the operator's first, then the tenant's own (JSON Lines with
    --json). Headers are never shown."""
    with connected(url, token) as client:
        servers = client.mcp_servers()
    if as_json:
        emit_json_lines(servers)
        return
    if not servers:
        click.echo("no MCP servers")
        return
    header = ("NAME", "SCOPE", "TRANSPORT", "TRUSTED", "URL", "DESCRIPTION")
    click.echo(table(header, (_server_row(server) for server in servers)))


def _server_row(server: McpServer) -> tuple[str, ...]:
    trusted = "yes" if server["trusted"] else "no"
    return (
        server["name"],
        server["scope"],
        server["transport"],
        trusted,
        server.get("url") or "-",
        terminal_safe(server["description"] or "-"),
    )


@mcp.command("tools")
@click.argument("name")
@connection_options
def mcp_tools(name: str, url: str, token: str, as_json: bool) -> None:
    """The tools the MCP server NAME lists now, by the names agents use (mcp__NAME__TOOL), with what their
    annotations say: read-only, destructive, idempotent, open-world. A destructive tool is marked DESTRUCTIVE.

    A server that does not answer is exit status 1, with the server's 502 problem on stderr.
    """
    with connected(url, token) as client:
        tools = client.mcp_server_tools(name)
    if as_json:
        emit_json_lines(tools)
        return
    if not tools:
        click.echo(f"MCP server {name} lists no tools")
        return
    click.echo(table(("TOOL", "ANNOTATIONS", "TITLE"), (_tool_row(tool) for tool in tools)))
    destructive = sum(1 for tool in tools if _destructive(tool))
    if destructive:
        click.echo(
            f"DESTRUCTIVE: the server says {destructive} of these tools may delete or overwrite data; review their "
            "calls with care"
        )


def _tool_row(tool: McpServerTool) -> tuple[str, ...]:
    words = ["DESTRUCTIVE" if word == "destructive" else word for word in annotation_words(tool["annotations"])]
    # The name and title are the server's own text: a hostile one's controls are shown escaped, never obeyed.
    return (terminal_safe(tool["hango_name"]), ", ".join(words) or "-", terminal_safe(tool["title"] or "-"))


def _destructive(tool: McpServerTool) -> bool:
    return tool["annotations"].get("destructiveHint") is True
