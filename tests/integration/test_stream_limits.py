"""Limits on live event streams, through real gunicorn servers and real SSE connections.

A user holds at most ``max_streams_per_user`` open streams across every API process; a stream is re-authorised at
every keep-alive, idle or busy; and a process keeps threads for ordinary requests however many streams are asked
for. The runs streamed here suspend awaiting approval (or stay queued when no worker takes them), so their
streams stay open until the test ends them.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import delete

from hango.kernel.config import Settings
from hango.kernel.models import Membership, Run
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run
from tests.integration.hitl_helpers import write_memory
from tests.support.processes import api_server, get_status, start, stop, wait_until

pytestmark = pytest.mark.slow

SUSPENDING = [{"text": "Saving.", "tool_calls": [write_memory()]}, {"text": "Done."}]
PROBLEM = "urn:hango:problem:"
# A deadline for what should happen within about one keep-alive (1s in the test settings), not a timing claim.
SOON = 15


class Reader:
    """One event stream over a real connection, read by a thread until either side closes it."""

    def __init__(self, base: str, run_id: str, token: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self._connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self._connection.request("GET", f"/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {token}"})
        self.response = self._connection.getresponse()
        self.status = self.response.status
        self.lines: list[str] = []
        self.ended = threading.Event()
        self.problem: dict[str, Any] = {}
        if self.status != 200:
            self.problem = json.loads(self.response.read())
            self.ended.set()
            return
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while raw := self.response.readline():
                self.lines.append(raw.decode().rstrip("\n"))
        except OSError:  # the test hung up on its side
            pass
        finally:
            self.ended.set()

    def events(self) -> list[str]:
        """The event types received so far."""
        return [line.removeprefix("event: ") for line in list(self.lines) if line.startswith("event: ")]

    def hang_up(self) -> None:
        """Close the client's side, as a browser tab does when it goes away."""
        if self._connection.sock is not None:
            with contextlib.suppress(OSError):  # the server may have closed it already
                self._connection.sock.shutdown(socket.SHUT_RDWR)
        # The reading thread sees the end of the stream; only then is the connection closed under it.
        self.ended.wait(SOON)
        self._connection.close()


@pytest.fixture
def readers() -> Iterator[list[Reader]]:
    """Every stream a test opens, hung up at its end."""
    opened: list[Reader] = []
    yield opened
    for reader in opened:
        reader.hang_up()


def _open(readers: list[Reader], base: str, run_id: str, person: Person) -> Reader:
    reader = Reader(base, run_id, person.token)
    readers.append(reader)
    return reader


def _streamable_run(client: FlaskClient, tenant: TenantFixture, person: Person) -> str:
    return start_run(client, person, create_agent(client, tenant.owner, SUSPENDING))


def _assert_refused(reader: Reader, status: int, kind: str) -> None:
    assert reader.status == status, reader.problem
    assert reader.response.headers["Content-Type"] == "application/problem+json"
    assert int(reader.response.headers["Retry-After"]) >= 1
    assert reader.problem["type"] == PROBLEM + kind


# Every test but the last streams from these two API processes (each test's streams are its own users'): a server
# costs a second or more of a core to start.
CAP = 3  # max_streams_per_user of the two servers


@pytest.fixture(scope="module")
def limited(settings: Settings) -> Settings:
    """The settings of this module's servers: the test settings with a per-user cap of ``CAP`` streams."""
    return settings.replace(max_streams_per_user=CAP)


@pytest.fixture(scope="module")
def servers(limited: Settings) -> Iterator[tuple[str, str]]:
    """Two API processes on ``limited`` settings, sharing the database and Redis."""
    with api_server(limited) as first, api_server(limited) as second:
        yield first, second


@pytest.fixture(scope="module")
def server(servers: tuple[str, str]) -> str:
    """One of the two."""
    return servers[0]


# --- the per-user cap, counted across API processes ---------------------------------------------------------


def test_a_user_holds_at_most_the_cap_across_processes_and_closing_one_frees_a_slot(
    servers: tuple[str, str], client: FlaskClient, tenant: TenantFixture, readers: list[Reader]
) -> None:
    first, second = servers
    run_id = _streamable_run(client, tenant, tenant.owner)
    held = [_open(readers, base, run_id, tenant.owner) for base in (first, second, first)]
    assert [reader.status for reader in held] == [200] * CAP

    _assert_refused(_open(readers, second, run_id, tenant.owner), 429, "too-many-streams")
    _assert_refused(_open(readers, first, run_id, tenant.owner), 429, "too-many-streams")
    # The cap is the user's: someone else in the tenant still streams.
    assert _open(readers, second, run_id, tenant.add("admin")).status == 200

    held[0].hang_up()
    # The server notices the hang-up at its next keep-alive write and gives the slot back.
    freed = wait_until(lambda: _open(readers, second, run_id, tenant.owner).status == 200, timeout=SOON, interval=0.2)
    assert freed


def test_the_slots_of_a_killed_server_lapse_on_their_own(
    server: str, limited: Settings, client: FlaskClient, tenant: TenantFixture, readers: list[Reader]
) -> None:
    run_id = _streamable_run(client, tenant, tenant.owner)
    doomed, doomed_base = _killable_server(limited)
    try:
        # One stream lives on, renewing the user's slots, while the others' server dies.
        assert _open(readers, server, run_id, tenant.owner).status == 200
        assert [_open(readers, doomed_base, run_id, tenant.owner).status for _ in range(CAP - 1)] == [200] * (CAP - 1)
        _assert_refused(_open(readers, server, run_id, tenant.owner), 429, "too-many-streams")
    finally:
        stop(doomed, kill=True)  # no clean shutdown: nothing releases the slots
    admitted = wait_until(
        lambda: _open(readers, server, run_id, tenant.owner).status == 200, timeout=SOON, interval=0.2
    )
    assert admitted


def _killable_server(settings: Settings) -> tuple[Any, str]:
    from tests.support.processes import free_port

    port = free_port()
    process = start(
        ["api", "--port", str(port), "--workers", "1", "--connections", "8"], settings, f"hango-test-api-{port}"
    )
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _answers(base) or process.poll() is not None, timeout=30)
    assert process.poll() is None, "the API server exited at start"
    return process, base


def _answers(base: str) -> bool:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


# --- re-authorisation at every keep-alive -------------------------------------------------------------------


def _new_token(client: FlaskClient, tenant: TenantFixture, person: Person) -> tuple[str, str]:
    response = client.post(f"/v1/users/{person.user_id}/tokens", headers=tenant.owner.headers)
    assert response.status_code == 201, response.json
    return response.json["id"], response.json["token"]


def test_revoking_the_token_closes_an_idle_stream(
    server: str, client: FlaskClient, tenant: TenantFixture, readers: list[Reader]
) -> None:
    member = tenant.add("member")
    run_id = _streamable_run(client, tenant, member)
    token_id, token = _new_token(client, tenant, member)
    reader = _open(readers, server, run_id, Person(member.user_id, member.email, "member", token))
    assert reader.status == 200
    # Still open across keep-alives while the token is good.
    wait_until(lambda: reader.lines.count(": keep-alive") >= 2, timeout=SOON)
    assert not reader.ended.is_set()

    assert client.delete(f"/v1/tokens/{token_id}", headers=tenant.owner.headers).status_code == 204
    assert reader.ended.wait(SOON), "the revoked token's stream stayed open"


def test_revoking_the_token_stops_events_that_keep_flowing(
    server: str, settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture, readers: list[Reader]
) -> None:
    run_id = _streamable_run(client, tenant, tenant.owner)
    token_id, token = _new_token(client, tenant, tenant.owner)
    reader = _open(readers, server, run_id, Person(tenant.owner.user_id, tenant.owner.email, "owner", token))
    assert reader.status == 200
    with _Emitter(settings, db, run_id) as emitted:
        wait_until(lambda: reader.events().count("test.tick") >= 3, timeout=SOON)
        assert client.delete(f"/v1/tokens/{token_id}", headers=tenant.owner.headers).status_code == 204
        # Events arrive far more often than keep-alives fall due, so the stream is never idle: it must end anyway.
        assert reader.ended.wait(SOON), "the revoked token's stream kept streaming"
        # ... while the run stays busy: events go on being appended after the stream ended. (Counting the events
        # appended between the revocation and the end instead would fail when the stream ends within one tick.)
        ended_at = emitted()
        wait_until(lambda: emitted() > ended_at, timeout=SOON)


class _Emitter:
    """Appends an event to a run's log every 100 ms, as a busy run does, until stopped."""

    def __init__(self, settings: Settings, db: Database, run_id: str) -> None:
        self._runtime = Runtime.build(settings, db=db)
        self._run_id = uuid.UUID(run_id)
        self._stop = threading.Event()
        self.count = 0
        self._thread = threading.Thread(target=self._emit, daemon=True)

    def _emit(self) -> None:
        while not self._stop.wait(0.1):
            with unit_of_work(self._runtime) as work:
                run = work.session.get(Run, self._run_id)
                assert run is not None
                work.emit(run, "test.tick", {"n": self.count})
            self.count += 1

    def __enter__(self) -> Any:
        self._thread.start()
        return lambda: self.count

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(SOON)


def test_removing_the_membership_closes_the_stream(
    server: str, db: Database, client: FlaskClient, tenant: TenantFixture, readers: list[Reader]
) -> None:
    member = tenant.add("member")
    run_id = _streamable_run(client, tenant, member)
    reader = _open(readers, server, run_id, member)
    assert reader.status == 200
    wait_until(lambda: ": keep-alive" in reader.lines, timeout=SOON)
    # The API has no route that removes a user from a tenant yet: remove the membership row directly.
    with db.transaction() as session:
        session.execute(
            delete(Membership).where(Membership.tenant_id == tenant.id, Membership.user_id == member.user_id)
        )
    assert reader.ended.wait(SOON), "the removed member's stream stayed open"


# --- streams and ordinary requests do not starve each other -------------------------------------------------


API_THREADS = 32  # what api_server gives its one process


def test_ordinary_requests_are_served_when_more_streams_are_asked_for_than_the_server_has_threads(
    settings: Settings, client: FlaskClient, make_tenant: Any, readers: list[Reader]
) -> None:
    crowd = settings.replace(max_streams_per_user=10)
    tenants: list[TenantFixture] = [make_tenant(f"crowd-{n}") for n in range(4)]
    runs = [_streamable_run(client, tenant, tenant.owner) for tenant in tenants]
    with api_server(crowd) as base:
        # Four users ask for ten streams each, all at once: more than the process has threads.
        openers = [
            threading.Thread(target=_open, args=(readers, base, run_id, tenant.owner), daemon=True)
            for tenant, run_id in zip(tenants, runs, strict=True)
            for _ in range(10)
        ]
        for opener in openers:
            opener.start()
        wait_until(lambda: len(readers) >= API_THREADS, timeout=60)

        for tenant in tenants:
            assert get_status(base, "/v1/runs", tenant.owner.token) == 200

        for opener in openers:
            opener.join(SOON)
        admitted = [reader for reader in readers if reader.status == 200]
        refused = [reader for reader in readers if reader.status != 200]
        assert len(admitted) + len(refused) == len(openers)
        assert admitted
        assert refused
        for reader in refused:
            _assert_refused(reader, 503, "stream-capacity-full")
        # The admitted streams are still open and ticking.
        assert not any(reader.ended.is_set() for reader in admitted)
