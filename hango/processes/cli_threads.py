"""``hango threads …``: conversations with an agent that go on across runs; a thin edge over :mod:`hango.client`.

``create`` starts a thread, ``send`` continues it with the user's next message (and with ``--watch`` follows that
run to its answer or its pause), ``show`` prints the conversation for a person to read, ``list`` the threads.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, get_args

import click

from hango.client import Client, Event, MultitaskStrategy, ProblemError, Run, Thread, ThreadMessage, ThreadStatus
from hango.processes.cli_remote import (
    agent_id,
    connected,
    connection_options,
    emit_json,
    emit_json_lines,
    report_problem,
    run_line,
    shorten,
    table,
    terminal_safe,
)
from hango.processes.cli_runs import pause_hint

THREAD_BUSY = "urn:hango:problem:thread-busy"
# A tool call's arguments and a tool's result are cut to this many characters in a conversation; its text is whole.
DETAIL_WIDTH = 100
# The events after which ``send --watch`` has nothing more to show until someone acts.
STOPS = frozenset({"run.finished", "run.awaiting_approval"})
# The role column of ``show``: as wide as its widest word, "assistant".
ROLE_WIDTH = 9


@click.group()
def threads() -> None:
    """Conversations with an agent that go on across runs (needs a server: --url, --token)."""


def _metadata(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, Any]:
    """``--metadata``: a JSON object (nothing: ``{}``); anything else is a usage error naming the option."""
    if value is None:
        return {}
    try:
        labels = json.loads(value)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", ctx, param) from error
    if not isinstance(labels, dict):
        raise click.BadParameter('must be a JSON object, e.g. {"customer": "acme"}', ctx, param)
    return labels


@threads.command("create")
@click.option("--agent", "agent", required=True, help="The agent's id, or its name.")
@click.option(
    "--metadata",
    "metadata",
    metavar="JSON",
    callback=_metadata,
    help='Labels of your own, a JSON object, e.g. {"customer": "acme"}; "threads list --metadata" filters on them.',
)
@connection_options
def threads_create(agent: str, metadata: dict[str, Any], url: str, token: str, as_json: bool) -> None:
    """Start a conversation with an agent (by its id or its name); continue it with "hango threads send"."""
    with connected(url, token) as client:
        thread = client.create_thread(agent_id(client, agent), metadata)
    if as_json:
        emit_json(thread)
        return
    click.echo(thread_line(thread))
    click.echo(f'send it a message: hango threads send {thread["id"]} "TEXT" --watch')


@threads.command("send")
@click.argument("thread_id")
@click.argument("text")
@click.option(
    "--strategy",
    type=click.Choice(get_args(MultitaskStrategy)),
    help="While a run of the thread is active: reject (the server's default; exit status 1), enqueue (start after "
    "it) or interrupt (cancel it).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Then follow the run until it ends or pauses: print the assistant's answer, or where to decide its calls.",
)
@connection_options
def threads_send(
    thread_id: str, text: str, strategy: MultitaskStrategy | None, watch: bool, url: str, token: str, as_json: bool
) -> None:
    """Continue a thread's conversation with the user's message TEXT: a run that sees the conversation so far.

    With --watch, the run is followed to its end or to its first pause for a reviewer (--json: its events as JSON
    Lines, up to that one).
    """
    with connected(url, token) as client:
        run = _start(client, thread_id, text, strategy)
        emit_json(run) if as_json else click.echo(run_line(run))
        if watch:
            events = _until_stop(client.run_events(run["id"]))
            emit_json_lines(events) if as_json else print_answer(events, run, client.base_url)


def _start(client: Client, thread_id: str, text: str, strategy: MultitaskStrategy | None) -> Run:
    """The run of ``text`` on the thread; a busy thread's refusal says how to send anyway."""
    try:
        return client.start_thread_run(thread_id, text, multitask_strategy=strategy)
    except ProblemError as error:
        if error.type != THREAD_BUSY:
            raise
        report_problem(error)
        hint = "  to send it anyway: --strategy enqueue (after that run) or --strategy interrupt (cancelling it)"
        click.echo(hint, err=True)
        raise SystemExit(1) from error


def _until_stop(events: Iterator[Event]) -> Iterator[Event]:
    """A run's events up to its end or its first pause, included."""
    for event in events:
        yield event
        if event["type"] in STOPS:
            return


def print_answer(events: Iterable[Event], run: Run, base_url: str) -> None:
    """What a person waits for from a run: the assistant's messages, then its end, or where to decide its calls."""
    requested: dict[str, dict[str, Any]] = {}
    for event in events:
        data = event["data"] if isinstance(event["data"], dict) else {}
        kind = event["type"]
        if kind == "message.created" and data.get("role") == "assistant" and not data.get("subagent_call_id"):
            click.echo("\n".join(message_lines(data.get("content") or [], {}, prefix="assistant: ")))
        elif kind == "approval.requested":
            requested[str(data.get("approval_id"))] = data
        elif kind == "run.awaiting_approval":
            pending = [str(approval_id) for approval_id in data.get("pending") or []]
            click.echo(f"run {run['id']}  awaiting_approval: {len(pending)} call(s) wait for a reviewer")
            for approval_id in pending:
                click.echo(pause_hint(approval_id, requested.get(approval_id, {}), base_url, indent=2))
        elif kind == "run.finished":
            error = f": {data['error']}" if data.get("error") else ""
            click.echo(f"run {run['id']}  {data.get('state')}{error}")


@threads.command("show")
@click.argument("thread_id")
@connection_options
def threads_show(thread_id: str, url: str, token: str, as_json: bool) -> None:
    """A thread: its status and metadata, then its conversation, message by message (--json: one object holding
    the thread and its messages)."""
    with connected(url, token) as client:
        thread = client.get_thread(thread_id)
        messages = list(client.iter_thread_messages(thread_id, limit=200))
        states = {run["id"]: run["state"] for run in client.iter_thread_runs(thread_id, limit=200)}
    if as_json:
        emit_json({"thread": thread, "messages": messages})
        return
    for name, value in _details(thread):
        click.echo(f"{name + ':':<11}{value}")
    click.echo()
    click.echo("\n".join(conversation_lines(messages, states)) or "no messages yet")


def _details(thread: Thread) -> list[tuple[str, str]]:
    return [
        ("thread", thread["id"]),
        ("agent", thread["agent_id"]),
        ("status", thread["status"]),
        ("metadata", terminal_safe(json.dumps(thread["metadata"], ensure_ascii=False, sort_keys=True))),
        ("created", f"{thread['created_at']} by {thread['created_by']}"),
        ("updated", thread["updated_at"]),
        ("last run", thread["last_run_id"] or "-"),
        ("messages", str(thread["message_count"])),
    ]


def conversation_lines(messages: list[ThreadMessage], states: Mapping[str, str]) -> list[str]:
    """The conversation for a person: a heading for each run, then each message's number, role and content.

    A run missing from ``states`` is one of the thread a fork was taken from, whose messages this one shares.
    """
    names = {
        block["id"]: str(block.get("name"))
        for message in messages
        for block in message["content"]
        if block.get("type") == "tool_use"
    }
    lines: list[str] = []
    run_id = None
    for message in messages:
        if message["run_id"] != run_id:
            run_id = message["run_id"]
            lines += ["", f"run {run_id}  {states.get(run_id, '(of the thread this one was forked from)')}"]
        prefix = f"{message['seq']:>4}  {message['role']:<{ROLE_WIDTH}}  "
        lines += message_lines(message["content"], names, prefix=prefix)
    return lines[1:]


def message_lines(content: list[dict[str, Any]], names: Mapping[str, str], *, prefix: str) -> list[str]:
    """A message's blocks, its first line after ``prefix`` and the others under it: text whole (a model's or a
    person's, its terminal controls escaped), each call by its tool's name and arguments, each result by the name of
    the tool it answers and the start of its content."""
    lines: list[str] = []
    for block in content:
        lines += _block_lines(block, names)
    indent = " " * len(prefix)
    return [(prefix if index == 0 else indent) + line for index, line in enumerate(lines or [""])]


def _block_lines(block: dict[str, Any], names: Mapping[str, str]) -> list[str]:
    kind = block.get("type")
    if kind == "text":
        return terminal_safe(str(block.get("text", ""))).splitlines()
    if kind == "tool_use":
        arguments = json.dumps(block.get("input"), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        return [f"calls {block.get('name')} {terminal_safe(shorten(arguments, DETAIL_WIDTH))}"]
    if kind == "tool_result":
        outcome = "error" if block.get("is_error") else "ok"
        name = names.get(str(block.get("tool_use_id")), str(block.get("tool_use_id")))
        result = " ".join(str(block.get("content", "")).split())
        return [f"{name} {outcome}: {terminal_safe(shorten(result, DETAIL_WIDTH))}"]
    return [f"({kind} block)"]


@threads.command("list")
@click.option("--status", type=click.Choice(get_args(ThreadStatus)), help="Only threads with this status.")
@click.option("--agent", "agent", help="Only threads with this agent (its id, or its name).")
@click.option(
    "--metadata",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="Only threads whose metadata has KEY with VALUE (compared as text); repeat for several.",
)
@connection_options
def threads_list(
    status: ThreadStatus | None, agent: str | None, labels: tuple[str, ...], url: str, token: str, as_json: bool
) -> None:
    """The threads you can see (a member: their own), newest first, every page (JSON Lines with --json)."""
    metadata = _labels(labels)
    with connected(url, token) as client:
        chosen = agent_id(client, agent) if agent else None
        found = client.iter_threads(status=status, agent_id=chosen, metadata=metadata, limit=200)
        if as_json:
            emit_json_lines(found)
            return
        items = list(found)
    if not items:
        click.echo("no threads")
        return
    header = ("ID", "AGENT", "STATUS", "MESSAGES", "UPDATED", "METADATA")
    click.echo(table(header, (_thread_row(thread) for thread in items)))


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="'--metadata'")
        labels[key] = value
    return labels


def _thread_row(thread: Thread) -> tuple[str, ...]:
    metadata = json.dumps(thread["metadata"], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return (
        thread["id"],
        thread["agent_id"],
        thread["status"],
        str(thread["message_count"]),
        thread["updated_at"],
        terminal_safe(shorten(metadata, 60)),
    )


def thread_line(thread: Thread) -> str:
    """A thread in one line."""
    labels = json.dumps(thread["metadata"], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    metadata = f"  metadata {terminal_safe(shorten(labels, 60))}" if thread["metadata"] else ""
    return f"thread {thread['id']}  {thread['status']}  agent {thread['agent_id']}{metadata}"
