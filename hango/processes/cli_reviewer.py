"""The reviewers' commands, ``hango approvals …``: a thin edge over :mod:`hango.client`.

Options, output and exit statuses are those of every remote command (:mod:`hango.processes.cli_remote`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from hango.agent.mcp import annotation_words
from hango.client import Approval, Client, Decision, DecisionResult, McpTool, ProblemError
from hango.client.types import ApprovalPreview, DecisionKind
from hango.processes.cli_remote import (
    connected,
    connection_options,
    display,
    emit_json,
    emit_json_lines,
    fail,
    run_line,
    shorten,
    summary,
    table,
    terminal_safe,
)

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
KNOWN_OPTIONS = frozenset({*DECISION_OPTIONS, "--message", "--args", *MODIFIERS})
T = TypeVar("T")
APPROVAL_STATES = ["pending", "decided", "expired", "cancelled", "all"]


@click.group()
def approvals() -> None:
    """List, show and decide approvals (needs a server: --url, --token)."""


@approvals.command("list")
@click.option("--run", "run_id", help="Only this run's approvals.")
@click.option("--state", default="pending", show_default=True, type=click.Choice(APPROVAL_STATES))
@connection_options
def approvals_list(run_id: str | None, state: str, url: str, token: str, as_json: bool) -> None:
    """The tenant's approval queue (or one run's approvals), oldest first, every page (JSON Lines with --json)."""
    with connected(url, token) as client:
        if run_id:
            found = client.iter_run_approvals(run_id, state=state, limit=200)
        else:
            found = client.iter_approvals(state=state, limit=200)
        if as_json:
            emit_json_lines(found)
            return
        items = list(found)
    if not items:
        click.echo(f"no {'' if state == 'all' else state + ' '}approvals")
    else:
        click.echo(approval_table(items))


def approval_table(items: list[Approval]) -> str:
    """Approvals as aligned columns, their arguments cut short; an MCP call's server and tool on a line below."""
    header = ("ID", "RUN", "TOOL", "CALL", "STATE", "CREATED", "ARGUMENTS")
    rows = (
        (a["id"], a["run_id"], _tool(a), a["tool_call_id"], a["state"], a["created_at"], summary(a["arguments"]))
        for a in items
    )
    lines = table(header, rows).splitlines()
    for index, item in reversed(list(enumerate(items, start=1))):
        mcp = item.get("mcp")
        if mcp:
            lines.insert(index + 1, f"  {_mcp_summary(mcp, item.get('definition_sha256'))}")
    return "\n".join(lines)


def _tool(approval: Approval) -> str:
    """The tool's name, marked when its server says it is destructive."""
    mcp = approval.get("mcp")
    destructive = bool(mcp and mcp["annotations"].get("destructiveHint") is True)
    return terminal_safe(approval["tool_name"]) + (" DESTRUCTIVE" if destructive else "")


def _mcp_summary(mcp: McpTool, digest: str | None) -> str:
    """An MCP call in one line: server and trust, tool, annotations, the start of its description and digest."""
    description = shorten(" ".join(mcp["description"].split()), 60)
    parts = [f"{_server(mcp)}: {_tool_title(mcp)}", f"annotations: {_annotations(mcp)}", terminal_safe(description)]
    return " | ".join([*parts, f"sha256:{(digest or '-')[:12]}"])


def _server(mcp: McpTool) -> str:
    return f"{terminal_safe(mcp['server'])} ({'trusted' if mcp['trusted'] else 'untrusted'})"


def _tool_title(mcp: McpTool) -> str:
    """The tool's title and name (``Write a note (poke)``), or its name alone."""
    tool = terminal_safe(mcp["tool"])
    return f"{terminal_safe(mcp['title'])} ({tool})" if mcp["title"] else tool


def _annotations(mcp: McpTool) -> str:
    """The annotations set to true in words, DESTRUCTIVE in capitals; an untrusted server's said to be hints."""
    words = [word.upper() if word == "destructive" else word for word in annotation_words(mcp["annotations"])]
    hints = "" if mcp["trusted"] else " (hints from an untrusted server)"
    return f"{', '.join(words) or 'none'}{hints}"


def _show_mcp(approval: Approval, mcp: McpTool) -> None:
    """An MCP call's server, tool, description (the server's text, its controls escaped), annotations and digest."""
    description = terminal_safe(mcp["description"]).replace("\n", "\n" + " " * 19)
    click.echo(f"{'mcp server:':<19}{_server(mcp)}")
    click.echo(f"{'mcp tool:':<19}{_tool_title(mcp)}")
    click.echo(f"{'description:':<19}{description or '-'}")
    click.echo(f"{'annotations:':<19}{_annotations(mcp)}")
    click.echo(f"{'definition_sha256:':<19}{display(approval['definition_sha256'])}")


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
        click.echo(f"{key + ':':<19}{terminal_safe(display(shown[key]))}")
    mcp = approval.get("mcp")
    if mcp:
        _show_mcp(approval, mcp)
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


@approvals.command(
    "decide",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True},
    options_metavar="[--url URL] [--token TOKEN] [--json]",
)
@click.argument("target_id", metavar="ID")
@click.argument("decision_options", nargs=-1, type=click.UNPROCESSED, metavar="DECISION...")
@connection_options
def approvals_decide(target_id: str, decision_options: tuple[str, ...], url: str, token: str, as_json: bool) -> None:
    """Decide every pending call of a run in one request, or one approval.

    ID is either a run's id, and then each DECISION names its CALL (the tool call id, see
    "hango approvals list --run RUN_ID"); or an approval's id (the first column of "hango
    approvals list"), and then one DECISION names no CALL:

    \b
      hango approvals decide RUN_ID --approve call_1 --reject call_2 --message M
      hango approvals decide APPROVAL_ID --approve

    Each DECISION is one of:

    \b
      --approve [CALL]
      --reject [CALL] --message M
      --respond [CALL] --message M
      --edit [CALL] --args JSON     (the call's new arguments, a JSON object)

    and may go on with:

    \b
      --sha256 DIGEST    the arguments_sha256 you reviewed ("hango approvals show"); if the
                         call's arguments are not those, the server refuses (409) and stores nothing
      --remember TTL     (approve only) also approve this exact call again, for TTL (e.g. 1h)
    """
    if target_id.startswith("-"):
        raise click.UsageError(
            "the id comes first: hango approvals decide RUN_ID --approve CALL ..., or APPROVAL_ID --approve"
        )
    decisions = parse_decisions(list(decision_options))
    with connected(url, token) as client:
        if "tool_call_id" in decisions[0]:
            result = _decide_run(client, target_id, decisions)
        else:
            result = _decide_approval(client, target_id, decisions[0])
    if as_json:
        emit_json(result)
        return
    click.echo(run_line(result["run"]))
    for approval in result["approvals"]:
        click.echo(f"  {_outcome(approval):<8}  {approval['tool_name']:<12}  {approval['tool_call_id']}")
        if approval["state"] == "pending":
            click.echo(f"    still pending: {_tally(approval)}")


def _decide_run(client: Client, run_id: str, decisions: list[Decision]) -> DecisionResult:
    """Decide calls of a run named by their call ids; an id that is an approval's is named as such."""
    try:
        return client.decide(run_id, decisions)
    except ProblemError as error:
        if error.status != 404:
            raise
        approval = _found(lambda: client.get_approval(run_id))
        if approval is None:
            _not_found(run_id)
        fail(
            f"404 Not found: {run_id} is an approval (of run {approval['run_id']}), not a run: name no CALL, "
            f"e.g. hango approvals decide {run_id} --approve"
        )


def _decide_approval(client: Client, approval_id: str, decision: Decision) -> DecisionResult:
    """Decide one approval named by its id: its run and call are read from ``GET /v1/approvals/{id}``."""
    approval = _found(lambda: client.get_approval(approval_id))
    if approval is None:
        if _found(lambda: client.get_run(approval_id)) is None:
            _not_found(approval_id)
        fail(
            f"404 Not found: {approval_id} is a run, not an approval: name the CALL of each decision, e.g. "
            f"hango approvals decide {approval_id} --approve CALL (its calls: hango approvals list --run {approval_id})"
        )
    return client.decide(approval["run_id"], [{**decision, "approval_id": approval["id"]}])


def _found(read: Callable[[], T]) -> T | None:
    """What ``read`` answers, or ``None`` when the server answers 404."""
    try:
        return read()
    except ProblemError as error:
        if error.status != 404:
            raise
        return None


def _not_found(target_id: str) -> NoReturn:
    fail(f"404 Not found: no run or approval you can see has the id {target_id}")


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
    """The decisions spelt by the options after the id, in their order.

    Each names its CALL (the id is a run's), or one alone names none (the id is an approval's): a decision option
    followed by another known option, or by nothing, names no call.

    Raises:
        click.UsageError: an unknown option, a missing value or follower, ``--args`` that is not a JSON object, or
            decisions that name their calls and decisions that do not, or several that do not.
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
        decision: Decision = {"decision": kind}
        if pending and pending[0] not in KNOWN_OPTIONS:
            decision["tool_call_id"] = pending.pop(0)
        follower = FOLLOWER.get(kind)
        if follower is not None:
            if not pending or pending[0] != follower:
                raise click.UsageError(f"{option} [CALL] must be followed by {follower}")
            pending.pop(0)
            value = _value(pending, follower)
            if kind == "edit":
                decision["args"] = _json_object(value)
            else:
                decision["message"] = value
        _modify(decision, pending, option)
        decisions.append(decision)
    _check_calls_named(decisions)
    return decisions


def _check_calls_named(decisions: list[Decision]) -> None:
    """Every decision names its call (a run's id), or a single one names none (an approval's id)."""
    if not decisions:
        raise click.UsageError("name at least one decision: --approve, --reject, --respond or --edit")
    named = sum(1 for decision in decisions if "tool_call_id" in decision)
    if named == len(decisions):
        return
    if named:
        raise click.UsageError(
            "name the CALL of every decision (after a run id) or of none (after an approval id), not of some"
        )
    if len(decisions) > 1:
        raise click.UsageError("an approval id takes one decision; to decide several calls, give the run id and CALLs")


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
