"""Server-Sent Events through a real gunicorn server: replay, live streaming, keep-alives, reconnection."""

from __future__ import annotations

import itertools
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.models import Run
from hango.platform.db import Database
from hango.store import events as event_store
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.support.sse import SseEvent, events_only, stream

pytestmark = pytest.mark.usefixtures("worker_process")


@pytest.fixture(scope="module")
def server(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


def _stored(db: Database, run_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """The run's log as a replay reads it (a ``message.created`` event with its message)."""
    with db.transaction() as session:
        return [
            tuple(entry) for entry in event_store.events_of(session, session.get_one(Run, uuid.UUID(run_id)), 0, 10_000)
        ]


def _as_tuples(events: list[SseEvent]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(event.id or 0, event.event, event.data) for event in events]


SCRIPT = [
    {"text": "One.", "tool_calls": [{"name": "sleep", "args": {"seconds": 2.2}}]},
    {"text": "Two.", "tool_calls": [{"name": "write_file", "args": {"file_path": "/a.txt", "content": "a"}}]},
    {"text": "Done."},
]


def test_one_connection_sees_the_whole_run_live_in_order(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, SCRIPT))
    items = list(stream(server, f"/v1/runs/{run_id}/events", tenant.owner.token))
    events = events_only(iter(items))
    assert events[-1].event == "run.finished"
    assert events[-1].data == {"state": "succeeded", "error": None}
    assert _as_tuples(events) == _stored(db, run_id)
    assert [event.id for event in events] == list(range(1, len(events) + 1))
    # The sleeping tool kept the stream idle for longer than the keep-alive interval.
    assert any(item.comment == "keep-alive" for item in items)


def test_reconnecting_with_last_event_id_misses_nothing(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, SCRIPT))
    first = list(itertools.islice(events_only_stream(server, run_id, tenant.owner.token), 4))
    rest = events_only(stream(server, f"/v1/runs/{run_id}/events", tenant.owner.token, last_event_id=first[-1].id))
    assert rest[0].id == first[-1].id + 1  # type: ignore[operator]
    assert _as_tuples(first + rest) == _stored(db, run_id)


def test_after_query_parameter_resumes_a_finished_run_and_closes(
    server: str, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "hi"}]))
    wait_for_state(client, tenant.owner, run_id, {"succeeded"})
    stored = _stored(db, run_id)
    replay = events_only(stream(server, f"/v1/runs/{run_id}/events?after=2", tenant.owner.token))
    assert _as_tuples(replay) == stored[2:]
    assert events_only(stream(server, f"/v1/runs/{run_id}/events?after={stored[-1][0]}", tenant.owner.token)) == []


def events_only_stream(server: str, run_id: str, token: str) -> Iterator[SseEvent]:
    return (item for item in stream(server, f"/v1/runs/{run_id}/events", token) if item.event)


@pytest.mark.parametrize("who", ["stranger", "other_member", "nobody"])
def test_a_stream_the_caller_may_not_see_is_refused_with_a_problem(
    server: str, client: FlaskClient, tenant: TenantFixture, make_tenant: Any, who: str
) -> None:
    creator = tenant.add("member")
    run_id = start_run(client, creator, create_agent(client, tenant.owner, [{"text": "hi"}]))
    token = {
        "stranger": make_tenant("other").owner.token,
        "other_member": tenant.add("member").token,
        "nobody": "hango_invalid",
    }[who]
    request = urllib.request.Request(  # noqa: S310 (loopback)
        f"{server}/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {token}"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == (401 if who == "nobody" else 404)
    assert refused.value.headers["Content-Type"] == "application/problem+json"


def test_a_malformed_last_event_id_is_a_400(server: str, client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "hi"}]))
    request = urllib.request.Request(  # noqa: S310 (loopback)
        f"{server}/v1/runs/{run_id}/events",
        headers={"Authorization": f"Bearer {tenant.owner.token}", "Last-Event-ID": "x"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 400
