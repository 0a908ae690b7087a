"""Threads through the API with a real worker: the conversation goes on across runs, stored once."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.kernel.models import Message as MessageRow
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, wait_for_state

pytestmark = pytest.mark.usefixtures("worker_process")

WRITE = {"name": "write_file", "args": {"file_path": "/notes/a.md", "content": "one"}}
READ = {"name": "read_file", "args": {"file_path": "/notes/a.md"}}


def new_thread(client: FlaskClient, person: Person, agent_id: str, **metadata: Any) -> dict[str, Any]:
    response = client.post("/v1/threads", json={"agent_id": agent_id, "metadata": metadata}, headers=person.headers)
    assert response.status_code == 201, response.json
    thread: dict[str, Any] = response.json
    return thread


def send(client: FlaskClient, person: Person, thread_id: str, text: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"/v1/threads/{thread_id}/runs", json={"input": text, **body}, headers=person.headers)
    assert response.status_code == 202, response.json
    run: dict[str, Any] = response.json
    return run


def conversation(client: FlaskClient, person: Person, thread_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/threads/{thread_id}/messages?limit=200", headers=person.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (message["role"], block.get("text") or block.get("content") or block.get("name") or "")
        for message in messages
        for block in message["content"]
    ]


def test_a_threads_runs_continue_one_conversation_stored_once(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    script = [{"text": "first answer"}, {"text": "", "tool_calls": [WRITE]}, {"text": "wrote it"}, {"text": "third"}]
    agent_id = create_agent(client, owner, script)
    thread = new_thread(client, owner, agent_id, customer="acme")
    assert (thread["status"], thread["message_count"], thread["last_run_id"]) == ("idle", 0, None)

    first = send(client, owner, thread["id"], "hello")
    assert first["thread_id"] == thread["id"]
    wait_for_state(client, owner, first["id"], {"succeeded"})
    second = send(client, owner, thread["id"], "write it down")
    wait_for_state(client, owner, second["id"], {"succeeded"})
    third = send(client, owner, thread["id"], "and again")
    wait_for_state(client, owner, third["id"], {"succeeded"})

    messages = conversation(client, owner, thread["id"])
    assert [message["seq"] for message in messages] == list(range(1, len(messages) + 1))
    assert [message["role"] for message in messages] == [
        "user",
        "assistant",  # run 1
        "user",
        "assistant",
        "tool",
        "assistant",  # run 2: the script's second and third entries
        "user",
        "assistant",  # run 3: the fourth entry
    ]
    assert texts(messages)[1] == ("assistant", "first answer")
    assert texts(messages)[-1] == ("assistant", "third")
    assert [message["run_id"] for message in messages[:2]] == [first["id"]] * 2

    # The run's own messages carry their thread-wide seq.
    own = client.get(f"/v1/runs/{second['id']}/messages", headers=owner.headers).json["items"]
    assert [message["seq"] for message in own] == [3, 4, 5, 6]

    # Stored once: every message row of the thread is one message of the conversation.
    with db.read() as session:
        stored = session.scalar(
            select(func.count())
            .select_from(MessageRow)
            .where(MessageRow.run_id.in_([first["id"], second["id"], third["id"]]))
        )
    assert stored == len(messages)

    shown = client.get(f"/v1/threads/{thread['id']}", headers=owner.headers).json
    assert shown["status"] == "idle"
    assert shown["message_count"] == len(messages)
    assert shown["last_run_id"] == third["id"]
    runs = client.get(f"/v1/threads/{thread['id']}/runs", headers=owner.headers).json["items"]
    assert [run["id"] for run in runs] == [third["id"], second["id"], first["id"]]


def test_scratch_files_persist_across_a_threads_runs_and_stay_in_their_thread(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    owner = tenant.owner
    script = [{"tool_calls": [READ]}, {"text": "r"}, {"tool_calls": [WRITE]}, {"text": "w"}, {"tool_calls": [READ]}]
    agent_id = create_agent(client, owner, script)
    thread, other = new_thread(client, owner, agent_id), new_thread(client, owner, agent_id)
    for text in ("read", "write", "read"):
        wait_for_state(client, owner, send(client, owner, thread["id"], text)["id"], {"succeeded"})
    missing, read = tool_results(conversation(client, owner, thread["id"]))[::2]
    assert missing["is_error"]
    assert read["content"].split("\t")[-1] == "one"
    assert not read["is_error"]

    # Another thread of the same agent does not see the file: its first run reads nothing.
    wait_for_state(client, owner, send(client, owner, other["id"], "read")["id"], {"succeeded"})
    [elsewhere] = tool_results(conversation(client, owner, other["id"]))
    assert elsewhere["is_error"]
    assert "not found" in elsewhere["content"]


def tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for message in messages for block in message["content"] if block["type"] == "tool_result"]


def test_a_failed_last_run_shows_error_until_a_later_run_succeeds(client: FlaskClient, tenant: TenantFixture) -> None:
    owner = tenant.owner
    agent_id = create_agent(
        client, owner, [{"text": "a", "tool_calls": [{"name": "count", "args": {"n": 1}}]}] * 3, max_turns=1
    )
    thread = new_thread(client, owner, agent_id)
    failed = send(client, owner, thread["id"], "go")
    assert wait_for_state(client, owner, failed["id"], {"succeeded", "failed"})["state"] == "failed"
    assert client.get(f"/v1/threads/{thread['id']}", headers=owner.headers).json["status"] == "error"
    listed = client.get("/v1/threads?status=error", headers=owner.headers).json["items"]
    assert [item["id"] for item in listed] == [thread["id"]]


def test_lists_filter_by_agent_metadata_and_status_and_a_member_sees_their_own(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    owner, member = tenant.owner, tenant.add("member")
    first, second = create_agent(client, owner, []), create_agent(client, owner, [])
    acme = new_thread(client, owner, first, customer="acme", tier=2)
    globex = new_thread(client, owner, second, customer="globex")
    mine = new_thread(client, member, first, customer="acme")

    def listed(query: str, person: Person = owner) -> list[str]:
        response = client.get(f"/v1/threads?{query}", headers=person.headers)
        assert response.status_code == 200, response.json
        return [item["id"] for item in response.json["items"]]

    assert listed("") == [mine["id"], globex["id"], acme["id"]]
    assert listed(f"agent_id={second}") == [globex["id"]]
    assert listed("metadata.customer=acme") == [mine["id"], acme["id"]]
    assert listed("metadata.customer=acme&metadata.tier=2") == [acme["id"]]  # a number matches as text
    assert listed("status=idle&metadata.customer=globex") == [globex["id"]]
    assert listed("status=busy") == []
    assert listed("", member) == [mine["id"]]
    assert client.get(f"/v1/threads/{acme['id']}", headers=member.headers).status_code == 404
    unknown = client.get("/v1/threads?stauts=idle", headers=owner.headers)
    assert unknown.status_code == 400
    assert unknown.json["errors"][0]["field"] == "stauts"


def test_a_call_left_unanswered_before_a_fork_is_answered_in_each_thread_by_its_own_run(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    owner = tenant.owner
    memory = {"name": "write_file", "args": {"file_path": "/memories/x.md", "content": "x"}}
    agent_id = create_agent(client, owner, [{"tool_calls": [memory]}, {"text": "next"}, {"text": "again"}])
    thread = new_thread(client, owner, agent_id)
    paused = send(client, owner, thread["id"], "remember")
    wait_for_state(client, owner, paused["id"], {"awaiting_approval"})
    assert client.post(f"/v1/runs/{paused['id']}/cancel", headers=owner.headers).status_code == 200
    fork = client.post(f"/v1/threads/{thread['id']}/fork", json={}, headers=owner.headers).json

    # Both go on from the same unanswered call: each answers it with a message of a run of its own thread.
    on_fork = send(client, owner, fork["id"], "on the fork")
    on_parent = send(client, owner, thread["id"], "on the parent")
    assert wait_for_state(client, owner, on_fork["id"], {"succeeded", "failed"})["state"] == "succeeded"
    assert wait_for_state(client, owner, on_parent["id"], {"succeeded", "failed"})["state"] == "succeeded"
    for thread_id, answering in ((fork["id"], on_fork["id"]), (thread["id"], paused["id"])):
        [repair] = [message for message in conversation(client, owner, thread_id) if message["role"] == "tool"]
        assert repair["run_id"] == answering
        assert repair["content"][0]["is_error"]
