"""MCP servers as hango connects to them: the operator's, from ``HANGO_MCP_CONFIG``, and the tenants' own.

The operator's file has the layout MCP clients share::

    {"mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"TOKEN": "${GIT_TOKEN}"}},
        "docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}}

``${VAR}`` in a string reads the environment of the process that reads the file. An entry may also say
``"description"``. Operator servers are trusted: their annotations count for the default rule. Only an operator
can make a worker start a process: tenant servers are streamable HTTP only.

A malformed file stops the process that reads it, with a message naming the entry (:class:`ConfigError`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hango.agent.mcp import SERVER_NAME
from hango.kernel.errors import ConfigError

Scope = Literal["operator", "tenant"]
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_STDIO_FIELDS = {"command", "args", "env", "description", "type", "cwd"}
_HTTP_FIELDS = {"url", "headers", "description", "type"}
# The ``type`` an entry may give, as MCP clients spell it.
_STDIO_TYPES = {"stdio"}
_HTTP_TYPES = {"http", "streamable-http", "streamableHttp", "streamable_http"}


@dataclass(frozen=True)
class ServerSpec:
    """One MCP server: how to reach it (a command, or a URL with headers), its scope and whether it is trusted.

    ``headers`` and ``env`` may hold secrets: never logged, never shown.
    """

    name: str
    scope: Scope
    trusted: bool
    description: str = ""
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def transport(self) -> Literal["stdio", "streamable_http"]:
        """How hango talks to it."""
        return "stdio" if self.command is not None else "streamable_http"

    def identity(self) -> str:
        """A digest of everything that reaches the server: a changed command, URL or header is another session."""
        material = {
            "name": self.name,
            "scope": self.scope,
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": self.cwd,
            "url": self.url,
            "headers": dict(self.headers),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def load_operator_servers(path: str | None, environ: Mapping[str, str]) -> dict[str, ServerSpec]:
    """The operator's servers by name, from the file ``HANGO_MCP_CONFIG`` names (none when unset).

    Raises:
        ConfigError: the file cannot be read, is not JSON, or an entry is malformed; the message names the entry.
    """
    if not path:
        return {}
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"HANGO_MCP_CONFIG: cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"HANGO_MCP_CONFIG: {path} is not JSON: {exc}") from exc
    servers = document.get("mcpServers") if isinstance(document, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError('HANGO_MCP_CONFIG: the file must be an object with "mcpServers": {name: server}')
    return {name: _operator_server(name, entry, environ) for name, entry in servers.items()}


def _operator_server(name: Any, entry: Any, environ: Mapping[str, str]) -> ServerSpec:
    where = f"HANGO_MCP_CONFIG: mcpServers.{name}"
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise ConfigError(f"{where}: a server name must match [a-z0-9-]{{1,32}} (no underscore)")
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: must be an object with a command or a url")
    if ("command" in entry) == ("url" in entry):
        raise ConfigError(f"{where}: must have either a command (stdio) or a url (streamable HTTP), not both")
    allowed = _STDIO_FIELDS if "command" in entry else _HTTP_FIELDS
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field")
    kind = entry.get("type")
    expected = _STDIO_TYPES if "command" in entry else _HTTP_TYPES
    if kind is not None and kind not in expected:
        given = "command" if "command" in entry else "url"
        raise ConfigError(
            f"{where}.type: {kind!r} is not a transport hango speaks with a {given} (use "
            f"{' or '.join(sorted(expected))}; the older SSE transport is not supported)"
        )
    description = _text(entry.get("description", ""), f"{where}.description", environ)
    if "command" in entry:
        return ServerSpec(
            name,
            "operator",
            trusted=True,
            description=description,
            command=_text(entry["command"], f"{where}.command", environ, required=True),
            args=tuple(_strings(entry.get("args", []), f"{where}.args", environ)),
            env=_string_map(entry.get("env", {}), f"{where}.env", environ),
            cwd=_text(entry["cwd"], f"{where}.cwd", environ) if "cwd" in entry else None,
        )
    url = _text(entry["url"], f"{where}.url", environ, required=True)
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"{where}.url: must be an http or https URL")
    return ServerSpec(
        name,
        "operator",
        trusted=True,
        description=description,
        url=url,
        headers=_string_map(entry.get("headers", {}), f"{where}.headers", environ),
    )


def _text(value: Any, where: str, environ: Mapping[str, str], *, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value):
        raise ConfigError(f"{where}: must be a {'non-empty ' if required else ''}string")
    return _expand(value, where, environ)


def _strings(value: Any, where: str, environ: Mapping[str, str]) -> list[str]:
    if not isinstance(value, list):
        raise ConfigError(f"{where}: must be a list of strings")
    return [_text(item, f"{where}[{index}]", environ) for index, item in enumerate(value)]


def _string_map(value: Any, where: str, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: must be an object of strings")
    return {str(key): _text(item, f"{where}.{key}", environ) for key, item in value.items()}


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{where}: ${{{name}}} is not set in the environment")
        return environ[name]

    return _VARIABLE.sub(variable, value)
