"""Tools from MCP servers, as the agent layer sees them: their names, their pinned definitions and their default rule.

An MCP tool is ``mcp__<server>__<tool>`` wherever hango names a tool; ``mcp__<server>__*`` in an agent's ``tools``
takes every tool of the server. Server names match ``[a-z0-9-]{1,32}`` (no underscore), so a name reads one way.

A run's worker lists the tools its agent names at the run's first step and keeps their definitions with the run
(:class:`PinnedTool`): the model sees those for the whole run, edits are checked against their input schema, and an
approved call is sent only while the server still lists the tool with the same ``definition_sha256``.

The default rule makes the same promise as the one on ``/memories/``: every MCP call waits for a human unless its
server is trusted **and** the tool says ``readOnlyHint: true``. An untrusted server's annotations never loosen
anything. A user entry for the tool wins; lifting the default takes an explicit ``false``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785

from hango.kernel.canonical import canonical_json

PREFIX = "mcp__"
SEPARATOR = "__"
WILDCARD = "*"
SERVER_NAME = re.compile(r"[a-z0-9-]{1,32}")
# Model providers refuse longer tool names.
MAX_TOOL_NAME = 64
# The annotations a reviewer is shown, in this order, with the word for each.
ANNOTATIONS = (
    ("readOnlyHint", "read-only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open-world"),
)


@dataclass(frozen=True)
class ToolName:
    """An MCP tool's hango name taken apart: the server, and the tool's own name (``*``: every tool)."""

    server: str
    tool: str

    @property
    def wildcard(self) -> bool:
        """Whether it names every tool of its server."""
        return self.tool == WILDCARD


def parse_name(name: str) -> ToolName | None:
    """``mcp__<server>__<tool>`` taken apart; ``None`` for a name that is not an MCP tool's."""
    if not name.startswith(PREFIX):
        return None
    server, separator, tool = name[len(PREFIX) :].partition(SEPARATOR)
    if not separator or not tool or not SERVER_NAME.fullmatch(server):
        return None
    return ToolName(server, tool)


def hango_name(server: str, tool: str) -> str:
    """The name hango gives a server's tool."""
    return f"{PREFIX}{server}{SEPARATOR}{tool}"


def is_mcp_name(name: str) -> bool:
    """Whether a tool name is spelt as an MCP tool's (``mcp__...``), valid or not."""
    return name.startswith(PREFIX)


def servers_named(names: Iterable[str]) -> list[str]:
    """The servers whose tools ``names`` name, in order of first mention."""
    found: dict[str, None] = {}
    for name in names:
        parsed = parse_name(name)
        if parsed is not None:
            found.setdefault(parsed.server)
    return list(found)


def selects(names: Iterable[str], hango_tool: str) -> bool:
    """Whether an agent's ``tools`` take an MCP tool: by its name, or by its server's wildcard."""
    parsed = parse_name(hango_tool)
    if parsed is None:
        return False
    wildcard = hango_name(parsed.server, WILDCARD)
    return any(name in (hango_tool, wildcard) for name in names)


def definition_sha256(listed: Mapping[str, Any]) -> str:
    """SHA-256 of the RFC 8785 canonical JSON of a tool exactly as its server listed it: anyone can recompute it
    from ``tools/list``. (A definition RFC 8785 cannot write, an integer beyond 2**53 say, takes hango's own
    canonical form, which is RFC 8785's wherever RFC 8785 can write the value.)"""
    try:
        encoded = rfc8785.dumps(dict(listed))
    except rfc8785.CanonicalizationError:
        encoded = canonical_json(dict(listed))
    return hashlib.sha256(encoded).hexdigest()


@dataclass(frozen=True)
class PinnedTool:
    """One MCP tool's definition as its server listed it when the run pinned it, and its server's trust then."""

    server: str
    listed: Mapping[str, Any]
    trusted: bool

    @classmethod
    def of_listing(cls, server: str, listed: Mapping[str, Any], *, trusted: bool) -> PinnedTool:
        """A tool as ``tools/list`` gave it (every member it sent)."""
        return cls(server, dict(listed), trusted)

    @property
    def name(self) -> str:
        """The tool's own name, as its server knows it."""
        return str(self.listed.get("name", ""))

    @property
    def hango_name(self) -> str:
        """``mcp__<server>__<tool>``."""
        return hango_name(self.server, self.name)

    @property
    def title(self) -> str | None:
        """The tool's human title (``title``, or the annotations' ``title``), if it gives one."""
        title = self.listed.get("title") or self.annotations.get("title")
        return str(title) if title else None

    @property
    def description(self) -> str:
        """What the server says the tool does."""
        return str(self.listed.get("description") or "")

    @property
    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments (an object schema when the server gives none)."""
        schema = self.listed.get("inputSchema")
        return dict(schema) if isinstance(schema, Mapping) else {"type": "object"}

    @property
    def annotations(self) -> dict[str, Any]:
        """The tool's annotations (hints the server gives; trusted only where the server is)."""
        annotations = self.listed.get("annotations")
        return dict(annotations) if isinstance(annotations, Mapping) else {}

    @property
    def definition_sha256(self) -> str:
        """:func:`definition_sha256` of the listed definition."""
        return definition_sha256(self.listed)

    @property
    def read_only(self) -> bool:
        """Whether the tool says it only reads (``readOnlyHint: true``); believed only of a trusted server."""
        return self.annotations.get("readOnlyHint") is True

    @property
    def waits_by_default(self) -> bool:
        """Whether the default rule holds its calls for a human: unless trusted **and** read-only."""
        return not (self.trusted and self.read_only)

    @property
    def writes(self) -> bool:
        """Whether its calls may change something: any tool that does not say it only reads."""
        return not self.read_only

    def default_rule(self) -> dict[str, Any] | None:
        """The rule its calls get when the agent's own rules say nothing of it; ``None``: they run unreviewed."""
        if not self.waits_by_default:
            return None
        return waiting_rule(self.server, "is not trusted" if not self.trusted else "does not say this tool only reads")

    def shown(self) -> dict[str, Any]:
        """What a reviewer of one of its calls is shown, and what the drift check compares."""
        return {
            "server": self.server,
            "tool": self.name,
            "title": self.title,
            "description": self.description,
            "annotations": {key: self.annotations[key] for key, _ in ANNOTATIONS if key in self.annotations},
            "trusted": self.trusted,
            "definition_sha256": self.definition_sha256,
        }

    def to_json(self) -> dict[str, Any]:
        """As ``runs.mcp_tools`` keeps it."""
        return {"server": self.server, "trusted": self.trusted, "listed": dict(self.listed)}

    @classmethod
    def of_json(cls, stored: Mapping[str, Any]) -> PinnedTool:
        """As ``runs.mcp_tools`` kept it."""
        return cls(str(stored["server"]), dict(stored["listed"]), bool(stored.get("trusted")))


def pinned_of(stored: Iterable[Mapping[str, Any]] | None) -> dict[str, PinnedTool]:
    """A run's pinned tools by hango name."""
    tools = (PinnedTool.of_json(item) for item in stored or ())
    return {tool.hango_name: tool for tool in tools}


def waiting_rule(server: str, reason: str) -> dict[str, Any]:
    """The default rule of a server's tool whose calls wait, saying why: "the server ``reason``"."""
    return {"description": f"Calls to tools of MCP server {server} need a reviewer: the server {reason}."}


def default_rules(pinned: Iterable[PinnedTool]) -> dict[str, Any]:
    """The default rules of the pinned tools whose calls wait by default, by hango name."""
    return {tool.hango_name: rule for tool in pinned if (rule := tool.default_rule()) is not None}


def annotation_words(annotations: Mapping[str, Any]) -> list[str]:
    """The annotations a tool sets to true, in a reviewer's words ("read-only", "destructive", ...)."""
    return [word for key, word in ANNOTATIONS if annotations.get(key) is True]
