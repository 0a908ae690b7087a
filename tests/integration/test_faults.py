"""Issue 23: real faults of PostgreSQL, Redis and the processes, on a PostgreSQL cluster and a Redis of this module's
own (tests/support/private_services.py), so that stopping, restarting and cutting them never touches the machine's.

Sessions dropped under running runs, a worker frozen inside a transaction that holds its run's row, a worker frozen
outside one, a broker read that swallows a message, an API process killed between its commit and its publish, and
outages of either service seen through the API. The recovery bounds are the settings' own plus a little slack for
the machine; each measured time is printed and appended to ``fault-recovery.jsonl`` in the tests' log folder.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from typing import Any, cast

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from hango.agent.messages import user_message
from hango.api import create_app
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Run, RunEvent
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.processes import migrate
from hango.run import service
from tests.integration.conftest import TenantFixture, create_agent, start_run
from tests.support import tools
from tests.support.private_services import PrivatePostgres, PrivateRedis, private_postgres, private_redis
from tests.support.processes import api_process, log_path, logged, wait_until, worker, worker_log_name
from tests.support.tools import executions, holds_lock
from tests.support.tripwire import run_task_delivery, run_task_publish, tripwire

pytestmark = pytest.mark.slow

DATABASE = "hango_faults"
# The machine's share of a bound: a waiting worker picking the message up, a 2-core machine busy with processes.
SLACK = timedelta(seconds=3)


@pytest.fixture(scope="module")
def private() -> Iterator[tuple[PrivatePostgres, PrivateRedis]]:
    """This module's PostgreSQL cluster and Redis; the test tools' counters and markers live on that Redis too."""
    with private_postgres() as postgres, private_redis() as broker, pytest.MonkeyPatch.context() as patch:
        patch.setenv("HANGO_TEST_REDIS_URL", broker.url)  # the workers' tools
        patch.setattr(tools, "REDIS_URL", broker.url)  # this process's reads of them
        yield postgres, broker


@pytest.fixture(scope="module")
def postgres(private: tuple[PrivatePostgres, PrivateRedis]) -> PrivatePostgres:
    """This module's PostgreSQL cluster."""
    return private[0]


@pytest.fixture(scope="module")
def broker(private: tuple[PrivatePostgres, PrivateRedis]) -> PrivateRedis:
    """This module's Redis."""
    return private[1]


@pytest.fixture(autouse=True)
def _services_up(postgres: PrivatePostgres, broker: PrivateRedis, db: Database) -> None:
    """Each test starts with both services up and this process's pool empty, whatever the one before it left."""
    if not postgres.running():
        postgres.start()
    if not broker.client().ping():
        broker.start()
    db.dispose()


@pytest.fixture(scope="module")
def settings(postgres: PrivatePostgres, broker: PrivateRedis) -> Settings:
    """Settings on the private services, with a migrated database, short timings and a long enqueue dedup TTL (a
    lost message must be found by the reconciler's own clock, not by the key expiring)."""
    url = postgres.create_database(DATABASE)
    migrate.upgrade(url)
    settings = Settings(
        database_url=url,
        redis_url=broker.url,
        queue=f"hango-faults-{uuid.uuid4().hex[:10]}",
        tool_modules=("tests.support.tools",),
        run_lease=timedelta(seconds=3),
        run_heartbeat_interval=timedelta(seconds=0.5),
        reconcile_interval=timedelta(seconds=1),
        requeue_after=timedelta(seconds=2),
        enqueue_dedup_ttl=timedelta(seconds=60),
        tool_timeout=timedelta(seconds=3),
        db_idle_in_transaction_timeout=timedelta(seconds=4),  # longer than the tool timeout
        db_lock_timeout=timedelta(seconds=1),
        db_statement_timeout=timedelta(seconds=5),
        db_connect_timeout=timedelta(seconds=2),
        unavailable_retry_after=timedelta(seconds=2),
        sse_keepalive=timedelta(seconds=1),
        model_retry_base_delay=timedelta(seconds=0.01),
    )
    settings.check()  # what the processes started with these settings check too
    return settings


@pytest.fixture(scope="module")
def db(settings: Settings) -> Iterator[Database]:
    """The pool of this process, built as the API and the workers build theirs."""
    database = Runtime.build(settings).db
    yield database
    database.dispose()


@pytest.fixture(scope="module")
def app(settings: Settings, db: Database) -> Flask:
    """The API on the private services."""
    return create_app(settings, db=db)


@pytest.fixture
def own(settings: Settings) -> Settings:
    """The module's settings with a queue of this test's own: only the workers it starts take its runs."""
    return settings.replace(queue=f"hango-faults-{uuid.uuid4().hex[:10]}")


def _create_run(settings: Settings, db: Database, tenant: TenantFixture, agent_id: str) -> uuid.UUID:
    """A run created as the API does, enqueued on ``settings.queue``."""
    owner = Principal(tenant.id, tenant.owner.user_id, "owner")
    runtime = Runtime.build(settings, db=db)
    return service.create_run(runtime, owner, uuid.UUID(agent_id), [user_message("go")]).id


def _read(db: Database, read: Callable[[Any], Any]) -> Any:
    """``read(session)`` in a transaction; ``None`` when the database refused (a session this test ended)."""
    try:
        with db.transaction() as session:
            return read(session)
    except DBAPIError:
        return None


def _run(db: Database, run_id: uuid.UUID) -> Run | None:
    return cast(Run | None, _read(db, lambda session: session.get(Run, run_id)))


def _events(db: Database, run_id: uuid.UUID) -> list[tuple[str, dict[str, Any]]]:
    def read(session: Any) -> list[tuple[str, dict[str, Any]]]:
        rows = session.scalars(select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.seq))
        return [(row.type, row.data) for row in rows]

    return cast(list[tuple[str, dict[str, Any]]], _read(db, read) or [])


def _state(db: Database, run_id: uuid.UUID) -> str | None:
    run = _run(db, run_id)
    return None if run is None else run.state


def _finished(db: Database, *run_ids: uuid.UUID) -> bool:
    return all(_state(db, run_id) in {"succeeded", "failed", "cancelled"} for run_id in run_ids)


def _started_tool(db: Database, run_id: uuid.UUID, tool: str) -> bool:
    return any(kind == "tool.started" and data["tool_name"] == tool for kind, data in _events(db, run_id))


def _claims(db: Database, run_id: uuid.UUID) -> int:
    """How many times the run was claimed or given back to the queue since it was created."""
    events = _events(db, run_id)
    return sum(kind == "run.started" or (kind == "run.queued" and data["reason"] != "created") for kind, data in events)


def _consumers(broker: PrivateRedis) -> int:
    """Clients of the private Redis waiting in ``BRPOP``: Celery consumers ready for a message."""
    return sum(client.get("cmd") == "brpop" for client in broker.client().client_list())


def _dedup_key(db: Database, run_id: uuid.UUID) -> str:
    run = _run(db, run_id)
    assert run is not None
    return f"hango:enqueued:{run_id}:{run.queue_generation}"


def _recovered_within(name: str, condition: Callable[[], bool], since: float, bound: timedelta) -> float:
    """Wait for ``condition`` a little past ``bound`` (counted from ``since``), record how long it took, and fail
    when that was longer than ``bound``."""
    limit = bound.total_seconds()
    deadline = since + limit + 2
    while not condition():
        if time.monotonic() > deadline:
            _record(name, None, limit)
            raise AssertionError(f"{name}: not recovered within {limit:.0f}s (the bound the settings promise)")
        time.sleep(0.05)
    elapsed = time.monotonic() - since
    _record(name, elapsed, limit)
    assert elapsed <= limit, f"{name}: recovered after {elapsed:.1f}s; the settings promise {limit:.0f}s"
    return elapsed


def _record(name: str, elapsed: float | None, bound: float | None = None) -> None:
    """Print a measured recovery time and append it to the log folder's ``fault-recovery.jsonl``."""
    measured = "never" if elapsed is None else f"{elapsed:.2f}s"
    print(f"\nrecovery {name}: {measured}" + ("" if bound is None else f" (bound {bound:.0f}s)"))
    line = {"test": name, "seconds": None if elapsed is None else round(elapsed, 3), "bound": bound}
    with (log_path("fault-recovery").with_suffix(".jsonl")).open("a") as out:
        out.write(json.dumps(line) + "\n")


def _between_counts(tool: str, args: dict[str, Any], before: str, after: str) -> list[dict[str, Any]]:
    """A script calling ``count``, then ``tool``, then ``count`` again, then answering."""
    return [
        {"tool_calls": [{"id": "c1", "name": "count", "args": {"key": before}}]},
        {"tool_calls": [{"id": "s1", "name": tool, "args": args}]},
        {"tool_calls": [{"id": "c2", "name": "count", "args": {"key": after}}]},
        {"text": "finished"},
    ]


def test_dropped_database_sessions_fail_no_run(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings, postgres: PrivatePostgres
) -> None:
    keys = [uuid.uuid4().hex for _ in range(4)]
    # One run sleeps in a tool that uses no session; the other's tool wrote a file in its batch's transaction, which
    # stays open while the tool sleeps.
    sleeps = _between_counts("sleep", {"seconds": 2}, keys[0], keys[1])
    writes = _between_counts("scribble", {"file_path": "/half.txt", "seconds": 2}, keys[2], keys[3])
    agents = [
        create_agent(client, tenant.owner, script, tools=["count", "sleep", "scribble"]) for script in (sleeps, writes)
    ]
    runs = [_create_run(own, db, tenant, agent_id) for agent_id in agents]
    with worker(own, concurrency=2, beat=True, name="dropped"):
        wait_until(lambda: _started_tool(db, runs[0], "sleep") and _batch_wrote_a_file(postgres), timeout=30)
        assert client.get(f"/v1/runs/{runs[0]}", headers=tenant.owner.headers).status_code == 200
        # Every session of the database ends: the API's, the workers', beat's; again once the first reconnected.
        assert postgres.terminate_sessions(DATABASE) > 0
        wait_until(lambda: postgres.sessions(DATABASE) > 0, timeout=10)
        postgres.terminate_sessions(DATABASE)
        wait_until(lambda: _finished(db, *runs), timeout=60)
    ended = [_run(db, run_id) for run_id in runs]
    assert [(run.state, run.error) for run in ended if run is not None] == [("succeeded", None)] * 2
    assert [run.attempts for run in ended if run is not None] == [0, 0], "a dropped session counted as a lost worker"
    requeued = [data for kind, data in _events(db, runs[1]) if kind == "run.queued"]
    assert {"reason": "transient database error"} in requeued, requeued
    assert [executions(key) for key in keys] == [1, 1, 1, 1], "a call ran again, or never"
    # The API's pooled sessions were ended too: its first read retries on a fresh connection.
    response = client.get(f"/v1/runs/{runs[0]}", headers=tenant.owner.headers)
    assert response.status_code == 200, response.json


def _batch_wrote_a_file(postgres: PrivatePostgres) -> bool:
    """Whether a session sits in a transaction whose last statement wrote a file (``scribble``'s batch)."""
    activity = postgres.activity(DATABASE)
    return any(state == "idle in transaction" and query.startswith("INSERT INTO files") for state, query in activity)


def test_a_worker_frozen_holding_its_runs_row_loses_the_run_within_the_idle_timeout(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings
) -> None:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"id": "l1", "name": "lock_run", "args": {"seconds": 2}}]},
        {"text": "finished"},
    ]
    agent_id = create_agent(client, tenant.owner, script, tools=["lock_run"])
    run_id = _create_run(own, db, tenant, agent_id)
    # Both with beat: whichever takes the run is frozen, the other reconciles and takes it over.
    with _two_workers(own) as workers:
        wait_until(lambda: holds_lock(run_id), timeout=30)
        frozen = _holder_group(db, run_id)
        os.killpg(frozen, signal.SIGSTOP)
        try:
            stopped_at, claims = time.monotonic(), _claims(db, run_id)
            bound = own.run_lease + own.reconcile_interval + own.session_timeouts().idle_in_transaction + SLACK
            _recovered_within("frozen holding the row", lambda: _claims(db, run_id) > claims, stopped_at, bound)
            wait_until(lambda: _finished(db, run_id), timeout=30)
        finally:
            _resume(frozen)
        _assert_woken_worker_wrote_nothing(client, tenant, db, run_id, workers[frozen], ["l1"])


def test_a_worker_frozen_outside_a_transaction_loses_the_run_within_its_lease(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings
) -> None:
    before, after = uuid.uuid4().hex, uuid.uuid4().hex
    agent_id = create_agent(client, tenant.owner, _between_counts("sleep", {"seconds": 2}, before, after))
    run_id = _create_run(own, db, tenant, agent_id)
    with _two_workers(own) as workers:
        wait_until(lambda: _started_tool(db, run_id, "sleep"), timeout=30)
        frozen = _holder_group(db, run_id)
        os.killpg(frozen, signal.SIGSTOP)
        try:
            stopped_at, claims = time.monotonic(), _claims(db, run_id)
            bound = own.run_lease + own.reconcile_interval + SLACK
            _recovered_within("frozen in a sleep", lambda: _claims(db, run_id) > claims, stopped_at, bound)
            wait_until(lambda: _finished(db, run_id), timeout=30)
        finally:
            _resume(frozen)
        _assert_woken_worker_wrote_nothing(client, tenant, db, run_id, workers[frozen], ["c1", "s1", "c2"])
    assert executions(before) == 1
    assert executions(after) == 1


@contextmanager
def _two_workers(settings: Settings) -> Iterator[dict[int, str]]:
    """Two workers with beat on ``settings``' queue; yields each one's log name by its process group."""
    with (
        worker(settings, concurrency=1, beat=True, name="one") as one,
        worker(settings, concurrency=1, beat=True, name="two") as two,
    ):
        yield {one.pid: worker_log_name(settings, "one"), two.pid: worker_log_name(settings, "two")}


def _resume(process_group: int) -> None:
    """SIGCONT a process group this test stopped (gone already: nothing to resume)."""
    with suppress(ProcessLookupError):
        os.killpg(process_group, signal.SIGCONT)


def _holder_group(db: Database, run_id: uuid.UUID) -> int:
    """The process group of the worker holding the run (its lease owner is ``host:pid:nonce``)."""
    run = _run(db, run_id)
    assert run is not None
    assert run.lease_owner is not None, "the run is not held"
    return os.getpgid(int(run.lease_owner.split(":")[1]))


def _assert_woken_worker_wrote_nothing(
    client: FlaskClient, tenant: TenantFixture, db: Database, run_id: uuid.UUID, woken: str, calls: list[str]
) -> None:
    """The worker woken up (its log ``woken``) was refused its writes; the run succeeded once, one result a call."""
    # Celery's line for the end of the task the worker had when it froze, and what the execution came to.
    ended = f"hango.run[run-{run_id}-"
    wait_until(lambda: logged(woken, ended, "succeeded in") or logged(woken, ended, "raised"))
    assert logged(woken, "run stopped", str(run_id)), "the woken worker's execution was not stopped by the lease fence"
    run = _run(db, run_id)
    assert run is not None
    assert (run.state, run.error) == ("succeeded", None)
    assert [kind for kind, _ in _events(db, run_id)].count("run.finished") == 1
    messages = (client.get(f"/v1/runs/{run_id}/messages", headers=tenant.owner.headers).json or {})["items"]
    results = [block["tool_use_id"] for m in messages if m["role"] == "tool" for block in m["content"]]
    assert results == calls, "the woken worker wrote into the run after it was taken over"


def test_a_message_a_frozen_consumer_swallowed_is_sent_again_after_requeue_after(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings, broker: PrivateRedis
) -> None:
    key = uuid.uuid4().hex
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [{"name": "count", "args": {"key": key}}]}])
    with tripwire(broker.port) as wire, worker(own.replace(redis_url=wire.url), beat=False, name="swallower") as a:
        # Redis hands the run's message to the swallower's BRPOP; the swallower freezes before it reads a byte.
        wire.arm(run_task_delivery(own.queue), a.pid, signal.SIGSTOP, replies=True)
        try:
            run_id = _create_run(own, db, tenant, agent_id)
            wait_until(wire.fired.is_set, timeout=30)
            swallowed = wire.fired_at or 0.0
            queue = broker.client()
            assert queue.llen(own.queue) == 0, "the message is still in the queue"
            assert queue.exists(_dedup_key(db, run_id)), "the run's enqueue is not deduplicated"
            with worker(own, concurrency=1, beat=True, name="rescuer"):
                # Counted from when the rescuer consumes: its start-up is no part of hango's recovery.
                wait_until(lambda: _consumers(broker) > 0, timeout=30)
                since = time.monotonic()
                bound = own.requeue_after + own.reconcile_interval + SLACK
                elapsed = _recovered_within("swallowed message", lambda: _claims(db, run_id) > 0, since, bound)
                _record("swallowed message, from the swallow (rescuer start-up included)", since - swallowed + elapsed)
                wait_until(lambda: _finished(db, run_id), timeout=30)
        finally:
            _resume(a.pid)
    assert _state(db, run_id) == "succeeded"
    assert executions(key) == 1
    assert [kind for kind, _ in _events(db, run_id)].count("run.started") == 1


def test_an_api_killed_between_commit_and_publish_leaves_a_run_the_reconciler_sends(
    client: FlaskClient, tenant: TenantFixture, db: Database, own: Settings, broker: PrivateRedis
) -> None:
    agent_id = create_agent(client, tenant.owner, [{"text": "hello"}])
    with tripwire(broker.port) as wire, worker(own, concurrency=1, beat=True, name="after-crash"):
        wait_until(lambda: _consumers(broker) > 0, timeout=30)
        with api_process(own.replace(redis_url=wire.url)) as (base, api):
            wire.arm(run_task_publish(own.queue), api.pid, signal.SIGKILL)
            with pytest.raises((http.client.HTTPException, OSError)):
                _post(base, "/v1/runs", {"agent_id": agent_id, "input": "go"}, tenant.owner.token)
            assert wire.fired.is_set(), "the API answered without publishing the run's task"
        killed_at = wire.fired_at or 0.0
        run_id = _only_run_of(db, agent_id)
        queue = broker.client()
        assert _state(db, run_id) == "queued"
        assert queue.exists(_dedup_key(db, run_id)), "the run's enqueue is not deduplicated"
        assert queue.llen(own.queue) == 0, "the run's task was published"
        bound = own.requeue_after + own.reconcile_interval + SLACK
        _recovered_within("API killed before its publish", lambda: _claims(db, run_id) > 0, killed_at, bound)
        wait_until(lambda: _finished(db, run_id), timeout=30)
    assert _state(db, run_id) == "succeeded"


def _post(base: str, path: str, body: dict[str, Any], token: str) -> int:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        connection.request("POST", path, body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _only_run_of(db: Database, agent_id: str) -> uuid.UUID:
    ids = _read(db, lambda session: list(session.scalars(select(Run.id).where(Run.agent_id == uuid.UUID(agent_id)))))
    assert ids is not None
    assert len(ids) == 1, ids
    return cast(uuid.UUID, ids[0])


def _assert_unavailable(response: Any, settings: Settings) -> None:
    """A 503 problem of type ``unavailable`` with a ``Retry-After`` of the configured seconds."""
    assert response.status_code == 503, (response.status_code, response.get_data(as_text=True)[:300])
    assert response.mimetype == "application/problem+json"
    assert response.json["type"] == "urn:hango:problem:unavailable", response.json
    assert response.headers.get("Retry-After") == str(math.ceil(settings.unavailable_retry_after.total_seconds()))


def _readiness(client: FlaskClient, settings: Settings) -> tuple[int, dict[str, str]]:
    """``/readyz``'s status and checks; a 503 must be the ``unavailable`` problem with ``Retry-After``."""
    response = client.get("/readyz")
    if response.status_code == 503:
        _assert_unavailable(response, settings)
    return response.status_code, (response.json or {}).get("checks", {})


def test_outages_answer_503_and_the_api_recovers(
    client: FlaskClient,
    tenant: TenantFixture,
    db: Database,
    settings: Settings,
    postgres: PrivatePostgres,
    broker: PrivateRedis,
) -> None:
    headers = tenant.owner.headers
    agent_id = create_agent(client, tenant.owner, [{"text": "hello"}])
    first = uuid.UUID(start_run(client, tenant.owner, agent_id))

    postgres.stop()
    try:
        _assert_unavailable(client.get("/v1/runs", headers=headers), settings)
        assert _readiness(client, settings) == (503, {"database": "unreachable", "redis": "ok"})
    finally:
        postgres.start()
    assert client.get("/v1/runs", headers=headers).status_code == 200
    # A restart the API did not see: its pooled connections are dead; the first read retries on a fresh one.
    postgres.stop()
    postgres.start()
    response = client.get("/v1/runs", headers=headers)
    assert response.status_code == 200, response.json
    assert _readiness(client, settings) == (200, {"database": "ok", "redis": "ok"})

    broker.stop()
    try:
        assert _readiness(client, settings) == (503, {"database": "ok", "redis": "unreachable"})
        stream = client.get(f"/v1/runs/{first}/events", headers=headers, buffered=False)
        try:
            _assert_unavailable(stream, settings)
        finally:
            stream.close()
        during = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers)
    finally:
        broker.start()
    assert during.status_code == 202, during.json
    after = uuid.UUID(start_run(client, tenant.owner, agent_id))
    assert _readiness(client, settings) == (200, {"database": "ok", "redis": "ok"})
    runs = [first, uuid.UUID((during.json or {})["id"]), after]
    with worker(settings, concurrency=2, beat=True, name="after-outages"):
        wait_until(lambda: _finished(db, *runs), timeout=60)
    assert [_state(db, run_id) for run_id in runs] == ["succeeded"] * 3
