"""A live tour of a running hango: a run pauses for a human, a member is refused, an admin approves, it finishes;
a conversation goes on across two runs of a thread, the second answering from the first; a call to a tool of an MCP
server waits for the admin, then writes its note; then one more run pauses and waits for the reader to decide it in
the inbox.

Used by ``deploy/quickstart.sh``; run it yourself with ``python deploy/tour.py http://127.0.0.1:8000 OWNER_TOKEN``.
Everything goes through :mod:`hango.client`, the typed client of the API.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from hango.client import Client, ClientError, ProblemError
from hango.client.types import Agent, AuditEvent, CreatedUser, Decision, Event, Message, Role

WIDTH = 160
"""The widest line of an event or a message, unless the terminal is wider; a longer one is shortened, ending in …"""

EDIT = {
    "name": "edit_file",
    "args": {
        "file_path": "/memories/AGENTS.md",
        "old_string": "Prefer tea.",
        "new_string": "Prefer green tea, no sugar.",
    },
}

FIRST_MESSAGE = "Remember I like tea."
FOLLOW_UP = "What do I like to drink?"
FOLLOW_UP_ANSWER = "Tea: you told me so earlier in this conversation, and I saved it to my notes."
"""The notes agent's third scripted turn: the answer to :data:`FOLLOW_UP`, which only a run that was given the
thread's earlier turns plays (the scripted model plays the entry after the conversation's assistant turns)."""

MCP_SERVER = "notes"
"""The operator's MCP server the tour calls: deploy/quickstart.sh declares it in HANGO_MCP_CONFIG, running
examples/mcp/notes_server.py."""
NOTE = {"name": "tea.md", "text": "Green tea, no sugar."}
ANNOTATION_WORDS = (
    ("readOnlyHint", "read-only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open-world"),
)


def wait_until_ready(base: str) -> None:
    """Poll /readyz until the server answers, for at most 60 seconds."""
    deadline = time.monotonic() + 60
    with Client(base, None, timeout=2) as anonymous:
        while time.monotonic() < deadline:
            try:
                anonymous.ready()
                return
            except ClientError:
                time.sleep(0.2)
    sys.exit("the API did not become ready")


def say(text: str) -> None:
    """Print one narrated step."""
    print(f"\n== {text}", flush=True)


def compact(value: Any) -> str:
    """``value`` as JSON on one line, without the spaces ``json.dumps`` puts after commas and colons."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def one_line(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters; when it had to be shortened, its last one is "…"."""
    flat = " ".join(text.splitlines())
    return flat if len(flat) <= width else f"{flat[: width - 1]}…"


def line_width() -> int:
    """How wide a printed event may be: the terminal's width when it is wider than :data:`WIDTH`."""
    return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def event_line(event: Event, width: int) -> str:
    """One event as one line: its type and its data as compact JSON."""
    return one_line(f"  event {event['type']}: {compact(event['data'])}", width)


def message_line(message: Message, width: int) -> str:
    """One message of a run as one line: its number, its role and its content as compact JSON."""
    return one_line(f"  {message['seq']} {message['role']}: {compact(message['content'])}", width)


def audit_line(row: AuditEvent) -> str:
    """One audit row as compact JSON, whole: who did what to which target, with which outcome and detail."""
    fields = {
        "action": row["action"],
        "outcome": row["outcome"],
        "actor_id": row["actor_id"],
        "target_kind": row["target_kind"],
        "target_id": row["target_id"],
        "detail": row["detail"],
    }
    return f"  {compact(fields)}"


def person(owner: Client, role: Role) -> CreatedUser:
    """Create a user with a role; returns the created user with its token."""
    return owner.create_user(f"{role}-{uuid.uuid4().hex[:6]}@example.com", role)


def main(base: str, owner_token: str) -> None:
    """Play the tour."""
    wait_until_ready(base)
    with Client(base, owner_token) as owner:
        admin, member = person(owner, "admin"), person(owner, "member")
        say(f"an admin ({admin['email']}) and a member ({member['email']}) join the tenant")
        created = owner.create_agent(
            {
                "name": f"notes-bot-{uuid.uuid4().hex[:6]}",
                "system_prompt": "You keep notes.",
                "model": {
                    "provider": "scripted",
                    "script": [
                        {
                            "text": "Saving a note to memory.",
                            "tool_calls": [
                                {
                                    "name": "write_file",
                                    "args": {"file_path": "/memories/AGENTS.md", "content": "Prefer tea."},
                                }
                            ],
                        },
                        {"text": "Done: I will remember that."},
                        # Played only by a run that continues a conversation of two turns already: the thread's.
                        {"text": FOLLOW_UP_ANSWER},
                    ],
                },
                "tools": ["read_file", "write_file"],
            }
        )
        say("the agent has no interrupt configuration; its effective rules still protect /memories/ and /skills/:")
        print(json.dumps(created["effective_interrupt_on"], indent=2))
        with Client(base, member["token"]) as as_member, Client(base, admin["token"]) as as_admin:
            run = as_member.create_run(created["id"], "Remember I like tea.")
            say(f"the member starts run {run['id']}; watching its events live")
            width, decided = line_width(), []
            for event in as_member.run_events(run["id"]):
                print(event_line(event, width), flush=True)
                if event["type"] == "run.awaiting_approval":
                    decided.append(_decide(run["id"], as_member, as_admin))
            final = as_member.get_run(run["id"])
            say(f"the run is {final['state']} after waiting for a human; the messages:")
            for message in as_member.iter_messages(run["id"]):
                print(message_line(message, width))
        say("the audit trail of this run's decisions, oldest first (owners and admins only):")
        for row in _decision_audit(owner, decided):
            print(audit_line(row))
        _conversation(base, created["id"], admin, member)
        _mcp_call(base, owner, admin, member)
        _leave_one_for_you(base, owner, created["id"], admin, member)


def _conversation(base: str, agent_id: str, admin: CreatedUser, member: CreatedUser) -> None:
    """A conversation on a thread: the member's first message pauses on its write like the run before (the admin
    approves), and the follow-up, a run of its own, is answered from the thread's earlier turns."""
    with Client(base, member["token"]) as as_member, Client(base, admin["token"]) as as_admin:
        thread = as_member.create_thread(agent_id, {"topic": "tea"})
        say(f"the member starts a conversation with the same agent: thread {thread['id']}")
        run = as_member.start_thread_run(thread["id"], FIRST_MESSAGE)
        say(f'the member says "{FIRST_MESSAGE}" on the thread (run {run["id"]}); the answers, live:')
        _follow(run["id"], as_member, as_admin)
        run = as_member.start_thread_run(thread["id"], FOLLOW_UP)
        say(
            f'the member follows up on the same thread: "{FOLLOW_UP}" (run {run["id"]}), a run given the '
            "conversation so far:"
        )
        _follow(run["id"], as_member, as_admin)
        thread = as_member.get_thread(thread["id"])
    say(
        f"the thread is {thread['status']}: {thread['message_count']} messages over two runs, each stored once. "
        "Read the conversation with the CLI (as the member, whose thread it is):"
    )
    print(f"  HANGO_URL={base} HANGO_TOKEN={member['token']} .venv/bin/hango threads show {thread['id']}")


def _follow(run_id: str, member: Client, admin: Client) -> None:
    """Print a run's answers as they come; when it pauses, the admin approves its call."""
    for event in member.run_events(run_id):
        for line in answer_lines(event):
            print(line, flush=True)
        if event["type"] == "run.awaiting_approval":
            [approval] = admin.list_run_approvals(run_id)["items"]
            decisions: list[Decision] = [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}]
            decided = admin.decide(run_id, decisions)
            say(
                f"the run pauses: {approval['tool_name']} {compact(approval['arguments'])} waits; the admin "
                f"approves: HTTP 200, run {decided['run']['state']}"
            )


def answer_lines(event: Event) -> list[str]:
    """What a person reads of a run's event: an assistant's message (its text, the tools it calls) or the run's end;
    nothing for the other events."""
    data = event["data"] if isinstance(event["data"], dict) else {}
    if event["type"] == "run.finished":
        return [f"  run {data.get('state')}" + (f": {data['error']}" if data.get("error") else "")]
    if event["type"] != "message.created" or data.get("role") != "assistant" or data.get("subagent_call_id"):
        return []
    blocks = data.get("content") or []
    text = " ".join(" ".join(str(block["text"]).split()) for block in blocks if block.get("type") == "text")
    calls = [str(block["name"]) for block in blocks if block.get("type") == "tool_use"]
    return [f"  assistant: {text}" + (f" (calls {', '.join(calls)})" if calls else "")]


def _decision_audit(owner: Client, approval_ids: list[str]) -> list[AuditEvent]:
    """The ``approval.decide`` rows of these approvals alone, oldest first: not the rest of the tenant's trail."""
    rows = [
        row
        for approval_id in approval_ids
        for row in owner.iter_audit_events(
            action="approval.decide", target_kind="pending_approval", target_id=approval_id
        )
    ]
    return sorted(rows, key=lambda row: row["created_at"])


def mcp_shown(approval: Mapping[str, Any]) -> list[str]:
    """What a reviewer is shown of an MCP call, one line each: server and trust, tool, description, what the
    annotations say (a destructive tool's in capitals), and the digest of the definition the call is bound to."""
    mcp = approval["mcp"]
    words = [word for key, word in ANNOTATION_WORDS if mcp["annotations"].get(key) is True]
    said = ", ".join(word.upper() if word == "destructive" else word for word in words) or "none"
    title = f"{mcp['title']} ({mcp['tool']})" if mcp["title"] else mcp["tool"]
    return [
        f"  server: {mcp['server']} ({'trusted' if mcp['trusted'] else 'untrusted'})",
        f"  tool: {title}",
        f"  description: {mcp['description']}",
        f"  annotations: {said}",
        f"  definition_sha256: {approval['definition_sha256']}",
    ]


def tool_results(messages: list[Message]) -> list[str]:
    """Each tool result of a run's messages as ``  TOOL: CONTENT`` on one line, the tool named from the call it
    answers."""
    names = {
        block["id"]: block["name"]
        for message in messages
        for block in message["content"]
        if block.get("type") == "tool_use"
    }
    return [
        _result_line(names.get(block["tool_use_id"], "?"), block)
        for message in messages
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def _result_line(tool: str, block: dict[str, Any]) -> str:
    error = "(error) " if block.get("is_error") else ""
    return " ".join(f"  {tool}: {error}{block['content']}".splitlines())


def _mcp_agent(owner: Client) -> Agent | None:
    """An agent taking every tool of the MCP server :data:`MCP_SERVER`; ``None`` when this hango has no such server
    (the tour run against a server other than the quickstart's)."""
    try:
        return owner.create_agent(
            {
                "name": f"mcp-notes-{uuid.uuid4().hex[:6]}",
                "system_prompt": "You keep notes with the notes server.",
                "model": {
                    "provider": "scripted",
                    "script": [
                        {"text": "Saving the note.", "tool_calls": [_mcp_call_of("save_note", **NOTE)]},
                        {"text": "Reading it back.", "tool_calls": [_mcp_call_of("read_note", name=NOTE["name"])]},
                        {"text": "Saved and read back."},
                    ],
                },
                "tools": [f"mcp__{MCP_SERVER}__*"],
            }
        )
    except ProblemError as refused:
        if not any("unknown MCP server" in error["message"] for error in refused.errors):
            raise
        say(f"this hango has no MCP server named {MCP_SERVER} (deploy/quickstart.sh declares one): no MCP call")
        return None


def _mcp_call_of(tool: str, **args: str) -> dict[str, Any]:
    """A scripted call to a tool of :data:`MCP_SERVER`, by the name hango gives it (``mcp__<server>__<tool>``)."""
    return {"name": f"mcp__{MCP_SERVER}__{tool}", "args": args}


def _mcp_call(base: str, owner: Client, admin: CreatedUser, member: CreatedUser) -> None:
    """A run of an agent with the tools of an MCP server: its call to save_note waits (the server says the tool is
    destructive), the admin approves it, the server writes the note; read_note (a trusted server's tool that says
    it only reads) runs without a reviewer."""
    created = _mcp_agent(owner)
    if created is None:
        return
    waiting = {name: rule for name, rule in created["effective_interrupt_on"].items() if name.startswith("mcp__")}
    say(
        f"an agent takes the tools of the MCP server {MCP_SERVER} (mcp__{MCP_SERVER}__*); those whose calls wait for "
        "a reviewer by default:"
    )
    print(json.dumps(waiting, indent=2))
    with Client(base, member["token"]) as as_member, Client(base, admin["token"]) as as_admin:
        run = as_member.create_run(created["id"], "Remember: green tea, no sugar.")
        say(f"the member starts run {run['id']}; watching its events live")
        width = line_width()
        for event in as_member.run_events(run["id"]):
            print(event_line(event, width), flush=True)
            if event["type"] == "run.awaiting_approval":
                _approve_mcp_call(run["id"], as_admin)
        final = as_member.get_run(run["id"])
        say(
            f"the run is {final['state']}; read_note ran without a reviewer (a trusted server's tool that says it only "
            "reads). What the MCP server answered, as the model read it:"
        )
        # Whole, not shortened to the width: the answers of the tour's own two calls, the approval id at the end.
        for line in tool_results(list(as_member.iter_messages(run["id"]))):
            print(line)


def _approve_mcp_call(run_id: str, admin: Client) -> None:
    """Show the waiting MCP call as a reviewer sees it, then approve it as the admin."""
    [approval] = admin.list_run_approvals(run_id)["items"]
    say(f"paused: {approval['tool_name']} {json.dumps(approval['arguments'])} waits; a reviewer is shown")
    for line in mcp_shown(dict(approval)):
        print(line)
    decided = admin.decide(run_id, [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}])
    say(
        f"the admin approves: HTTP 200, run {decided['run']['state']}; the call goes to the server with the approval "
        f"id {approval['id']} as its idempotency key"
    )


def _leave_one_for_you(base: str, owner: Client, agent_id: str, admin: CreatedUser, member: CreatedUser) -> None:
    """Pause one more run, an edit of the note just saved, for the newcomer to decide in the inbox. The same agent
    runs it (its memories hold the note), with a script that edits the note; the first run keeps its snapshot."""
    name = owner.get_agent(agent_id)["name"]
    owner.replace_agent(
        agent_id,
        {
            "name": name,
            "system_prompt": "You keep notes.",
            "model": {"provider": "scripted", "script": [{"text": "Updating the note.", "tool_calls": [EDIT]}]},
            "tools": ["read_file", "edit_file"],
        },
    )
    with Client(base, member["token"]) as as_member:
        run = as_member.create_run(agent_id, "Actually, green tea without sugar.")
        deadline = time.monotonic() + 60
        while as_member.get_run(run["id"])["state"] != "awaiting_approval":
            if time.monotonic() > deadline:
                sys.exit(f"run {run['id']} did not pause for a decision")
            time.sleep(0.2)
    say(f"one more run ({run['id']}) waits for a decision: yours. Open the reviewers' inbox")
    print(f"  {base}/inbox")
    print(f"  and sign in with the admin's token: {admin['token']}")
    print(f"  (or: HANGO_URL={base} HANGO_TOKEN=<that token> .venv/bin/hango approvals list)")


def _decide(run_id: str, member: Client, admin: Client) -> str:
    """The member's refused approval, then the admin's; returns the approval's id."""
    [approval] = member.list_run_approvals(run_id)["items"]
    say(f"paused: {approval['tool_name']} {json.dumps(approval['arguments'])} waits for a decision")
    decisions: list[Decision] = [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}]
    try:
        member.decide(run_id, decisions)
    except ProblemError as refused:
        detail = f"HTTP {refused.status} {refused.title} - {refused.detail}"
        say(f"the member, who started the run, tries to approve it: {detail}")
    else:
        sys.exit("the member's approval was accepted: it must be refused")
    decided = admin.decide(run_id, decisions)
    say(f"the admin approves: HTTP 200, run {decided['run']['state']}")
    return approval["id"]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
