"""``hango.client.Client`` against a real gunicorn server and a real worker: every resource it reads and writes,
pages followed through ``next_cursor``, problem documents as ``ProblemError``, and event streams that reconnect
with ``Last-Event-ID`` after the connection drops."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flask.testing import FlaskClient

from hango.client import Client, Event, ProblemError, Run, TransportError
from hango.kernel.config import Settings
from tests.integration.conftest import TenantFixture, create_agent, start_run
from tests.integration.hitl_helpers import MEMORY, suspended_run, write_memory
from tests.support.processes import ROOT, free_port, settings_env, wait_until
from tests.support.proxy import cutting_proxy
from tests.support.receiver import receiving

pytestmark = pytest.mark.usefixtures("worker_process")
TERMINAL = {"succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def base(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


def _agent(hango: Client, script: list[dict[str, Any]]) -> str:
    config = {"name": f"agent-{uuid.uuid4().hex[:8]}", "model": {"provider": "scripted", "script": script}}
    return hango.create_agent({**config, "tools": ["read_file", "write_file"]})["id"]


def _finished(hango: Client, run_id: str) -> Run:
    return wait_until(lambda: (run := hango.get_run(run_id))["state"] in TERMINAL and run)  # type: ignore[no-any-return]


def test_runs_are_created_read_and_listed_page_after_page(base: str, tenant: TenantFixture) -> None:
    with Client(base, tenant.owner.token) as hango:
        agent_id = _agent(hango, [{"text": "One."}, {"text": "Two."}])
        created = [hango.create_run(agent_id, f"go {n}") for n in range(3)]
        assert [run["state"] for run in created] == ["queued"] * 3
        finished = [_finished(hango, run["id"]) for run in created]

        first = hango.list_runs(limit=2)
        assert len(first["items"]) == 2
        assert first["next_cursor"]
        newest_first = [run["id"] for run in reversed(created)]
        assert [run["id"] for run in hango.iter_runs(limit=2)] == newest_first
        assert [run["id"] for run in hango.iter_runs(state="succeeded", limit=1)] == newest_first
        assert hango.get_run(created[0]["id"]) == finished[0]

        messages = hango.list_messages(created[0]["id"], limit=200)["items"]
        assert [m["role"] for m in messages] == ["user", "assistant"]
        assert list(hango.iter_messages(created[0]["id"], limit=1)) == messages
        assert hango.get_agent(agent_id)["id"] == agent_id
        assert agent_id in [agent["id"] for agent in hango.iter_agents(limit=1)]


def test_users_and_tokens_and_a_revoked_token_refused(base: str, tenant: TenantFixture) -> None:
    with Client(base, tenant.owner.token) as hango:
        me = hango.me()
        assert (me["user_id"], me["email"], me["tenant_id"], me["role"]) == (
            str(tenant.owner.user_id),
            tenant.owner.email,
            str(tenant.id),
            "owner",
        )
        member = hango.create_user(f"m-{uuid.uuid4().hex[:8]}@example.com", "member")
        emails = [user["email"] for user in hango.iter_users(limit=1)]
        assert member["email"] in emails
        assert len(emails) == len(set(emails)) == 2
        issued = hango.create_token(member["id"])
        with Client(base, issued["token"]) as as_member:
            assert as_member.me()["role"] == "member"
            assert list(as_member.iter_runs()) == []
            hango.revoke_token(issued["id"])
            with pytest.raises(ProblemError) as refused:
                as_member.list_runs()
    assert (refused.value.status, refused.value.type) == (401, "urn:hango:problem:unauthorized")


def test_a_400_raises_one_problem_error_with_its_field_errors(base: str, tenant: TenantFixture) -> None:
    with Client(base, tenant.owner.token) as hango, pytest.raises(ProblemError) as refused:
        hango.create_agent({"name": "bad", "model": {"provider": "scripted", "script": []}, "colour": "red"})
    error = refused.value
    assert (error.status, error.type) == (400, "urn:hango:problem:validation")
    assert error.title
    assert error.detail
    assert {"field": "colour", "message": "Unknown field."} in error.errors
    assert error.body["status"] == 400


class _Recording(httpx.HTTPTransport):
    """A transport that notes every request's method and path."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.asked.append(f"{request.method} {request.url.raw_path.decode()}")
        return super().handle_request(request)


def test_one_approval_is_one_request_whatever_the_size_of_the_queue(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("tea")]}])
    [approval] = client.get(f"/v1/runs/{run_id}/approvals", headers=tenant.owner.headers).json["items"]
    recording = _Recording()
    with Client(base, tenant.owner.token, transport=recording) as hango:
        assert hango.get_approval(approval["id"].upper()) == approval
    assert recording.asked == [f"GET /v1/approvals/{approval['id'].upper()}"]


def test_a_network_failure_is_a_transport_error_not_a_problem(tenant: TenantFixture) -> None:
    with Client(f"http://127.0.0.1:{free_port()}", tenant.owner.token) as hango, pytest.raises(TransportError):
        hango.health()


def test_a_suspended_runs_approval_is_listed_shown_decided_and_streamed(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": [write_memory("tea")]}, {"text": "Ok"}])
    with Client(base, tenant.owner.token) as hango:
        (approval,) = hango.list_run_approvals(run_id)["items"]
        assert (approval["tool_name"], approval["state"], approval["run_id"]) == ("write_file", "pending", run_id)
        assert approval in list(hango.iter_approvals(limit=1))
        assert hango.get_approval(approval["id"]) == approval
        with pytest.raises(ProblemError) as unknown:
            hango.get_approval(str(uuid.uuid4()))
        assert unknown.value.status == 404
        preview = hango.approval_preview(approval["id"])
        assert (preview["kind"], preview["path"], preview["storage"], preview["exists"]) == (
            "file",
            MEMORY,
            "agent",
            False,
        )
        assert (
            preview["diff"]
            == "--- /dev/null\n+++ b/memories/AGENTS.md\n@@ -0,0 +1 @@\n+tea\n\\ No newline at end of file\n"
        )

        result = hango.decide(run_id, [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}])
        assert result["run"]["state"] == "queued"
        assert [(a["id"], a["decision"]) for a in result["approvals"]] == [(approval["id"], "approve")]

        events = list(hango.run_events(run_id))  # ends by itself after run.finished
        assert events[-1]["type"] == "run.finished"
        assert events[-1]["data"]["state"] == "succeeded"
        assert [event["id"] for event in events] == [str(n) for n in range(1, len(events) + 1)]
        assert "approval.decided" in [event["type"] for event in events]

        agent_id = hango.get_run(run_id)["agent_id"]
        assert hango.read_file(agent_id, MEMORY)["content"] == "tea"
        assert [f["path"] for f in hango.iter_files(agent_id, prefix="/memories/")] == [MEMORY]
        decided = hango.list_audit_events(action="approval.decide", target_id=approval["id"])["items"]
        assert [row["outcome"] for row in decided] == ["success"]


def test_the_run_stream_reconnects_with_last_event_id_after_the_connection_drops(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": [write_memory()]}, {"text": "Ok"}])
    with cutting_proxy(base) as proxy, Client(proxy.base, tenant.owner.token) as through_proxy:
        events = through_proxy.run_events(run_id)
        before = _until(events, "run.awaiting_approval")
        proxy.cut()  # mid-stream: the run is suspended, the stream open
        with Client(base, tenant.owner.token) as direct:
            (approval,) = direct.list_run_approvals(run_id)["items"]
            direct.decide(run_id, [{"tool_call_id": approval["tool_call_id"], "decision": "approve"}])
        after = list(events)  # the iterator reconnects by itself and ends after run.finished

    ids = [event["id"] for event in before + after]
    assert ids == [str(n) for n in range(1, len(ids) + 1)]  # nothing lost, nothing repeated
    assert after[0]["type"] == "approval.decided"
    assert after[-1]["type"] == "run.finished"
    assert len(proxy.requests) == 2
    assert f"last-event-id: {before[-1]['id']}" in proxy.requests[1].lower()
    assert "last-event-id" not in proxy.requests[0].lower()


def test_the_approval_stream_resumes_after_an_event_already_seen(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"text": "Saving.", "tool_calls": [write_memory()]}, {"text": "Ok"}])
    with Client(base, tenant.owner.token) as hango:
        stream = hango.approval_events()
        (requested,) = _until(stream, "approval.requested")
        stream.close()
        assert requested["data"]["run_id"] == run_id
        hango.decide(run_id, [{"tool_call_id": requested["data"]["tool_call_id"], "decision": "approve"}])
        resumed = hango.approval_events(after=requested["id"])
        (decided,) = _until(resumed, "approval.decided")
        resumed.close()
    assert decided["data"]["id"] == requested["data"]["id"]
    assert decided["data"]["state"] == "decided"
    assert int(str(decided["id"])) > int(str(requested["id"]))


def test_the_quickstart_tour_plays_through_the_client(settings: Settings, base: str, tenant: TenantFixture) -> None:
    tour = [sys.executable, str(ROOT / "deploy" / "tour.py"), base, tenant.owner.token]
    played = subprocess.run(tour, env=settings_env(settings), capture_output=True, text=True, timeout=120, check=False)
    assert played.returncode == 0, played.stderr
    assert "tries to approve it: HTTP 403 Forbidden" in played.stdout
    assert "event run.finished" in played.stdout
    assert "the run is succeeded" in played.stdout
    assert f"{base}/inbox" in played.stdout
    with Client(base, tenant.owner.token) as owner:
        [waiting] = owner.list_approvals()["items"]  # the run left for the reader, in the inbox's queue
    assert waiting["tool_name"] == "edit_file"
    assert waiting["run_id"] in played.stdout
    # The edit is of the note the first run saved: approved, it would change that file, not fail on a missing one.
    with Client(base, tenant.owner.token) as owner:
        preview = owner.approval_preview(waiting["id"])
    assert (preview["exists"], preview["error"]) == (True, None), preview
    _check_the_tours_thread(played.stdout)


def _check_the_tours_thread(output: str) -> None:
    """The tour's conversation: the follow-up, a run of its own, answers from the thread's earlier turns (the script's
    third entry), and the ``hango threads show`` command it prints, run as printed, shows the whole conversation."""
    assert "  assistant: Tea: you told me so earlier in this conversation, and I saved it to my notes." in output
    [command] = [line.strip() for line in output.splitlines() if " threads show " in line]
    url, token, program, *arguments = shlex.split(command)
    assert (program, arguments[:2]) == (".venv/bin/hango", ["threads", "show"])
    env = {**os.environ, **dict(assignment.split("=", 1) for assignment in (url, token))}
    shown = subprocess.run(
        [str(ROOT / program), *arguments, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    messages = json.loads(shown.stdout)["messages"]
    assert [message["role"] for message in messages] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert len({message["run_id"] for message in messages}) == 2
    assert messages[-1]["content"][0]["text"].startswith("Tea: you told me so earlier")


def _until(events: Iterator[Event], kind: str) -> list[Event]:
    """The events up to and including the first of type ``kind``."""
    taken: list[Event] = []
    for event in events:
        taken.append(event)
        if event["type"] == kind:
            return taken
    raise AssertionError(f"the stream ended before {kind}: {[event['type'] for event in taken]}")


def test_webhooks_through_the_client_from_creation_to_a_retried_delivery(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    with receiving() as receiver, Client(base, tenant.owner.token) as owner:
        created = owner.create_webhook(receiver.url, ["run.finished"], description="the client's")
        assert created["secret"].startswith("whsec_")
        assert "secret" not in owner.get_webhook(created["id"])
        assert created["id"] in [hook["id"] for hook in owner.iter_webhooks(limit=1)]
        run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "hi"}]))
        [first] = wait_until(lambda: receiver.of_type("run.finished") or None)
        assert first.json["data"]["id"] == run_id
        [delivery] = wait_until(
            lambda: [d for d in owner.iter_deliveries(created["id"]) if d["state"] == "delivered"] or None
        )
        assert delivery["event_id"] == first.headers["webhook-id"]
        owner.retry_delivery(created["id"], delivery["id"])
        again = wait_until(lambda: receiver.of_type("run.finished")[1:] or None)
        assert again[0].headers["webhook-id"] == first.headers["webhook-id"]
        owner.delete_webhook(created["id"])
        with pytest.raises(ProblemError) as gone:
            owner.get_webhook(created["id"])
        assert gone.value.status == 404


def test_grants_through_the_client_from_a_remembered_approval_to_a_revocation(
    base: str, client: FlaskClient, tenant: TenantFixture
) -> None:
    script = [{"tool_calls": [write_memory("kept", call_id="w")]}, {"text": "Done."}]
    run_id = suspended_run(client, tenant, script)
    with Client(base, tenant.owner.token) as owner:
        decided = owner.decide(run_id, [{"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}])
        [item] = decided["approvals"]
        remembered = owner.get_grant(str(item["remembered_grant_id"]))
        assert remembered["when"] == {"file_path": {"equals": MEMORY}, "content": {"equals": "kept"}}
        agent_id = remembered["agent_id"]
        made = owner.create_grant(agent_id, "edit_file", "2h", when={"file_path": {"prefix": "/memories/"}})
        assert made["active"] is True
        assert [grant["id"] for grant in owner.iter_grants(agent_id=agent_id, limit=1)] == [
            made["id"],
            remembered["id"],
        ]
        owner.revoke_grant(made["id"])
        assert [grant["id"] for grant in owner.iter_grants(active=True)] == [remembered["id"]]
        assert owner.get_grant(made["id"])["revoked_by"] == str(tenant.owner.user_id)
        with pytest.raises(ProblemError) as refused:
            owner.create_grant(agent_id, "write_file", "1y")
        assert refused.value.status == 400
        assert [error["field"] for error in refused.value.errors] == ["ttl"]
