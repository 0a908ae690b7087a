"""Threads' rules through the API with a real worker: approvals inside a thread, the history window, forks, bad
input, who sees which thread, and what bounds a thread's runs. What is claimed about storage is read from the tables.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.kernel.models import ApprovalEvent, File, PendingApproval, Run, RunEvent, Thread
from hango.kernel.models import Message as MessageRow
from hango.platform.db import Database
from tests.integration.conftest import Person, TenantFixture, create_agent, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, pending, write_memory
from tests.integration.test_threads import conversation, new_thread, send

pytestmark = pytest.mark.usefixtures("worker_process")

ENDED = {"succeeded", "failed", "cancelled"}


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


def _edit(path: str, old: str, new: str) -> dict[str, Any]:
    args = {"file_path": path, "old_string": old, "new_string": new, "replace_all": True}
    return {"tool_calls": [{"name": "edit_file", "args": args}]}


def _count(db: Database, model: Any, *where: Any) -> int:
    with db.read() as session:
        return int(session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def _scratch(db: Database, thread_id: str) -> dict[str, str]:
    """A thread's scratch files as stored: path to content."""
    with db.read() as session:
        rows = session.execute(select(File.path, File.content).where(File.thread_id == uuid.UUID(thread_id)))
        return dict(rows.all())


def _run(client: FlaskClient, person: Person, run_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/runs/{run_id}", headers=person.headers)
    assert response.status_code == 200, response.json
    run: dict[str, Any] = response.json
    return run


def _status(client: FlaskClient, person: Person, thread_id: str) -> str:
    status: str = client.get(f"/v1/threads/{thread_id}", headers=person.headers).json["status"]
    return status


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _last_text(client: FlaskClient, person: Person, thread_id: str) -> str:
    text: str = conversation(client, person, thread_id)[-1]["content"][0]["text"]
    return text


# --- approvals inside a thread


def test_a_run_added_as_the_one_before_it_ends_starts_without_a_reconciler(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    # The session's worker never reconciles (tests/integration/conftest.py), so a run left queued after the run
    # before it ended would stay queued: only that run's end (when followed) or the request itself can start it.
    owner = tenant.owner
    nap = {"tool_calls": [{"name": "sleep", "args": {"seconds": 0.3}}]}
    agent_id = create_agent(client, owner, [nap, {"text": "first"}, {"text": "second"}])
    found_active = 0
    for round_number in range(8):
        thread = new_thread(client, owner, agent_id)["id"]
        first = send(client, owner, thread, "nap")["id"]
        wait_for_state(client, owner, first, {"running", *ENDED})
        time.sleep(0.04 * round_number)  # from well before the first run's end to about when it ends
        second = send(client, owner, thread, "then", multitask_strategy="enqueue")
        found_active += second["state"] == "queued" and _run(client, owner, first)["state"] not in ENDED
        assert wait_for_state(client, owner, second["id"], ENDED, timeout=20)["state"] == "succeeded"
        assert _last_text(client, owner, thread) == "second"
    assert found_active, "no round added its run while the first was still running"


def test_a_paused_run_holds_its_thread_and_an_interrupt_answers_its_call_then_delete_removes_everything(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    script = [
        {"tool_calls": [write_memory("first")]},  # run A pauses on the memory write
        {"text": "saved"},
        _write("/notes/s.md", "scratch"),  # run B, queued behind A
        {"text": "B done"},
        {"tool_calls": [write_memory("second")]},  # run C pauses, then is interrupted by D
        {"text": "D continues"},
    ]
    agent_id = create_agent(client, owner, script)
    thread = new_thread(client, owner, agent_id)["id"]

    a = send(client, owner, thread, "remember this")["id"]
    assert wait_for_state(client, owner, a, {"awaiting_approval", *ENDED})["state"] == "awaiting_approval"
    assert _status(client, owner, thread) == "interrupted"
    b = send(client, owner, thread, "then write", multitask_strategy="enqueue")["id"]
    # While A waits for a human: B stays queued, another run is refused naming the oldest active run (A), and the
    # thread can be neither forked nor deleted.
    busy = client.post(f"/v1/threads/{thread}/runs", json={"input": "now"}, headers=owner.headers)
    assert (busy.status_code, busy.json["type"]) == (409, "urn:hango:problem:thread-busy")
    assert busy.json["active_run_id"] == a
    assert client.post(f"/v1/threads/{thread}/fork", json={}, headers=owner.headers).status_code == 409
    assert client.delete(f"/v1/threads/{thread}", headers=owner.headers).status_code == 409
    assert _run(client, owner, b)["state"] == "queued"

    [approval] = pending(client, owner, a)
    response = decide(client, owner, a, {"tool_call_id": approval["tool_call_id"], "decision": "approve"})
    assert response.status_code == 200, response.json
    assert wait_for_state(client, owner, a, ENDED)["state"] == "succeeded"
    assert wait_for_state(client, owner, b, ENDED)["state"] == "succeeded"
    assert _time(_run(client, owner, a)["finished_at"]) <= _time(_run(client, owner, b)["started_at"])
    assert _last_text(client, owner, thread) == "B done"

    c = send(client, owner, thread, "remember again")["id"]
    assert wait_for_state(client, owner, c, {"awaiting_approval", *ENDED})["state"] == "awaiting_approval"
    d = send(client, owner, thread, "never mind", multitask_strategy="interrupt")["id"]
    assert _run(client, owner, c)["state"] == "cancelled"  # in the transaction that created D
    assert [item["state"] for item in pending(client, owner, c, "all")] == ["cancelled"]
    assert wait_for_state(client, owner, d, ENDED)["state"] == "succeeded"
    assert _status(client, owner, thread) == "idle"

    # D's conversation: C's call answered "tool call interrupted" by a message of C, then D's input and its answer.
    messages = conversation(client, owner, thread)
    call, repair, given, answer = messages[-4:]
    assert (call["run_id"], call["role"], call["content"][0]["name"]) == (c, "assistant", "write_file")
    assert (repair["run_id"], repair["role"]) == (c, "tool")
    assert repair["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": call["content"][0]["id"],
            "content": "tool call interrupted",
            "is_error": True,
        }
    ]
    assert (given["run_id"], given["role"], given["content"][0]["text"]) == (d, "user", "never mind")
    assert (answer["run_id"], answer["content"][0]["text"]) == (d, "D continues")
    own = client.get(f"/v1/runs/{c}/messages", headers=owner.headers).json["items"]
    assert [message["seq"] for message in own][-1] == repair["seq"], "the answer is one of C's own messages"

    # Deleting the thread removes its runs, messages, events, approvals and scratch files, and is audited.
    runs = [uuid.UUID(run_id) for run_id in (a, b, c, d)]
    approvals = [item["id"] for run_id in (a, c) for item in pending(client, owner, run_id, "all")]
    assert _count(db, ApprovalEvent, ApprovalEvent.approval_id.in_(approvals)) >= len(approvals) == 2
    assert _scratch(db, thread) == {"/notes/s.md": "scratch"}
    assert client.delete(f"/v1/threads/{thread}", headers=owner.headers).status_code == 204
    thread_id = uuid.UUID(thread)
    assert _count(db, Thread, Thread.id == thread_id) == 0
    assert _count(db, Run, Run.id.in_(runs)) == 0
    assert _count(db, MessageRow, MessageRow.thread_id == thread_id) == 0
    assert _count(db, RunEvent, RunEvent.run_id.in_(runs)) == 0
    assert _count(db, PendingApproval, PendingApproval.run_id.in_(runs)) == 0
    assert _count(db, ApprovalEvent, ApprovalEvent.approval_id.in_(approvals)) == 0
    assert _count(db, File, File.thread_id == thread_id) == 0
    audited = [row for row in audit_rows(db, tenant.id, "thread.delete") if row.target_id == thread]
    assert [(row.outcome, row.actor_id) for row in audited] == [("error", owner.user_id), ("success", owner.user_id)]
    assert client.get(f"/v1/threads/{thread}", headers=owner.headers).status_code == 404
    assert client.get(f"/v1/runs/{a}", headers=owner.headers).status_code == 404


# --- the history window


def _sizes(db: Database, thread_id: str) -> list[int]:
    """The size of each stored message of the thread, by seq, as the scripted model measures what it is shown (the
    length of its content as JSON)."""
    with db.read() as session:
        statement = select(MessageRow.content).where(MessageRow.thread_id == uuid.UUID(thread_id))
        return [len(json.dumps(content)) for content in session.scalars(statement.order_by(MessageRow.seq))]


def _tokens(sizes: list[int], *shown: range) -> int:
    """The input tokens the scripted model reports for calls shown these messages (0-based indexes), a quarter of
    their size each."""
    return sum(max(1, sum(sizes[index] for index in call) // 4) for call in shown)


def test_the_model_sees_only_the_window_cut_at_a_user_message_while_the_script_follows_the_whole_thread(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    count = {"tool_calls": [{"name": "count", "args": {"key": uuid.uuid4().hex}}]}
    script = [{"text": "a1"}, {"text": "a2"}, count, {"text": "a4"}, {"text": "a5"}]
    agent_id = create_agent(client, owner, script, tools=["count"], history={"max_messages": 4})
    thread = new_thread(client, owner, agent_id)["id"]
    inputs = ["u" * 40, "v" * 400, "w" * 1200, "x" * 2400]  # sizes far apart: a wrong window shows in the tokens
    runs = []
    for text in inputs:
        run = send(client, owner, thread, text)["id"]
        assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
        runs.append(_run(client, owner, run))

    # Every message is stored, once, in order: the window changes what the model is shown, never what is kept.
    messages = conversation(client, owner, thread)
    assert [message["seq"] for message in messages] == list(range(1, 11))
    assert [message["role"] for message in messages] == [
        "user", "assistant",  # run 1 (0, 1)
        "user", "assistant",  # run 2 (2, 3)
        "user", "assistant", "tool", "assistant",  # run 3 (4-7): a call, its result, then an answer
        "user", "assistant",  # run 4 (8, 9)
    ]  # fmt: skip
    # The script went on by the whole conversation's turns: run 4 plays its fifth entry though it was shown none.
    assert [messages[index]["content"][0]["text"] for index in (1, 3, 7, 9)] == ["a1", "a2", "a4", "a5"]

    sizes = _sizes(db, thread)
    shown = [
        [range(0, 1)],  # run 1: its input
        [range(0, 3)],  # run 2: three messages, within the window
        # Run 3: the last four are (1-4), cut to start at a user message (2-4); then (3-6), cut to (4-6): the call
        # and its result stay together.
        [range(2, 5), range(4, 7)],
        [range(8, 9)],  # run 4: the last four (5-8) hold a user message only at their end
    ]
    assert [run["usage"]["input_tokens"] for run in runs] == [_tokens(sizes, *calls) for calls in shown]
    # Without the window, run 4 would have been shown all nine messages before its answer.
    assert runs[3]["usage"]["input_tokens"] != _tokens(sizes, range(0, 9))


# --- forks


def test_a_fork_shares_the_conversation_up_to_its_point_and_outlives_its_parent(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    note = "/notes/a.md"
    script = [
        _write(note, "one"),
        {"text": "wrote"},
        _edit(note, "one", "one+"),
        {"text": "edited"},
        _edit(note, "+", "-"),
        {"text": "again"},
    ]
    agent_id = create_agent(client, owner, script)
    parent = new_thread(client, owner, agent_id, customer="acme")["id"]
    for text in ("write", "edit"):
        run = send(client, owner, parent, text)["id"]
        assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
    before = conversation(client, owner, parent)
    assert [message["seq"] for message in before] == list(range(1, 9))  # 6 is a call, 7 its result

    def fork(**body: Any) -> Any:
        return client.post(f"/v1/threads/{parent}/fork", json=body, headers=owner.headers)

    tenant_threads = Thread.tenant_id == tenant.id
    threads, rows = _count(db, Thread, tenant_threads), _count(db, MessageRow, MessageRow.tenant_id == tenant.id)
    for up_to in (0, 9, 6, -1):
        refused = fork(up_to_seq=up_to)
        assert refused.status_code == 400, (up_to, refused.json)
        assert [error["field"] for error in refused.json["errors"]] == ["up_to_seq"]
    assert _count(db, Thread, tenant_threads) == threads

    # By default the whole conversation, by reference: no message row is written.
    whole = fork()
    assert whole.status_code == 201, whole.json
    assert (whole.json["message_count"], whole.json["metadata"]) == (8, {"customer": "acme"})
    assert conversation(client, owner, whole.json["id"]) == before
    assert _count(db, MessageRow, MessageRow.tenant_id == tenant.id) == rows
    assert client.delete(f"/v1/threads/{whole.json['id']}", headers=owner.headers).status_code == 204
    assert conversation(client, owner, parent) == before

    made = fork(up_to_seq=4)  # after the first run's answer
    assert made.status_code == 201, made.json
    forked = made.json["id"]
    assert (made.json["message_count"], made.json["metadata"], made.json["status"]) == (4, {"customer": "acme"}, "idle")
    assert conversation(client, owner, forked) == before[:4]
    assert _scratch(db, forked) == {note: "one+"}  # a copy of the parent's files as they were

    # The fork's next run continues from the fork point: it plays the script's third entry (the edit), on its copy.
    run = send(client, owner, forked, "edit the fork")["id"]
    assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
    own = conversation(client, owner, forked)
    assert [message["seq"] for message in own] == list(range(1, 9))
    assert [message["run_id"] for message in own[4:]] == [run] * 4
    assert own[-1]["content"][0]["text"] == "edited"
    assert (_scratch(db, forked), _scratch(db, parent)) == ({note: "one++"}, {note: "one+"})
    # The parent's next run plays its own next entry, on its own files.
    run = send(client, owner, parent, "again")["id"]
    assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
    assert (_scratch(db, forked), _scratch(db, parent)) == ({note: "one++"}, {note: "one-"})

    # Deleting the parent leaves the fork whole; its rows that the fork shares stay, invisible.
    forked_before = conversation(client, owner, forked)
    assert client.delete(f"/v1/threads/{parent}", headers=owner.headers).status_code == 204
    assert client.get(f"/v1/threads/{parent}", headers=owner.headers).status_code == 404
    assert conversation(client, owner, forked) == forked_before
    parent_id = uuid.UUID(parent)
    with db.read() as session:
        kept = session.scalars(select(MessageRow.seq).where(MessageRow.thread_id == parent_id)).all()
        assert sorted(kept) == [1, 2, 3, 4]
        assert session.scalar(select(Thread.deleted_at).where(Thread.id == parent_id)) is not None
    assert _count(db, Run, Run.thread_id == parent_id) == 1  # the run that stored them
    assert _count(db, File, File.thread_id == parent_id) == 0
    run = send(client, owner, forked, "once more")["id"]
    assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
    assert _scratch(db, forked) == {note: "one--"}

    # Deleting the fork then removes what the parent had kept for it.
    assert client.delete(f"/v1/threads/{forked}", headers=owner.headers).status_code == 204
    assert _count(db, Thread, Thread.id == parent_id) == 0
    assert _count(db, MessageRow, MessageRow.thread_id == parent_id) == 0
    assert _count(db, Run, Run.thread_id == parent_id) == 0
    assert _count(db, MessageRow, MessageRow.tenant_id == tenant.id) == 0


# --- bad input and who sees which thread


def _fields(response: Any) -> list[str]:
    assert response.status_code == 400, response.json
    return [error["field"] for error in response.json["errors"]]


def test_bad_input_is_a_400_naming_the_field_and_writes_nothing(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    agent_id = create_agent(client, owner, [])
    other_agent = create_agent(client, owner, [])
    thread = new_thread(client, owner, agent_id, team="a")["id"]
    threads = _count(db, Thread, Thread.tenant_id == tenant.id)
    too_big = {"blob": "x" * 16_384}  # over HANGO_MAX_THREAD_METADATA_BYTES (16 KiB) once written as JSON

    for metadata in ("labels", ["a"], 3, too_big):
        created = client.post("/v1/threads", json={"agent_id": agent_id, "metadata": metadata}, headers=owner.headers)
        assert _fields(created) == ["metadata"]
        patched = client.patch(f"/v1/threads/{thread}", json={"metadata": metadata}, headers=owner.headers)
        assert _fields(patched) == ["metadata"]
    assert "HANGO_MAX_THREAD_METADATA_BYTES" in patched.json["detail"]
    assert _count(db, Thread, Thread.tenant_id == tenant.id) == threads
    assert client.get(f"/v1/threads/{thread}", headers=owner.headers).json["metadata"] == {"team": "a"}

    strange = {"input": "hi", "multitask_strategy": "queue-jump"}
    assert _fields(client.post(f"/v1/threads/{thread}/runs", json=strange, headers=owner.headers)) == [
        "multitask_strategy"
    ]
    direct = {**strange, "agent_id": agent_id, "thread_id": thread}
    assert _fields(client.post("/v1/runs", json=direct, headers=owner.headers)) == ["multitask_strategy"]
    elsewhere = {"input": "hi", "agent_id": other_agent, "thread_id": thread}
    refused = client.post("/v1/runs", json=elsewhere, headers=owner.headers)
    assert _fields(refused) == ["agent_id"]
    assert agent_id in refused.json["detail"]
    assert _count(db, Run, Run.tenant_id == tenant.id) == 0


def test_a_thread_is_seen_and_changed_only_by_those_it_belongs_to(
    client: FlaskClient, make_tenant: Any, db: Database
) -> None:
    home, away = make_tenant("home"), make_tenant("away")
    owner = home.owner
    member, other_member, admin = home.add("member"), home.add("member"), home.add("admin")
    agent_id = create_agent(client, owner, [])
    owners_thread = new_thread(client, owner, agent_id)["id"]
    members_thread = new_thread(client, member, agent_id)["id"]
    routes = [
        ("get", "", None),
        ("patch", "", {"metadata": {"x": "y"}}),
        ("delete", "", None),
        ("post", "/runs", {"input": "hi"}),
        ("get", "/runs", None),
        ("get", "/messages", None),
        ("post", "/fork", {}),
    ]

    def statuses(person: Person, thread_id: str) -> set[int]:
        answers = set()
        for method, suffix, body in routes:
            call = getattr(client, method)
            answers.add(call(f"/v1/threads/{thread_id}{suffix}", json=body, headers=person.headers).status_code)
        direct = {"input": "hi", "agent_id": agent_id, "thread_id": thread_id}
        answers.add(client.post("/v1/runs", json=direct, headers=person.headers).status_code)
        return answers

    # Another tenant's thread, or another member's, does not exist for the caller: 404 on every route, and nothing
    # changed.
    assert statuses(away.owner, owners_thread) == {404}
    assert statuses(member, owners_thread) == {404}
    assert statuses(other_member, members_thread) == {404}
    assert _count(db, Run, Run.tenant_id == home.id) == 0
    assert _count(db, Thread, Thread.tenant_id == home.id) == 2

    def listed(person: Person) -> set[str]:
        return {item["id"] for item in client.get("/v1/threads", headers=person.headers).json["items"]}

    assert listed(member) == {members_thread}
    assert listed(other_member) == set()
    assert listed(away.owner) == set()
    assert listed(admin) == listed(owner) == {owners_thread, members_thread}
    # Its creator, an owner and an admin may change a member's thread.
    for person in (member, owner, admin):
        changed = client.patch(
            f"/v1/threads/{members_thread}", json={"metadata": {"by": person.role}}, headers=person.headers
        )
        assert (changed.status_code, changed.json["metadata"]) == (200, {"by": person.role})
    assert client.delete(f"/v1/threads/{members_thread}", headers=member.headers).status_code == 204


# --- what bounds a thread's runs


def test_max_turns_bounds_each_run_not_the_thread(client: FlaskClient, tenant: TenantFixture) -> None:
    owner = tenant.owner
    count = {"tool_calls": [{"name": "count", "args": {"key": uuid.uuid4().hex}}]}
    script = [count, {"text": "one"}, count, {"text": "two"}, count, {"text": "three"}, count, count, count]
    agent_id = create_agent(client, owner, script, tools=["count"], max_turns=2)
    thread = new_thread(client, owner, agent_id)["id"]
    # Each of the first three runs takes its two turns, though the thread holds more than two before it.
    for answer in ("one", "two", "three"):
        run = send(client, owner, thread, "go")["id"]
        assert wait_for_state(client, owner, run, ENDED)["state"] == "succeeded"
        assert (_run(client, owner, run)["turn"], _last_text(client, owner, thread)) == (2, answer)
    run = send(client, owner, thread, "go")["id"]
    failed = wait_for_state(client, owner, run, ENDED)
    assert (failed["state"], failed["turn"]) == ("failed", 2)
    assert failed["error"] == "the run reached its limit of 2 turns"
