"""A live tour of a running hango: a run pauses for a human, a member is refused, an admin approves, it finishes.

Used by ``deploy/quickstart.sh``; run it yourself with ``python deploy/tour.py http://127.0.0.1:8000 OWNER_TOKEN``.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit


def call(base: str, method: str, path: str, token: str | None = None, body: Any = None) -> tuple[int, Any]:
    """One HTTP request; returns the status and the decoded JSON body."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method)  # noqa: S310 (loopback only)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def events(base: str, path: str, token: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The run's Server-Sent Events as ``(type, data)``, live, until the server closes the stream."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"})
    response = connection.getresponse()
    kind, data = "", ""
    for raw in response:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif not line and kind:
            yield kind, json.loads(data)
            kind, data = "", ""
    connection.close()


def wait_until_ready(base: str) -> None:
    """Poll /readyz until the server answers, for at most 60 seconds."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if call(base, "GET", "/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the API did not become ready")


def say(text: str) -> None:
    """Print one narrated step."""
    print(f"\n== {text}", flush=True)


def person(base: str, owner: str, role: str) -> dict[str, Any]:
    """Create a user with a role; returns the created user with its token."""
    status, body = call(
        base, "POST", "/v1/users", owner, {"email": f"{role}-{uuid.uuid4().hex[:6]}@example.com", "role": role}
    )
    assert status == 201, body
    return dict(body)


def main(base: str, owner: str) -> None:
    """Play the tour."""
    wait_until_ready(base)
    admin, member = person(base, owner, "admin"), person(base, owner, "member")
    say(f"an admin ({admin['email']}) and a member ({member['email']}) join the tenant")
    agent = {
        "name": f"notes-bot-{uuid.uuid4().hex[:6]}",
        "system_prompt": "You keep notes.",
        "model": {
            "provider": "scripted",
            "script": [
                {
                    "text": "Saving a note to memory.",
                    "tool_calls": [
                        {"name": "write_file", "args": {"file_path": "/memories/AGENTS.md", "content": "Prefer tea."}}
                    ],
                },
                {"text": "Done: I will remember that."},
            ],
        },
        "tools": ["read_file", "write_file"],
    }
    status, created = call(base, "POST", "/v1/agents", owner, agent)
    assert status == 201, created
    say("the agent has no interrupt configuration; its effective rules still protect /memories/ and /skills/:")
    print(json.dumps(created["effective_interrupt_on"], indent=2))
    status, run = call(
        base, "POST", "/v1/runs", member["token"], {"agent_id": created["id"], "input": "Remember I like tea."}
    )
    assert status == 202, run
    say(f"the member starts run {run['id']}; watching its events live")
    for kind, data in events(base, f"/v1/runs/{run['id']}/events", member["token"]):
        print(f"  event {kind}: {json.dumps(data)[:160]}", flush=True)
        if kind == "run.awaiting_approval":
            _decide(base, run["id"], member, admin)
    status, final = call(base, "GET", f"/v1/runs/{run['id']}", member["token"])
    say(f"the run is {final['state']} after waiting for a human; the messages:")
    for message in call(base, "GET", f"/v1/runs/{run['id']}/messages", member["token"])[1]["items"]:
        print(f"  {message['seq']} {message['role']}: {json.dumps(message['content'])[:150]}")
    say("the audit trail of the decision (owners and admins only):")
    trail = call(base, "GET", "/v1/audit-events?action=approval.decide", owner)[1]["items"]
    for row in trail:
        print(f"  {row['outcome']:7} by {row['actor_id']} on {row['target_kind']} {row['target_id']} {row['detail']}")


def _decide(base: str, run_id: str, member: dict[str, Any], admin: dict[str, Any]) -> None:
    status, listed = call(base, "GET", f"/v1/runs/{run_id}/approvals", member["token"])
    [approval] = listed["items"]
    say(f"paused: {approval['tool_name']} {json.dumps(approval['arguments'])} waits for a decision")
    body = {"decisions": [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}]}
    status, refused = call(base, "POST", f"/v1/runs/{run_id}/approvals", member["token"], body)
    say(f"the member, who started the run, tries to approve it: HTTP {status} {refused['title']} - {refused['detail']}")
    status, decided = call(base, "POST", f"/v1/runs/{run_id}/approvals", admin["token"], body)
    say(f"the admin approves: HTTP {status}, run {decided['run']['state']}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
