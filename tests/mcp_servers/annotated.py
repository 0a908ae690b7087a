"""An MCP server whose tools carry every combination of annotations that hango's default rule looks at.

Tools (each answers ``NAME done``):
    ``peek()``: ``readOnlyHint: true``.
    ``poke()``: ``readOnlyHint: false``, ``destructiveHint: true``.
    ``plain()``: no annotations at all.
    ``hinted()``: annotations without ``readOnlyHint`` (``destructiveHint: false``, ``idempotentHint: true``,
    ``openWorldHint: true``): read-only is still not said.
    ``titled()``: the title ``Look it up`` and ``readOnlyHint: true``, ``idempotentHint: true``,
    ``openWorldHint: false``.

Environment:
    ``RECORD_FILE``: where every ``tools/call`` is recorded (see the package's docstring).

Run: ``python -m tests.mcp_servers.annotated [--http PORT]``.
"""

from __future__ import annotations

from mcp.types import ToolAnnotations

from tests.mcp_servers._common import new_server, serve

server = new_server("annotated")


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def peek() -> str:
    """Look, touching nothing."""
    return "peek done"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True), structured_output=False)
def poke() -> str:
    """Change something for good."""
    return "poke done"


@server.tool(structured_output=False)
def plain() -> str:
    """Do something the server says nothing about."""
    return "plain done"


@server.tool(
    annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=True, open_world_hint=True),
    structured_output=False,
)
def hinted() -> str:
    """Do something harmless and repeatable, without saying it only reads."""
    return "hinted done"


@server.tool(
    title="Look it up",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    structured_output=False,
)
def titled() -> str:
    """Look a word up."""
    return "titled done"


if __name__ == "__main__":
    serve(server, __doc__)
