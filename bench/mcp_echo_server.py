"""The MCP server of ``bench/mcp_calls.py``: one read-only tool, ``echo``, over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("bench-echo", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def echo(text: str) -> str:
    """Answer the text."""
    return text


if __name__ == "__main__":
    server.run()
