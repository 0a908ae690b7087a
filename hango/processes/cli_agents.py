"""``hango agents …``: agent definitions kept as files, applied to a server; a thin edge over :mod:`hango.client`.

A definition file holds the body ``POST /v1/agents`` takes, as YAML or JSON. ``apply`` creates the agent, or
replaces the tenant's agent of that ``name`` whole; ``show`` prints an agent as such a file.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import click
import yaml

from hango.client import Agent, Client, ProblemError
from hango.processes.cli_remote import (
    connected,
    connection_options,
    display,
    emit_json,
    emit_json_lines,
    fail,
    find_by_name,
    shorten,
    table,
)

# What the server adds to an agent's definition: everything else of an agent is what a file gives.
SERVER_KEYS = ("id", "effective_interrupt_on", "created_by", "created_at", "updated_at", "warnings")


class _DefinitionLoader(yaml.SafeLoader):
    """YAML as JSON can carry it: a date-like scalar stays the text it was written as."""


class _DefinitionDumper(yaml.SafeDumper):
    """YAML a person reads: a text of several lines (a system prompt) as a block, line by line."""


def _keep_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return str(loader.construct_scalar(node))  # type: ignore[arg-type]


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_DefinitionLoader.add_constructor("tag:yaml.org,2002:timestamp", _keep_as_text)
_DefinitionDumper.add_representer(str, _text)


@click.group()
def agents() -> None:
    """Apply agent definitions from files, list and show agents (needs a server: --url, --token)."""


@agents.command("apply")
@click.option(
    "-f", "--file", "source", required=True, metavar="FILE", help="The definition, YAML or JSON; - reads stdin."
)
@connection_options
def agents_apply(source: str, url: str, token: str, as_json: bool) -> None:
    """Create the agent a file defines, or replace the tenant's agent of that name (owner, admin).

    FILE holds the body POST /v1/agents takes (name, model, tools, interrupt_on, ...), as YAML, or JSON when its
    name ends in .json. The server's warnings about what the agent's interrupt rules no longer cover are printed on
    stderr. A file that cannot be read or is not one object is exit status 2.
    """
    definition = read_definition(source)
    with connected(url, token) as client:
        agent, done = apply_definition(client, definition)
    if as_json:
        emit_json(agent)
    else:
        click.echo(f"{done} agent {agent['name']} ({agent['id']})")
    for line in warning_lines(agent):
        click.echo(line, err=True)


def apply_definition(client: Client, definition: dict[str, Any]) -> tuple[Agent, str]:
    """Create the agent, or replace the one of its name; what the server answered, and which it was."""
    existing = find_by_name(client, definition.get("name"))
    if existing is None:
        try:
            return client.create_agent(definition), "created"
        except ProblemError as error:
            # Another apply of the same name may have created it since it was looked for: replace that one.
            existing = find_by_name(client, definition.get("name")) if error.status == 409 else None
            if existing is None:
                raise
    return client.replace_agent(existing["id"], definition), "updated"


def read_definition(source: str) -> dict[str, Any]:
    """The agent definition a file (or stdin, for ``-``) holds; anything else stops with exit status 2 and one line
    naming the file."""
    name = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as error:
        fail(f"{name}: cannot read it: {error.strerror or error}", 2)
    except UnicodeDecodeError:
        fail(f"{name}: not UTF-8 text", 2)
    definition = _parse(name, text, as_json=source.lower().endswith(".json"))
    if not isinstance(definition, dict):
        found = "nothing" if definition is None else f"a {type(definition).__name__}"
        fail(f"{name}: holds {found}, not an agent definition (a mapping of name, model, tools, ...)", 2)
    try:
        json.dumps(definition)
    except (TypeError, ValueError) as error:
        fail(f"{name}: holds a value JSON cannot carry: {error}", 2)
    return definition


def _parse(name: str, text: str, *, as_json: bool) -> Any:
    """The document in ``text``: JSON for a ``.json`` file, else YAML (of which JSON is a part)."""
    if as_json:
        try:
            return json.loads(text)
        except ValueError as error:
            fail(f"{name}: not valid JSON: {error}", 2)
    try:
        return yaml.load(text, Loader=_DefinitionLoader)  # noqa: S506 (a SafeLoader: plain data only)
    except yaml.YAMLError as error:
        fail(f"{name}: not valid YAML or JSON: {_yaml_reason(error)}", 2)


def _yaml_reason(error: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong, and where."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        where = error.problem_mark
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        return f"{error.problem}{at}"
    return " ".join(str(error).split())


def warning_lines(agent: Agent) -> list[str]:
    """The server's warnings about what the agent's rules no longer cover, one line each."""
    return [f"warning: {warning['tool']}: {warning['message']}" for warning in agent.get("warnings") or []]


@agents.command("list")
@connection_options
def agents_list(url: str, token: str, as_json: bool) -> None:
    """The tenant's agents, oldest first, every page (JSON Lines with --json)."""
    with connected(url, token) as client:
        found = client.iter_agents(limit=200)
        if as_json:
            emit_json_lines(found)
            return
        items = list(found)
    if not items:
        click.echo("no agents")
        return
    rows = ((a["id"], a["name"], _model(a), a.get("updated_at", "-"), _tools(a)) for a in items)
    click.echo(table(("ID", "NAME", "MODEL", "UPDATED", "TOOLS"), rows))


def _model(agent: Agent) -> str:
    model = agent.get("model") or {}
    return "/".join(str(part) for part in (model.get("provider"), model.get("name")) if part)


def _tools(agent: Agent) -> str:
    return shorten(display(agent.get("tools") or []), 60)


@agents.command("show")
@click.argument("agent")
@connection_options
def agents_show(agent: str, url: str, token: str, as_json: bool) -> None:
    """One agent, by its id or its name: as YAML that "hango agents apply -f" takes back, or as the API's JSON."""
    with connected(url, token) as client:
        found = _by_id(client, agent) or find_by_name(client, agent)
    if found is None:
        fail(f"404 Not found: no agent you can see has the id or name {agent}")
    if as_json:
        emit_json(found)
        return
    click.echo(f"# agent {found['id']}, created {found.get('created_at')}, updated {found.get('updated_at')}")
    # The name leads, as in a file a person writes; what the server adds stays out, so the file applies back.
    definition = {"name": found["name"], **{key: value for key, value in found.items() if key not in SERVER_KEYS}}
    click.echo(yaml.dump(definition, Dumper=_DefinitionDumper, sort_keys=False, allow_unicode=True).rstrip("\n"))


def _by_id(client: Client, text: str) -> Agent | None:
    """The agent whose id ``text`` spells, or ``None`` (not an id, or no such agent)."""
    try:
        agent_id = uuid.UUID(text)
    except ValueError:
        return None
    try:
        return client.get_agent(str(agent_id))
    except ProblemError as error:
        if error.status != 404:
            raise
        return None
