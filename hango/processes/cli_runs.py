"""``hango runs …``: start a run and watch its events, a thin edge over :mod:`hango.client`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import click

from hango.client import Event
from hango.processes.cli_remote import (
    agent_id,
    connected,
    connection_options,
    emit_json,
    run_line,
    shorten,
    summary,
)

# A line of ``runs watch`` stays readable in a terminal: longer text is cut, and the cut is marked with "…".
TEXT_WIDTH = 100
# How a reviewer decides each kind of decision a call allows, for the hint printed when the run pauses.
DECIDE_SPELLING = {
    "approve": "--approve",
    "reject": "--reject --message M",
    "respond": "--respond --message M",
    "edit": "--edit --args JSON",
}


@click.group()
def runs() -> None:
    """Start runs and watch their events (needs a server: --url, --token)."""


@runs.command("create")
@click.option("--agent", "agent", required=True, help="The agent's id, or its name.")
@click.option("--input", "text", required=True, help="The user's message.")
@click.option("--watch", is_flag=True, help="Then print the run's events live until it finishes.")
@connection_options
def runs_create(agent: str, text: str, watch: bool, url: str, token: str, as_json: bool) -> None:
    """Start a run of an agent (by its id or its name), and optionally watch it."""
    with connected(url, token) as client:
        run = client.create_run(agent_id(client, agent), text)
        emit_json(run) if as_json else click.echo(run_line(run))
        if watch:
            print_events(client.run_events(run["id"]), as_json, client.base_url)


@runs.command("watch")
@click.argument("run_id")
@connection_options
def runs_watch(run_id: str, url: str, token: str, as_json: bool) -> None:
    """Print a run's events from the start, live, until it finishes: one line each (a JSON object with --json).

    A line reads: the time it arrived, the event's type, and what matters of it. When the run pauses for a
    reviewer, where to decide follows: the inbox page and the "hango approvals decide" command of each call.
    """
    with connected(url, token) as client:
        print_events(client.run_events(run_id), as_json, client.base_url)


def print_events(events: Iterator[Event], as_json: bool, base_url: str) -> None:
    """Print each event as it arrives; at a pause, where each waiting call can be decided."""
    requested: dict[str, dict[str, Any]] = {}
    for event in events:
        if as_json:
            emit_json(event)
            continue
        click.echo(event_line(event, datetime.now()))
        data = event["data"] if isinstance(event["data"], dict) else {}
        if event["type"] == "approval.requested":
            requested[str(data.get("approval_id"))] = data
        elif event["type"] == "run.awaiting_approval":
            for approval_id in data.get("pending") or []:
                click.echo(pause_hint(str(approval_id), requested.get(str(approval_id), {}), base_url))


def pause_hint(approval_id: str, requested: dict[str, Any], base_url: str, *, indent: int = 10) -> str:
    """Where a waiting call is decided: its inbox page, and the command that decides it by its approval id.

    ``indent`` spaces lead the first line (by default, as many as an event line's time takes), two more the others.
    """
    call = f"{requested.get('tool_name', 'a call')} ({requested.get('tool_call_id', '?')})"
    allowed = [DECIDE_SPELLING[kind] for kind in requested.get("allowed_decisions") or ["approve"]]
    others = f"   (or {', '.join(allowed[1:])})" if len(allowed) > 1 else ""
    first, then = " " * indent, " " * (indent + 2)
    return "\n".join(
        [
            f"{first}waiting for a reviewer: {call}",
            f"{then}inbox:  {base_url}/inbox/approvals/{approval_id}",
            f"{then}or:     hango approvals decide {approval_id} {allowed[0]}{others}",
        ]
    )


def event_line(event: Event, received: datetime) -> str:
    """One event in one line: the time it arrived, its type and what matters of it for that type."""
    data = event["data"]
    describe = DESCRIPTIONS.get(event["type"])
    detail = describe(data) if describe is not None and isinstance(data, dict) else summary(data, TEXT_WIDTH)
    return f"{received:%H:%M:%S}  {event['type']:<22}  {detail}".rstrip()


def _message(data: dict[str, Any]) -> str:
    """A message's role, the first line of its text, the tools it calls and the results it carries."""
    blocks = [block for block in data.get("content") or [] if isinstance(block, dict)]
    text = "\n".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text").strip()
    first, _, rest = text.partition("\n")
    shown = shorten(first, TEXT_WIDTH) + (" …" if rest.strip() and len(first) <= TEXT_WIDTH else "")
    calls = [str(block.get("name")) for block in blocks if block.get("type") == "tool_use"]
    results = [
        f"{block.get('tool_use_id')} {'error' if block.get('is_error') else 'ok'}"
        for block in blocks
        if block.get("type") == "tool_result"
    ]
    parts = [shown] if shown else []
    parts += [f"calls {', '.join(calls)}"] if calls else []
    parts += [f"results {', '.join(results)}"] if results else []
    return f"{data.get('role', '?')}: {'  '.join(parts)}".rstrip()


def _call(data: dict[str, Any]) -> str:
    return f"{data.get('tool_name')} ({data.get('tool_call_id')})"


def _outcome(is_error: Any) -> str:
    return "error" if is_error else "ok"


def _approval(data: dict[str, Any]) -> str:
    return f"{_call(data)}  approval {data.get('approval_id') or data.get('id')}"


def _finished(data: dict[str, Any]) -> str:
    error = data.get("error")
    return f"{data.get('state')}" + (f": {shorten(str(error), TEXT_WIDTH)}" if error else "")


DESCRIPTIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "run.queued": lambda data: "",
    "run.started": lambda data: "",
    "run.resumed": lambda data: f"after {data.get('suspension_seconds')}s awaiting approval",
    "message.created": _message,
    "tool.started": _call,
    "tool.finished": lambda data: f"{_call(data)}  {_outcome(data.get('is_error'))}",
    "approval.requested": _approval,
    "approval.decided": lambda data: f"{_approval(data)}  {data.get('decision')} by {data.get('decided_by')}",
    "approval.expired": _approval,
    "approval.escalated": _approval,
    "approval.cancelled": _approval,
    "run.awaiting_approval": lambda data: f"{len(data.get('pending') or [])} call(s) wait for a reviewer",
    "subagent.started": lambda data: f"{data.get('subagent_type')} ({data.get('subagent_call_id')})",
    "subagent.finished": lambda data: f"({data.get('subagent_call_id')})  {_outcome(data.get('is_error'))}",
    "run.finished": _finished,
}
