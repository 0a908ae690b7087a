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
    assert thread["status"] == "idle" and thread["message_count"] == 0 and thread["last_run_id"] is None

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
    agent_id = create_agent(
        client, owner, [{"tool_calls": [WRITE]}, {"text": "ok"}, {"tool_calls": [READ]}, {"text": "read"}]
    )
    thread = new_thread(client, owner, agent_id)
    other = new_thread(client, owner, agent_id)
    wait_for_state(client, owner, send(client, owner, thread["id"], "write")["id"], {"succeeded"})
    reader = send(client, owner, thread["id"], "read")
    wait_for_state(client, owner, reader["id"], {"succeeded"})
    read = [
        block
        for message in conversation(client, owner, thread["id"])
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert read[-1]["content"].split("\t")[-1] == "one" and not read[-1]["is_error"]

    # Another thread of the same agent plays the script from its start: it writes, then reads its own file.
    wait_for_state(client, owner, send(client, owner, other["id"], "write")["id"], {"succeeded"})
    other_reader = send(client, owner, other["id"], "read")
    wait_for_state(client, owner, other_reader["id"], {"succeeded"})


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
