"""``hango threads …`` as a user runs it: real ``hango`` processes against a real gunicorn server and worker; what
create, send --watch and show print, their --json, and how bad input is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from tests.integration.conftest import TenantFixture, create_agent
from tests.integration.hitl_helpers import MEMORY, decide, finished, pending, write_memory
from tests.support.processes import api_server, remote_cli

pytestmark = pytest.mark.usefixtures("worker_process")

SCRIPT = [
    {"text": "Saving a note.", "tool_calls": [write_memory("Prefer tea.", call_id="w1")]},
    {"text": "Done: noted."},
    {"text": "Tea: you told me so earlier in this conversation.\nAnything else?"},
]


@pytest.fixture(scope="module")
def base(settings: Settings) -> Iterator[str]:
    """One real API server for the module."""
    with api_server(settings) as url:
        yield url


@pytest.fixture
def hango(settings: Settings, base: str) -> Any:
    """Runs ``hango ARGS`` as ``person`` against the server (HANGO_URL and HANGO_TOKEN in its environment)."""
    return remote_cli(settings, base)


def test_create_send_watch_and_show_a_conversation(
    hango: Any, base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    owner = tenant.owner
    agent_id = create_agent(client, owner, SCRIPT, name="tea-bot")
    created = hango(owner, "threads", "create", "--agent", "tea-bot", "--metadata", '{"customer": "acme"}', "--json")
    assert created.returncode == 0, created.stderr
    thread = json.loads(created.stdout)
    assert (thread["agent_id"], thread["metadata"], thread["status"]) == (agent_id, {"customer": "acme"}, "idle")

    # The first message pauses on its write: --watch ends there, saying where to decide the call.
    sent = hango(owner, "threads", "send", thread["id"], "Remember I like tea.", "--watch")
    assert sent.returncode == 0, sent.stderr
    run_id = sent.stdout.split()[1]
    [item] = pending(client, owner, run_id)
    assert sent.stdout.splitlines() == [
        f"run {run_id}  queued  agent {agent_id}",
        "assistant: Saving a note.",
        f'           calls write_file {{"content":"Prefer tea.","file_path":"{MEMORY}"}}',
        f"run {run_id}  awaiting_approval: 1 call(s) wait for a reviewer",
        "  waiting for a reviewer: write_file (w1)",
        f"    inbox:  {base}/inbox/approvals/{item['id']}",
        f"    or:     hango approvals decide {item['id']} --approve   (or --edit --args JSON, --reject --message M, "
        "--respond --message M)",
    ]
    assert decide(client, owner, run_id, {"approval_id": item["id"], "decision": "approve"}).status_code == 200
    assert finished(client, owner, run_id)["state"] == "succeeded"

    # The follow-up is a run of its own that goes on from the conversation: the script's third entry answers.
    follow_up = hango(owner, "threads", "send", thread["id"], "What do I like?", "--watch")
    assert follow_up.returncode == 0, follow_up.stderr
    second = follow_up.stdout.split()[1]
    assert follow_up.stdout.splitlines()[1:] == [
        "assistant: Tea: you told me so earlier in this conversation.",
        "           Anything else?",
        f"run {second}  succeeded",
    ]

    shown = hango(owner, "threads", "show", thread["id"])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:3] == [f"thread:    {thread['id']}", f"agent:     {agent_id}", "status:    idle"]
    assert 'metadata:  {"customer": "acme"}' in lines
    assert "messages:  6" in lines
    conversation = lines[lines.index("") + 1 :]
    assert conversation == [
        f"run {run_id}  succeeded",
        "   1  user       Remember I like tea.",
        "   2  assistant  Saving a note.",
        f'                 calls write_file {{"content":"Prefer tea.","file_path":"{MEMORY}"}}',
        f"   3  tool       write_file ok: wrote 1 lines to {MEMORY}",
        "   4  assistant  Done: noted.",
        "",
        f"run {second}  succeeded",
        "   5  user       What do I like?",
        "   6  assistant  Tea: you told me so earlier in this conversation.",
        "                 Anything else?",
    ]
    as_json = hango(owner, "threads", "show", thread["id"], "--json")
    shown_json = json.loads(as_json.stdout)
    assert shown_json["thread"]["message_count"] == 6
    assert [message["seq"] for message in shown_json["messages"]] == [1, 2, 3, 4, 5, 6]

    listed = hango(owner, "threads", "list", "--metadata", "customer=acme", "--json")
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [thread["id"]]


def test_bad_input_is_refused_naming_the_option_and_a_busy_thread_says_how_to_send_anyway(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    owner = tenant.owner
    agent_id = create_agent(client, owner, SCRIPT)
    created = hango(owner, "threads", "create", "--agent", agent_id, "--json")
    thread = json.loads(created.stdout)

    unknown = hango(owner, "threads", "send", thread["id"], "hi", "--strategy", "later")
    assert unknown.returncode == 2
    assert "Invalid value for '--strategy': 'later' is not one of 'reject', 'enqueue', 'interrupt'" in unknown.stderr
    not_an_object = hango(owner, "threads", "create", "--agent", agent_id, "--metadata", "[1]")
    assert not_an_object.returncode == 2
    assert "Invalid value for '--metadata': must be a JSON object" in not_an_object.stderr

    paused = hango(owner, "threads", "send", thread["id"], "save it", "--watch", "--json")
    assert paused.returncode == 0, paused.stderr
    run, *events = [json.loads(line) for line in paused.stdout.splitlines()]
    assert events[-1]["type"] == "run.awaiting_approval"  # --json: the events up to the pause
    busy = hango(owner, "threads", "send", thread["id"], "are you there?")
    assert busy.returncode == 1
    assert busy.stderr.splitlines() == [
        f"error: 409 Thread busy: thread {thread['id']} has an active run ({run['id']}); wait for it to end, or send "
        'the run with "multitask_strategy": "enqueue" or "interrupt"',
        "  to send it anyway: --strategy enqueue (after that run) or --strategy interrupt (cancelling it)",
    ]
    queued = hango(owner, "threads", "send", thread["id"], "later then", "--strategy", "enqueue", "--json")
    assert queued.returncode == 0, queued.stderr
    assert json.loads(queued.stdout)["state"] == "queued"
