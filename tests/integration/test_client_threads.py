"""Threads through ``hango.client.Client`` against a real gunicorn server and a real worker: a conversation created,
listed, continued, paged, labelled, forked and deleted; a busy thread and a bad strategy as problems."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hango.client import Client, Event, ProblemError, Run
from hango.kernel.config import Settings
from tests.integration.conftest import TenantFixture
from tests.integration.hitl_helpers import write_memory
from tests.support.processes import api_server, wait_until

pytestmark = pytest.mark.usefixtures("worker_process")
TERMINAL = {"succeeded", "failed", "cancelled"}


@pytest.fixture(scope="module")
def base(settings: Settings) -> Iterator[str]:
    """One real API server for the module."""
    with api_server(settings) as url:
        yield url


def _agent(hango: Client, script: list[dict[str, Any]]) -> str:
    config = {"name": f"agent-{uuid.uuid4().hex[:8]}", "model": {"provider": "scripted", "script": script}}
    return hango.create_agent({**config, "tools": ["read_file", "write_file"]})["id"]


def _in_state(hango: Client, run_id: str, states: set[str]) -> Run:
    return wait_until(lambda: (run := hango.get_run(run_id))["state"] in states and run)  # type: ignore[no-any-return]


def test_a_conversation_through_the_client(base: str, tenant: TenantFixture) -> None:
    with Client(base, tenant.owner.token) as hango:
        agent_id = _agent(hango, [{"text": "Hello."}, {"text": "You said hi before."}, {"text": "Third."}])
        label = uuid.uuid4().hex
        thread = hango.create_thread(agent_id, {"label": label, "channel": "chat"})
        other = hango.create_thread(agent_id, {"label": label, "channel": "mail"})
        assert (thread["status"], thread["message_count"], thread["last_run_id"]) == ("idle", 0, None)
        assert hango.get_thread(thread["id"]) == thread

        first = hango.start_thread_run(thread["id"], "hi")
        assert (first["thread_id"], first["state"]) == (thread["id"], "queued")
        assert _in_state(hango, first["id"], TERMINAL)["state"] == "succeeded"
        # POST /v1/runs with thread_id is the same as a run on the thread.
        second = hango.create_run(agent_id, "and now?", thread_id=thread["id"], multitask_strategy="enqueue")
        assert second["thread_id"] == thread["id"]
        assert _in_state(hango, second["id"], TERMINAL)["state"] == "succeeded"

        messages = list(hango.iter_thread_messages(thread["id"], limit=1))  # one page per message
        assert [(m["seq"], m["role"]) for m in messages] == list(enumerate(["user", "assistant"] * 2, start=1))
        assert [m["run_id"] for m in messages] == [first["id"]] * 2 + [second["id"]] * 2
        assert messages[3]["content"] == [{"type": "text", "text": "You said hi before."}]
        assert messages == hango.list_thread_messages(thread["id"])["items"]
        assert [run["id"] for run in hango.iter_thread_runs(thread["id"], limit=1)] == [second["id"], first["id"]]

        shown = hango.get_thread(thread["id"])
        assert (shown["status"], shown["message_count"], shown["last_run_id"]) == ("idle", 4, second["id"])
        by_label = hango.iter_threads(metadata={"label": label}, limit=1)
        assert [found["id"] for found in by_label] == [other["id"], thread["id"]]  # newest first, every page
        chat = hango.list_threads(metadata={"label": label, "channel": "chat"}, agent_id=agent_id, status="idle")
        assert [found["id"] for found in chat["items"]] == [thread["id"]]

        relabelled = hango.update_thread(thread["id"], {"label": label, "channel": "phone"})
        assert relabelled["metadata"] == {"label": label, "channel": "phone"}
        fork = hango.fork_thread(thread["id"], up_to_seq=2)
        assert (fork["agent_id"], fork["message_count"], fork["metadata"]) == (agent_id, 2, relabelled["metadata"])
        assert hango.list_thread_messages(fork["id"])["items"] == messages[:2]

        hango.delete_thread(thread["id"])
        with pytest.raises(ProblemError) as gone:
            hango.get_thread(thread["id"])
        assert gone.value.status == 404
        assert len(list(hango.iter_thread_messages(fork["id"]))) == 2  # a fork outlives its parent


def test_a_busy_thread_and_a_bad_strategy_are_problems(base: str, tenant: TenantFixture) -> None:
    with Client(base, tenant.owner.token) as hango:
        agent_id = _agent(hango, [{"tool_calls": [write_memory("tea")]}, {"text": "Saved."}, {"text": "Next."}])
        thread = hango.create_thread(agent_id)
        paused = hango.start_thread_run(thread["id"], "save it")
        _in_state(hango, paused["id"], {"awaiting_approval"})
        assert hango.get_thread(thread["id"])["status"] == "interrupted"

        with pytest.raises(ProblemError) as busy:
            hango.start_thread_run(thread["id"], "are you there?")
        assert (busy.value.status, busy.value.type) == (409, "urn:hango:problem:thread-busy")
        assert busy.value.body["active_run_id"] == paused["id"]

        with pytest.raises(ProblemError) as bad:
            hango.start_thread_run(thread["id"], "now", multitask_strategy="later")  # type: ignore[arg-type]
        assert (bad.value.status, bad.value.type) == (400, "urn:hango:problem:validation")
        assert [error["field"] for error in bad.value.errors] == ["multitask_strategy"]

        replacing = hango.start_thread_run(thread["id"], "never mind", multitask_strategy="interrupt")
        assert hango.get_run(paused["id"])["state"] == "cancelled"
        assert _in_state(hango, replacing["id"], TERMINAL)["state"] == "succeeded"


def test_a_threads_events_run_after_run_resumed_after_an_id_and_live_while_it_is_idle(
    base: str, tenant: TenantFixture
) -> None:
    with Client(base, tenant.owner.token) as hango:
        agent_id = _agent(hango, [{"text": "One."}, {"text": "Two."}, {"text": "Three."}])
        thread = hango.create_thread(agent_id)
        runs = [
            hango.start_thread_run(thread["id"], "first"),
            hango.start_thread_run(thread["id"], "second", multitask_strategy="enqueue"),
        ]
        stream = hango.thread_events(thread["id"])
        seen = _through_finished(stream, len(runs))
        ids = [int(str(event["id"])) for event in seen]
        assert ids == sorted(set(ids))  # increasing across the runs
        order = [event["data"]["run_id"] for event in seen]
        assert order == sorted(order, key=[run["id"] for run in runs].index)  # the first run's, then the second's
        assert {event["data"]["run_id"] for event in seen} == {run["id"] for run in runs}

        # The stream stays open while the thread is idle: a run sent now arrives on it, live.
        third = hango.start_thread_run(thread["id"], "third")
        live = _through_finished(stream, 1)
        stream.close()
        assert {event["data"]["run_id"] for event in live} == {third["id"]}
        assert int(str(live[0]["id"])) > ids[-1]

        # Resumed after the first run's end: exactly the rest, from the second run's first event.
        first_end = next(event for event in seen if event["type"] == "run.finished")
        resumed = hango.thread_events(thread["id"], after=first_end["id"])
        rest = _through_finished(resumed, 2)
        resumed.close()
        assert rest == seen[seen.index(first_end) + 1 :] + live


def _through_finished(events: Iterator[Event], runs: int) -> list[Event]:
    """The events of a stream up to the ``runs``-th ``run.finished``, included."""
    taken: list[Event] = []
    for event in events:
        taken.append(event)
        runs -= event["type"] == "run.finished"
        if not runs:
            return taken
    raise AssertionError(f"the stream ended early: {[event['type'] for event in taken]}")
