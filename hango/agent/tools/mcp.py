"""A run's pinned MCP tools as hango tools: the definition the model sees, the schema its arguments meet, and a
handler that sends the call to the server through whatever the worker gives it (:data:`McpCaller`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from hango.agent.mcp import PinnedTool, pinned_of
from hango.agent.tools.base import Tool, ToolContext, ToolError, ToolRegistry

# Sends one call and returns its result text; raises ToolError for an error result (the server's, or hango's:
# unavailable, timed out, definition changed).
McpCaller = Callable[[PinnedTool, ToolContext, dict[str, Any]], str]


def mcp_tool(pinned: PinnedTool, caller: McpCaller | None = None) -> Tool:
    """The hango tool of a pinned MCP tool. MCP tools are never idempotent for hango: an approved call whose worker
    died while it ran is answered "outcome unknown" rather than sent again. Without a ``caller`` (the API checking
    an edit against the schema) the tool cannot run."""
    return Tool(
        name=pinned.hango_name,
        description=pinned.description or pinned.title or pinned.name,
        parameters=pinned.input_schema,
        handler=partial(caller or _not_here, pinned),
        writes=pinned.writes,
        own_deadline=True,
        shown=pinned.shown(),
    )


def mcp_tools(pinned: Iterable[PinnedTool], caller: McpCaller | None = None) -> list[Tool]:
    """:func:`mcp_tool` of each."""
    return [mcp_tool(tool, caller) for tool in pinned]


def with_pinned(tools: ToolRegistry, stored: Iterable[Mapping[str, Any]] | None) -> ToolRegistry:
    """``tools`` and a run's pinned MCP tools (``runs.mcp_tools``), as the API checks its calls' edits and grants:
    they cannot run here."""
    pinned = pinned_of(stored)
    return tools.extended(mcp_tools(pinned.values())) if pinned else tools


def _not_here(pinned: PinnedTool, context: ToolContext, arguments: dict[str, Any]) -> str:
    raise ToolError(f"{pinned.hango_name} cannot run here")
