"""What every command that talks to a server shares: its options, its client, and how it reports a refusal.

Such a command reaches the server at ``--url`` / ``HANGO_URL`` with ``--token`` / ``HANGO_TOKEN``. Output is
human-readable by default; ``--json`` prints JSON only: one object, or one object per line (JSON Lines) for a list
or a stream. Exit status: 0 done, 1 refused by the server (its problem and field errors on stderr) or unreachable,
2 bad usage.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from hango.client import Agent, Client, ProblemError, Run, TransportError

F = TypeVar("F", bound=Callable[..., Any])
# What a terminal would obey rather than print: control characters (but tab and newline), and the bidirectional
# overrides that make a line read otherwise than it is.
TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _required_setting(variable: str) -> Callable[[click.Context, click.Parameter, str | None], str]:
    """An option callback that names the environment variable when neither it nor the option is given."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
        if not value:
            raise click.UsageError(f"Missing {variable} (or --{param.name})", ctx)
        return value

    return check


def connection_options(command: F) -> F:
    """The server and token options every remote command takes, with ``--json``."""
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON only, for scripts.")(command)
    command = click.option(
        "--token", envvar="HANGO_TOKEN", callback=_required_setting("HANGO_TOKEN"), help="API token [env: HANGO_TOKEN]."
    )(command)
    return click.option(
        "--url", envvar="HANGO_URL", callback=_required_setting("HANGO_URL"), help="Server URL [env: HANGO_URL]."
    )(command)


@contextmanager
def connected(url: str, token: str) -> Iterator[Client]:
    """A client of the server; a refusal or a network failure becomes exit status 1 with the reason on stderr."""
    # httpx logs every request at INFO: a terminal shows the answers, not a log line per request.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with Client(url, token) as client:
            yield client
    except ProblemError as error:
        report_problem(error)
        raise SystemExit(1) from error
    except TransportError as error:
        fail(str(error))


def report_problem(error: ProblemError) -> None:
    """Print a problem document for a human: status, title and detail, then each field error and what remains.

    A validation problem's detail already spells its first field errors out; they are printed once, each on a line
    of its own, so the detail is left out when it repeats them.
    """
    lines = [f"  {field_error['field']}: {field_error['message']}" for field_error in error.errors]
    repeats = any(line.strip() in error.detail for line in lines)
    click.echo(f"error: {error.status} {error.title}{'' if repeats else ': ' + error.detail}", err=True)
    for line in lines:
        click.echo(line, err=True)
    for remaining in error.body.get("remaining") or []:
        click.echo(f"  undecided: {remaining['tool_call_id']} ({remaining['tool_name']})", err=True)


def fail(message: str, status: int = 1) -> NoReturn:
    """Print ``error: MESSAGE`` on stderr and exit with ``status`` (1: refused or unreachable, 2: bad usage)."""
    click.echo(f"error: {message}", err=True)
    raise SystemExit(status)


def emit_json(value: Any) -> None:
    """Print one compact JSON document on its own line."""
    click.echo(json.dumps(value, sort_keys=True))


def emit_json_lines(items: Iterable[Any]) -> None:
    """Print a list as JSON Lines: one compact object per line, as each arrives."""
    for item in items:
        emit_json(item)


def run_line(run: Run) -> str:
    """A run in one line."""
    error = f"  error: {run['error']}" if run["error"] else ""
    return f"run {run['id']}  {run['state']}  agent {run['agent_id']}{error}"


def table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    """Rows as aligned columns under ``header``; the last column, free text, is not padded."""
    lines = [header, *rows]
    widths = [max(len(line[column]) for line in lines) for column in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]]).rstrip()
        for line in lines
    )


def summary(data: Any, width: int = 60) -> str:
    """Compact JSON cut to ``width`` characters, the cut marked with ``…``."""
    return shorten(json.dumps(data, separators=(",", ":"), sort_keys=True), width)


def shorten(text: str, width: int) -> str:
    """``text`` of at most ``width`` characters: a longer one is cut and ends with ``…``."""
    return text if len(text) <= width else text[: width - 1] + "…"


def display(value: Any) -> str:
    """A value for a human: lists joined, None as a dash, the rest as JSON or text."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def terminal_safe(text: str) -> str:
    """Text written by someone else (an MCP server's description, say) as it reads, its controls escaped (``\\x1b``)."""
    return TERMINAL_CONTROLS.sub(lambda found: found.group().encode("unicode_escape").decode("ascii"), text)


def find_by_name(client: Client, name: Any) -> Agent | None:
    """The tenant's agent named ``name`` (names are unique in a tenant), or ``None``."""
    if not isinstance(name, str):
        return None  # the server refuses the definition, naming the field
    return next((agent for agent in client.iter_agents(limit=200) if agent["name"] == name), None)


def agent_id(client: Client, given: str) -> str:
    """The id of the agent ``given`` names: its id in any spelling, or its name (exit 1 when none has it)."""
    try:
        return str(uuid.UUID(given))
    except ValueError:
        found = find_by_name(client, given)
    if found is None:
        fail(f"404 Not found: no agent you can see has the id or name {given}")
    return found["id"]
