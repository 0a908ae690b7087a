"""The reviewers' commands, ``hango runs …`` and ``hango approvals …``: a thin edge over :mod:`hango.client`.

Each command talks to a server at ``--url`` / ``HANGO_URL`` with ``--token`` / ``HANGO_TOKEN``. Output is
human-readable by default; ``--json`` prints JSON only (one document, or JSON Lines for a stream). Exit status:
0 done, 1 refused by the server (its problem detail and field errors on stderr) or unreachable, 2 bad usage.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from hango.client import Approval, Client, Decision, Event, ProblemError, Run, TransportError
from hango.client.types import ApprovalPreview, DecisionKind

F = TypeVar("F", bound=Callable[..., Any])

# How each decision option is spelt, and the option that must follow it with its value.
DECISION_OPTIONS: dict[str, DecisionKind] = {
    "--approve": "approve",
    "--reject": "reject",
    "--respond": "respond",
    "--edit": "edit",
}
FOLLOWER: dict[DecisionKind, str] = {"reject": "--message", "respond": "--message", "edit": "--args"}
# What may follow a decision (after its required follower): the digest of the arguments the reviewer saw, and for
# an approve, a standing approval of the same call for a duration.
MODIFIERS = ("--sha256", "--remember")
APPROVAL_STATES = ["pending", "decided", "expired", "cancelled", "all"]


def connection_options(command: F) -> F:
    """The server and token options every reviewer command takes, with ``--json``."""
    command = click.option("--json", "as_json", is_flag=True, help="Print JSON only, for scripts.")(command)
    command = click.option("--token", envvar="HANGO_TOKEN", required=True, help="API token [env: HANGO_TOKEN].")(
        command
    )
    return click.option("--url", envvar="HANGO_URL", required=True, help="Server URL [env: HANGO_URL].")(command)


@contextmanager
def connected(url: str, token: str) -> Iterator[Client]:
    """A client of the server; a refusal or a network failure becomes exit status 1 with the reason on stderr."""
    # httpx logs every request at INFO: a reviewer's terminal shows the answers, not a log line per request.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        with Client(url, token) as client:
            yield client
    except ProblemError as error:
        report_problem(error)
        raise SystemExit(1) from error
    except TransportError as error:
        click.echo(f"error: {error}", err=True)
        raise SystemExit(1) from error


def report_problem(error: ProblemError) -> None:
    """Print a problem document for a human: status, title and detail, then each field error and what remains."""
    click.echo(f"error: {error.status} {error.title}: {error.detail}", err=True)
    for field_error in error.errors:
        click.echo(f"  {field_error['field']}: {field_error['message']}", err=True)
    for remaining in error.body.get("remaining") or []:
        click.echo(f"  undecided: {remaining['tool_call_id']} ({remaining['tool_name']})", err=True)


def emit_json(value: Any) -> None:
    """Print one compact JSON document on its own line."""
    click.echo(json.dumps(value, sort_keys=True))


@click.group()
def runs() -> None:
    """Start runs and watch their events (needs a server: --url, --token)."""


@runs.command("create")
@click.option("--agent", "agent_id", required=True, help="The agent's id.")
@click.option("--input", "text", required=True, help="The user's message.")
@click.option("--watch", is_flag=True, help="Then print the run's events live until it finishes.")
@connection_options
def runs_create(agent_id: str, text: str, watch: bool, url: str, token: str, as_json: bool) -> None:
    """Start a run of an agent, and optionally watch it."""
    with connected(url, token) as client:
        run = client.create_run(agent_id, text)
        emit_json(run) if as_json else click.echo(run_line(run))
        if watch:
            print_events(client.run_events(run["id"]), as_json)


@runs.command("watch")
@click.argument("run_id")
@connection_options
def runs_watch(run_id: str, url: str, token: str, as_json: bool) -> None:
    """Print a run's events from the start, live, until it finishes (JSON Lines with --json)."""
    with connected(url, token) as client:
        print_events(client.run_events(run_id), as_json)


def run_line(run: Run) -> str:
    """A run in one line."""
    error = f"  error: {run['error']}" if run["error"] else ""
    return f"run {run['id']}  {run['state']}  agent {run['agent_id']}{error}"


def print_events(events: Iterator[Event], as_json: bool) -> None:
    """Print each event as it arrives."""
    for event in events:
        if as_json:
            emit_json(event)
        else:
            click.echo(f"{event['id'] or '-':>5}  {event['type']:<22}  {summary(event['data'])}")


def summary(data: Any, width: int = 100) -> str:
    """Compact JSON cut to ``width`` characters."""
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= width else text[: width - 1] + "…"


@click.group()
def approvals() -> None:
    """List, show and decide approvals (needs a server: --url, --token)."""


@approvals.command("list")
@click.option("--run", "run_id", help="Only this run's approvals.")
@click.option("--state", default="pending", show_default=True, type=click.Choice(APPROVAL_STATES))
@connection_options
def approvals_list(run_id: str | None, state: str, url: str, token: str, as_json: bool) -> None:
    """The tenant's approval queue (or one run's approvals), oldest first, every page."""
    with connected(url, token) as client:
        if run_id:
            items = list(client.iter_run_approvals(run_id, state=state, limit=200))
        else:
            items = list(client.iter_approvals(state=state, limit=200))
    if as_json:
        emit_json(items)
    elif not items:
        click.echo(f"no {'' if state == 'all' else state + ' '}approvals")
    else:
        click.echo(approval_table(items))


def approval_table(items: list[Approval]) -> str:
    """Approvals as aligned columns."""
    header = ("ID", "RUN", "TOOL", "CALL", "STATE", "CREATED", "ARGUMENTS")
    rows = [
        (
            a["id"],
            a["run_id"],
            a["tool_name"],
            a["tool_call_id"],
            a["state"],
            a["created_at"],
            summary(a["arguments"], 60),
        )
        for a in items
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in [header, *rows]
    )


@approvals.command("show")
@click.argument("approval_id")
@connection_options
def approvals_show(approval_id: str, url: str, token: str, as_json: bool) -> None:
    """One approval, in any state."""
    with connected(url, token) as client:
        approval = client.get_approval(approval_id)
        # A pending file change is shown as the server works it out: the file the tool will write, and the diff.
        change = client.approval_preview(approval["id"]) if approval["state"] == "pending" else None
    if as_json:
        emit_json(approval)
        return
    shown: dict[str, Any] = dict(approval)
    shown_keys = ("id", "run_id", "tool_call_id", "tool_name", "state", "allowed_decisions", "created_at", "expires_at")
    for key in (*shown_keys, "arguments_sha256"):
        click.echo(f"{key + ':':<19}{display(shown[key])}")
    click.echo(f"{'arguments:':<19}{json.dumps(approval['arguments'], indent=2, sort_keys=True)}")
    if approval.get("description"):
        click.echo(f"{'why it waits:':<19}{approval['description']}")
    if approval.get("reviewers"):
        click.echo(f"{'reviewers:':<19}{display(approval['reviewers'])}")
    for key in ("on_expiry", "escalated_at"):
        if approval.get(key) not in (None, "fail"):
            click.echo(f"{key + ':':<19}{display(shown[key])}")
    if approval.get("approvals_required", 1) > 1:
        click.echo(f"{'votes:':<19}{_tally(approval)}")
        for vote in approval["votes"]:
            click.echo(f"{'':<19}{vote['vote']} by {vote['user_id']} at {vote['created_at']}")
    if approval["decision"]:
        for key in ("decision", "decision_args", "decision_message", "decided_by", "decided_at"):
            click.echo(f"{key + ':':<19}{display(shown[key])}")
    if change is not None and change["kind"] == "file":
        _show_change(change)


def _show_change(change: ApprovalPreview) -> None:
    """What a pending file change would do, as the server's preview says: never the path as the model wrote it."""
    owner = {"agent": "the agent's, persists across runs", "run": "the run's scratch space"}.get(
        change["storage"] or ""
    )
    click.echo(f"{'writes:':<19}{change['path'] or '-'}{f' ({owner})' if owner else ''}")
    if change["path_differs"]:
        click.echo(f"{'':<19}the call wrote the path as {json.dumps(change['file_path'])}")
    if change["error"]:
        click.echo(f"{'the tool refuses:':<19}{change['error']}")
    elif change["diff"] is not None:
        click.echo(change["diff"].rstrip("\n") or f"{'':<19}(no change)")
    elif change["note"]:
        click.echo(f"{'':<19}{change['note']}")


def display(value: Any) -> str:
    """A value for a human: lists joined, None as a dash, the rest as JSON or text."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@approvals.command(
    "decide",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True},
    options_metavar="[--url URL] [--token TOKEN] [--json]",
)
@click.argument("run_id")
@click.argument("decision_options", nargs=-1, type=click.UNPROCESSED, metavar="DECISION...")
@connection_options
def approvals_decide(run_id: str, decision_options: tuple[str, ...], url: str, token: str, as_json: bool) -> None:
    """Decide every pending call of RUN_ID in one request.

    Each DECISION is one of:

    \b
      --approve CALL
      --reject CALL --message M
      --respond CALL --message M
      --edit CALL --args JSON     (the call's new arguments, a JSON object)

    and may go on with:

    \b
      --sha256 DIGEST    the arguments_sha256 you reviewed ("hango approvals show"); if the
                         call's arguments are not those, the server refuses (409) and stores nothing
      --remember TTL     (approve only) also approve this exact call again, for TTL (e.g. 1h)

    CALL is the tool call id (see "hango approvals list --run RUN_ID").
    """
    if run_id.startswith("-"):
        raise click.UsageError("RUN_ID comes first: hango approvals decide RUN_ID --approve CALL ...")
    decisions = parse_decisions(list(decision_options))
    with connected(url, token) as client:
        result = client.decide(run_id, decisions)
    if as_json:
        emit_json(result)
        return
    click.echo(run_line(result["run"]))
    for approval in result["approvals"]:
        click.echo(f"  {_outcome(approval):<8}  {approval['tool_name']:<12}  {approval['tool_call_id']}")
        if approval["state"] == "pending":
            click.echo(f"    still pending: {_tally(approval)}")


def _tally(approval: Approval) -> str:
    """How far a quorum approval is: ``1 of 2 approvals``."""
    approvals = sum(1 for vote in approval.get("votes", []) if vote["vote"] == "approve")
    return f"{approvals} of {approval.get('approvals_required', 1)} approvals"


def _outcome(approval: Approval) -> str:
    """A decided approval's decision; a quorum approval still waiting for other reviewers shows as voted."""
    if approval["state"] == "pending":
        return "voted"
    return approval["decision"] or "-"


def parse_decisions(tokens: list[str]) -> list[Decision]:
    """The decisions spelt by the options after RUN_ID, in their order.

    Raises:
        click.UsageError: an unknown option, a missing value or follower, or ``--args`` that is not a JSON object.
    """
    pending = _split_equals(tokens)
    decisions: list[Decision] = []
    while pending:
        option = pending.pop(0)
        kind = DECISION_OPTIONS.get(option)
        if kind is None:
            raise click.UsageError(
                f"unexpected {option!r}: a decision starts with --approve, --reject, --respond or --edit"
            )
        decision: Decision = {"tool_call_id": _value(pending, option), "decision": kind}
        follower = FOLLOWER.get(kind)
        if follower is not None:
            if not pending or pending[0] != follower:
                raise click.UsageError(f"{option} CALL must be followed by {follower}")
            pending.pop(0)
            value = _value(pending, follower)
            if kind == "edit":
                decision["args"] = _json_object(value)
            else:
                decision["message"] = value
        _modify(decision, pending, option)
        decisions.append(decision)
    if not decisions:
        raise click.UsageError("name at least one decision: --approve, --reject, --respond or --edit")
    return decisions


def _modify(decision: Decision, pending: list[str], option: str) -> None:
    """Take the ``--sha256`` and ``--remember`` options that follow a decision."""
    while pending and pending[0] in MODIFIERS:
        modifier = pending.pop(0)
        value = _value(pending, modifier)
        if modifier == "--sha256":
            decision["arguments_sha256"] = value
        elif decision["decision"] != "approve":
            raise click.UsageError(f"--remember follows --approve only, not {option}")
        else:
            decision["remember"] = {"ttl": value}


def _split_equals(tokens: list[str]) -> list[str]:
    """``--option=value`` spelt as two tokens, for the decision options, their followers and modifiers."""
    known = {*DECISION_OPTIONS, "--message", "--args", *MODIFIERS}
    split: list[str] = []
    for token in tokens:
        name, equals, value = token.partition("=")
        split.extend([name, value] if equals and name in known else [token])
    return split


def _value(pending: list[str], option: str) -> str:
    if not pending:
        raise click.UsageError(f"{option} needs a value")
    return pending.pop(0)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise click.UsageError(f"--args is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise click.UsageError("--args must be a JSON object: the call's arguments, whole")
    return value
