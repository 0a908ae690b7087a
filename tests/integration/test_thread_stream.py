"""A thread's event stream, ``GET /v1/threads/{id}/events``, through a real gunicorn server and a real worker: its
runs' events run after run with ids that increase across them, replay after ``Last-Event-ID``, a stream that stays
open while the thread is idle, and who may follow it. Then the thread named wherever an approval or a finished run
is shown: the approval lists, the tenant stream and webhooks."""

from __future__ import annotations

import itertools
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.kernel.models import Run
from hango.platform.db import Database
from hango.platform.events import Publisher
from hango.store import events as event_store
from tests.integration.conftest import Person, TenantFixture, create_agent, wait_for_state
from tests.integration.hitl_helpers import decide, pending, suspended_run, write_memory
from tests.integration.test_threads import new_thread, send
from tests.support.processes import api_server, wait_until
from tests.support.receiver import Receiver, receiving
from tests.support.sse import SseEvent, stream

pytestmark = pytest.mark.usefixtures("worker_process")
SCRIPT = [
    {"text": "Noted.", "tool_calls": [{"name": "write_file", "args": {"file_path": "/n.md", "content": "x"}}]},
    {"text": "First answer."},
    {"text": "Second answer."},
]
Shown = tuple[int, str, dict[str, Any]]
QUIET = 20  # keep-alives (a second apart) with no event: far more than a scripted run takes to start and end


@pytest.fixture(scope="module")
def server(settings: Settings) -> Iterator[str]:
    with api_server(settings) as base:
        yield base


def _path(thread_id: str) -> str:
    return f"/v1/threads/{thread_id}/events"


def _stored(db: Database, runs: list[tuple[int, str]]) -> list[Shown]:
    """The runs' stored events as the thread's stream must show them, for runs given as (place, id)."""
    shown: list[Shown] = []
    with db.read() as session:
        for position, run_id in runs:
            logged = event_store.events_of(session, session.get_one(Run, uuid.UUID(run_id)), 0, 10_000)
            shown += [((position << 32) + entry.seq, entry.type, {**entry.data, "run_id": run_id}) for entry in logged]
    return shown


def _shown(events: list[SseEvent]) -> list[Shown]:
    return [(event.id or 0, event.event, event.data) for event in events]


def _until_finished(items: Iterator[SseEvent], runs: int = 1) -> list[SseEvent]:
    """The events read until the ``runs``-th ``run.finished`` (keep-alives left out); fails if the stream ends, or
    stays quiet for QUIET keep-alives in a row, first."""
    events: list[SseEvent] = []
    quiet = 0
    for item in items:
        quiet = quiet + 1 if not item.event else 0
        assert quiet < QUIET, f"the stream went quiet after {[event.event for event in events]}"
        if item.event:
            events.append(item)
            runs -= item.event == "run.finished"
            if runs == 0:
                return events
    raise AssertionError(f"the stream ended after {[event.event for event in events]}")


def _until_keep_alive(items: Iterator[SseEvent]) -> None:
    """Read up to the next keep-alive: the stream is open and idle (an event meanwhile fails)."""
    for item in items:
        assert not item.event, f"an event while the thread is idle: {item}"
        if item.comment == "keep-alive":
            return
    raise AssertionError("the stream ended")


def _two_runs(client: FlaskClient, person: Person) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A thread whose two runs have ended."""
    thread = new_thread(client, person, create_agent(client, person, SCRIPT))
    runs = []
    for text in ("note this", "and now?"):
        runs.append(send(client, person, thread["id"], text))
        wait_for_state(client, person, runs[-1]["id"], {"succeeded"})
    return thread, runs


def test_a_threads_runs_stream_live_in_order_and_the_idle_stream_stays_open_for_the_next(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    thread = new_thread(client, owner, create_agent(client, owner, SCRIPT))
    items = stream(server, _path(thread["id"]), owner.token)
    _until_keep_alive(items)  # connected, and open before the thread has a run

    first = send(client, owner, thread["id"], "note this")
    events = _until_finished(items)
    _until_keep_alive(items)  # the thread is idle again: the stream stays open
    second = send(client, owner, thread["id"], "and now?")
    events += _until_finished(items)

    assert _shown(events) == _stored(db, [(1, first["id"]), (2, second["id"])])
    ids = [event.id or 0 for event in events]
    assert ids == sorted(set(ids))  # increasing across the runs
    assert {event.data["run_id"] for event in events[-3:]} == {second["id"]}
    assert events[-1].data == {"state": "succeeded", "error": None, "run_id": second["id"]}


def test_reconnecting_in_the_middle_of_the_second_run_replays_exactly_the_rest(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    owner = tenant.owner
    thread, runs = _two_runs(client, owner)
    whole = _until_finished(stream(server, _path(thread["id"]), owner.token), runs=2)
    assert _shown(whole) == _stored(db, [(1, runs[0]["id"]), (2, runs[1]["id"])])

    second = [index for index, event in enumerate(whole) if event.data["run_id"] == runs[1]["id"]]
    middle = second[len(second) // 2]
    resumed = stream(server, _path(thread["id"]), owner.token, last_event_id=whole[middle].id)
    assert _shown(_until_finished(resumed)) == _shown(whole[middle + 1 :])
    # ?after= says the same for a client that cannot send the header.
    after = stream(server, f"{_path(thread['id'])}?after={whole[middle].id}", owner.token)
    assert _shown(_until_finished(after)) == _shown(whole[middle + 1 :])


def test_a_run_whose_wake_up_is_lost_still_streams_after_a_keep_alive(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = tenant.owner
    thread = new_thread(client, owner, create_agent(client, owner, SCRIPT))
    items = stream(server, _path(thread["id"]), owner.token)
    _until_keep_alive(items)

    publish = Publisher.publish

    def without_wake_ups(self: Publisher, events: Any, notices: Any = (), threads: Any = ()) -> None:
        publish(self, events, notices)

    monkeypatch.setattr(Publisher, "publish", without_wake_ups)
    run = send(client, owner, thread["id"], "note this")  # created by this process's app: nobody is woken
    assert _shown(_until_finished(items)) == _stored(db, [(1, run["id"])])


def test_deleting_the_thread_ends_its_stream(server: str, client: FlaskClient, tenant: TenantFixture) -> None:
    owner = tenant.owner
    thread = new_thread(client, owner, create_agent(client, owner, SCRIPT))
    wait_for_state(client, owner, send(client, owner, thread["id"], "note this")["id"], {"succeeded"})
    items = stream(server, _path(thread["id"]), owner.token, timeout=20)
    _until_finished(items)
    _until_keep_alive(items)

    assert client.delete(f"/v1/threads/{thread['id']}", headers=owner.headers).status_code == 204
    # The server closes it: no event, and not past a few keep-alives (a stream left open would go on for ever).
    after = list(itertools.islice(items, 5))
    assert [item.comment for item in after] == ["keep-alive"] * len(after)
    assert len(after) < 5


def test_a_member_follows_their_own_thread_with_an_owners_run_and_nobody_else_sees_it(
    server: str, client: FlaskClient, tenant: TenantFixture, make_tenant: Any, db: Database
) -> None:
    member = tenant.add("member")
    thread = new_thread(client, member, create_agent(client, tenant.owner, SCRIPT))
    run = send(client, tenant.owner, thread["id"], "note this")  # the owner's run on the member's thread
    wait_for_state(client, tenant.owner, run["id"], {"succeeded"})
    followed = _until_finished(stream(server, _path(thread["id"]), member.token))
    assert _shown(followed) == _stored(db, [(1, run["id"])])

    for stranger in (tenant.add("member"), make_tenant("other").owner):
        request = urllib.request.Request(  # noqa: S310 (loopback)
            f"{server}{_path(thread['id'])}", headers={"Authorization": f"Bearer {stranger.token}"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310
        assert refused.value.code == 404
        assert refused.value.headers["Content-Type"] == "application/problem+json"


def test_approvals_and_finished_runs_name_their_thread_in_the_lists_the_tenant_stream_and_webhooks(
    server: str, client: FlaskClient, make_tenant: Any
) -> None:
    tenant = make_tenant()  # its own tenant: the tenant stream below replays nobody else's approvals
    owner = tenant.owner
    script = [{"text": "Saving.", "tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}]
    with receiving() as receiver:
        hook = {"url": receiver.url, "events": ["approval.requested", "run.finished"]}
        assert client.post("/v1/webhooks", json=hook, headers=owner.headers).status_code == 201
        thread = new_thread(client, owner, create_agent(client, owner, script))
        run = send(client, owner, thread["id"], "note this")
        assert wait_for_state(client, owner, run["id"], {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
        alone = suspended_run(client, tenant, script)  # a run without a thread

        [item] = pending(client, owner, run["id"])
        assert item["thread_id"] == thread["id"]
        listed = client.get("/v1/approvals?state=pending", headers=owner.headers).json["items"]
        assert {entry["run_id"]: entry["thread_id"] for entry in listed} == {run["id"]: thread["id"], alone: None}
        assert client.get(f"/v1/approvals/{item['id']}", headers=owner.headers).json["thread_id"] == thread["id"]
        tenant_stream = stream(server, "/v1/approvals/events", owner.token)
        requested = list(itertools.islice((item for item in tenant_stream if item.event), 2))
        assert {event.data["run_id"]: event.data["thread_id"] for event in requested} == {
            run["id"]: thread["id"],
            alone: None,
        }

        assert decide(client, owner, run["id"], {"tool_call_id": "w", "decision": "approve"}).status_code == 200
        wait_for_state(client, owner, run["id"], {"succeeded"})
        sent = _webhooks(receiver, run["id"])
        assert sent["approval.requested"]["thread_id"] == thread["id"]
        assert sent["run.finished"]["thread_id"] == thread["id"]


def _webhooks(receiver: Receiver, run_id: str) -> dict[str, dict[str, Any]]:
    """The data of the webhooks received about one run, by event type, once both have come."""

    def both() -> dict[str, dict[str, Any]] | None:
        about: dict[str, dict[str, Any]] = {}
        for request in receiver.received:
            data = request.json["data"]
            if run_id in (data.get("run_id"), data.get("id")):
                about[request.type] = data
        return about if len(about) == 2 else None

    found: dict[str, dict[str, Any]] = wait_until(both)
    return found
