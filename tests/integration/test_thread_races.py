"""Threads under real concurrency: several worker processes, requests racing on one thread's row, stray deliveries.

The runs of one thread never run at the same time and start in creation order, whatever the number of workers and
however often a run's task is delivered; concurrent requests on one thread agree on which run is active. Each claim
is read back from the stored rows (timestamps, the order of the run events, the thread-wide message numbers), not
from what a request answered.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, text

from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import PendingApproval, Run, RunEvent
from hango.platform.db import Database
from hango.platform.queue import RUN_TASK
from hango.platform.runtime import Runtime
from hango.services import tenancy
from tests.integration.conftest import Person, create_agent
from tests.integration.hitl_helpers import write_memory
from tests.support.processes import logged, start, stop, wait_until, worker_log_name

pytestmark = pytest.mark.slow

WORKERS = ("threads-a", "threads-b")
STORAGE = 3000  # HANGO_MAX_RUN_STORAGE_BYTES of this module's workers: bytes of a thread's scratch files
TERMINAL = ("succeeded", "failed", "cancelled")


@dataclass
class Pool:
    """Two worker processes of a queue of their own, and an API whose runs go to that queue."""

    settings: Settings
    runtime: Runtime
    client: FlaskClient
    owner: Person

    def post(self, path: str, body: dict[str, Any], person: Person | None = None) -> Any:
        return self.client.post(path, json=body, headers=(person or self.owner).headers)

    def new_thread(self, agent_id: str) -> str:
        response = self.post("/v1/threads", {"agent_id": agent_id})
        assert response.status_code == 201, response.json
        thread_id: str = response.json["id"]
        return thread_id

    def send(self, thread_id: str, text: str, strategy: str = "reject") -> str:
        response = self.post(f"/v1/threads/{thread_id}/runs", {"input": text, "multitask_strategy": strategy})
        assert response.status_code == 202, response.json
        run_id: str = response.json["id"]
        return run_id

    def stray_delivery(self, run_id: str) -> None:
        """Another message for the run's task, as a redelivery or a reconciler would send: only the conditional
        claim stands between it and a second execution."""
        celery = self.runtime.queue._celery
        celery.send_task(RUN_TASK, args=[run_id], task_id=f"stray-{uuid.uuid4()}", queue=self.settings.queue)


@contextmanager
def _workers(settings: Settings) -> Iterator[None]:
    """The module's worker processes, started side by side and stopped side by side (each stop waits for its
    process to finish what it holds)."""
    processes = [
        start(
            ["worker", "--concurrency", "2", *(["--beat"] if index == 0 else [])],
            settings,
            worker_log_name(settings, name),
        )
        for index, name in enumerate(WORKERS)
    ]
    try:
        yield
    finally:
        with ThreadPoolExecutor(len(processes)) as executor:
            list(executor.map(stop, processes))


@pytest.fixture(scope="module")
def pool(settings: Settings, db: Database) -> Iterator[Pool]:
    """Two ``hango worker`` processes of two slots each (one with the reconciler) on a queue of this module."""
    own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", max_run_storage_bytes=STORAGE)
    email = f"owner-{uuid.uuid4().hex[:8]}@example.com"
    created = tenancy.create_tenant(db, "threads", email)
    owner = Person(created.user_id, email, "owner", created.token)
    with _workers(own):
        # Both processes take runs from the start, or the first to boot would run them all.
        for name in WORKERS:
            wait_until(lambda name=name: logged(worker_log_name(own, name), "ready"), timeout=90)
        yield Pool(own, Runtime.build(own, db=db), create_app(own, db=db).test_client(), owner)


def _runs(db: Database, run_ids: list[str]) -> dict[str, Run]:
    with db.read() as session:
        rows = session.scalars(select(Run).where(Run.id.in_([uuid.UUID(run_id) for run_id in run_ids])))
        return {str(run.id): run for run in rows}


def _all_ended(db: Database, run_ids: list[str], settled: tuple[str, ...] = TERMINAL) -> dict[str, Run]:
    """Wait until every run is in one of ``settled``; the rows then."""

    def ended() -> dict[str, Run] | None:
        runs = _runs(db, run_ids)
        return runs if all(run.state in settled for run in runs.values()) else None

    result: dict[str, Run] = wait_until(ended, timeout=120, interval=0.1)
    return result


def _spans(db: Database, run_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Each run's first ``run.started`` and its ``run.finished``, as ids of the run events table: an id is taken when
    its row is inserted, so a run whose claim could only succeed after another run's end committed has a
    ``run.started`` numbered after that run's ``run.finished``."""
    with db.read() as session:
        statement = select(RunEvent.run_id, RunEvent.type, RunEvent.id).where(
            RunEvent.run_id.in_([uuid.UUID(run_id) for run_id in run_ids]),
            RunEvent.type.in_(("run.started", "run.finished")),
        )
        rows = list(session.execute(statement))
    started = {str(run_id): event_id for run_id, kind, event_id in sorted(rows, reverse=True) if kind == "run.started"}
    finished = {str(run_id): event_id for run_id, kind, event_id in rows if kind == "run.finished"}
    return {run_id: (started[run_id], finished[run_id]) for run_id in started}


def _assert_one_at_a_time(runs: list[Run], spans: dict[str, tuple[int, int]]) -> None:
    """In the thread's order, each run started (by the clock and by the event log) only after the one before it
    ended: never two of them running at once, and in creation order."""
    for before, after in itertools.pairwise(runs):
        assert before.finished_at is not None
        assert after.started_at is not None
        assert before.finished_at <= after.started_at, (
            f"run {after.thread_position} started at {after.started_at}, before run {before.thread_position} "
            f"ended at {before.finished_at}"
        )
        assert spans[str(before.id)][1] < spans[str(after.id)][0], (
            f"run {after.thread_position}'s run.started came before run {before.thread_position}'s run.finished"
        )


def _conversation(pool: Pool, thread_id: str) -> list[dict[str, Any]]:
    response = pool.client.get(f"/v1/threads/{thread_id}/messages?limit=200", headers=pool.owner.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


THREADS = 3
RUNS = 4
NAP = {"name": "sleep", "args": {"seconds": 0.25}}


def test_a_threads_runs_never_overlap_and_start_in_order_across_worker_processes(pool: Pool, db: Database) -> None:
    script = [entry for k in range(RUNS) for entry in ({"tool_calls": [NAP]}, {"text": f"answer {k}"})]
    agent_id = create_agent(pool.client, pool.owner, script)
    threads = [pool.new_thread(agent_id) for _ in range(THREADS)]
    by_thread: dict[str, list[str]] = {thread_id: [] for thread_id in threads}
    for k in range(RUNS):
        for thread_id in threads:  # the threads' runs interleaved, so that they load every worker at once
            run_id = pool.send(thread_id, f"question {k}", "enqueue")
            by_thread[thread_id].append(run_id)
            pool.stray_delivery(run_id)
    everything = [run_id for run_ids in by_thread.values() for run_id in run_ids]
    rows = _all_ended(db, everything)
    spans = _spans(db, everything)

    for thread_id, run_ids in by_thread.items():
        runs = sorted((rows[run_id] for run_id in run_ids), key=lambda run: run.thread_position or 0)
        assert [str(run.id) for run in runs] == run_ids, "positions follow the order of creation"
        _assert_one_at_a_time(runs, spans)
        assert [run.state for run in runs] == ["succeeded"] * RUNS, [run.error for run in runs]
        # The conversation is the runs one after the other, each continuing the script where the last one stopped.
        messages = _conversation(pool, thread_id)
        assert [message["seq"] for message in messages] == list(range(1, 4 * RUNS + 1))
        assert [message["run_id"] for message in messages] == [run_id for run_id in run_ids for _ in range(4)]
        assert [message["role"] for message in messages] == ["user", "assistant", "tool", "assistant"] * RUNS
        answers = [message["content"][0]["text"] for message in messages[3::4]]
        assert answers == [f"answer {k}" for k in range(RUNS)]

    # The proof above means something only if runs did run side by side: runs of different threads overlapped,
    # and both processes ran some.
    runs = list(rows.values())
    assert any(
        a.thread_id != b.thread_id and a.started_at < b.finished_at and b.started_at < a.finished_at  # type: ignore[operator]
        for a in runs
        for b in runs
    ), "no two runs ever ran at once: the workers did not run the threads side by side"
    for name in WORKERS:
        log = worker_log_name(pool.settings, name)
        assert any(logged(log, "run finished", run_id) for run_id in everything), f"{name} ran none of the runs"


# --- requests racing on one thread: each round holds the thread's row from a third connection until every request
# is proven to wait on it, then lets them all go at once.

POSTERS = 5
ROUNDS = 5


@contextmanager
def _thread_locked(db: Database, thread_id: str) -> Iterator[None]:
    with db.engine.connect() as connection, connection.begin():
        connection.execute(text("SELECT id FROM threads WHERE id = :id FOR UPDATE"), {"id": thread_id})
        yield


def _waiting_on_thread_locks(db: Database) -> int:
    """Statements of this database waiting on a lock while reading or writing threads (a request locks its thread's
    row first; were it not to, it would still wait when it takes the run's place in the thread)."""
    with db.engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE '%threads%'"
            )
        ).scalar_one()


def _race(pool: Pool, db: Database, thread_id: str, bodies: list[dict[str, Any]]) -> list[Any]:
    """POST every body to the thread's runs at once; the responses, in the order of ``bodies``."""

    def post(body: dict[str, Any]) -> Any:
        client = pool.client.application.test_client()
        return client.post(f"/v1/threads/{thread_id}/runs", json=body, headers=pool.owner.headers)

    with ThreadPoolExecutor(len(bodies)) as executor:
        with _thread_locked(db, thread_id):
            futures = [executor.submit(post, body) for body in bodies]
            wait_until(lambda: _waiting_on_thread_locks(db) == len(bodies), timeout=20, interval=0.01)
        return [future.result(timeout=60) for future in futures]


def _thread_runs(db: Database, thread_id: str) -> list[Run]:
    with db.read() as session:
        statement = select(Run).where(Run.thread_id == uuid.UUID(thread_id)).order_by(Run.thread_position)
        return list(session.scalars(statement))


def test_concurrent_posts_with_reject_start_exactly_one_run(pool: Pool, db: Database) -> None:
    # The run that wins waits for a human, so it stays active while the others are answered.
    agent_id = create_agent(pool.client, pool.owner, [{"tool_calls": [write_memory()]}])
    for _ in range(ROUNDS):
        thread_id = pool.new_thread(agent_id)
        responses = _race(pool, db, thread_id, [{"input": f"post {n}"} for n in range(POSTERS)])
        accepted = [response.json for response in responses if response.status_code == 202]
        refused = [response for response in responses if response.status_code != 202]
        assert len(accepted) == 1, [response.json for response in responses]
        for response in refused:
            assert response.status_code == 409, response.json
            assert response.json["type"] == "urn:hango:problem:thread-busy"
            assert response.json["active_run_id"] == accepted[0]["id"]
        assert [str(run.id) for run in _thread_runs(db, thread_id)] == [accepted[0]["id"]]


def test_concurrent_posts_with_enqueue_all_run_one_after_another_in_creation_order(pool: Pool, db: Database) -> None:
    agent_id = create_agent(pool.client, pool.owner, [])  # every turn answers "done" at once
    threads: list[str] = []
    for _ in range(ROUNDS):
        thread_id = pool.new_thread(agent_id)
        bodies = [{"input": f"post {n}", "multitask_strategy": "enqueue"} for n in range(POSTERS)]
        responses = _race(pool, db, thread_id, bodies)
        assert [response.status_code for response in responses] == [202] * POSTERS, [r.json for r in responses]
        threads.append(thread_id)
    runs = {thread_id: _thread_runs(db, thread_id) for thread_id in threads}
    everything = [str(run.id) for thread_runs in runs.values() for run in thread_runs]
    rows = _all_ended(db, everything)
    spans = _spans(db, everything)
    for thread_id, thread_runs in runs.items():
        assert [run.thread_position for run in thread_runs] == list(range(1, POSTERS + 1))
        ended = [rows[str(run.id)] for run in thread_runs]
        _assert_one_at_a_time(ended, spans)
        assert [run.state for run in ended] == ["succeeded"] * POSTERS
        # The conversation is the runs' messages in the order of their positions, two each, none interleaved.
        messages = _conversation(pool, thread_id)
        assert [message["run_id"] for message in messages] == [str(run.id) for run in thread_runs for _ in range(2)]


def _nap_then_pause(seconds: float) -> list[dict[str, Any]]:
    """A script whose first run naps, then asks to write the agent's memory (which waits for a human)."""
    nap = {"name": "sleep", "args": {"seconds": seconds}}
    return [{"tool_calls": [nap]}, {"tool_calls": [write_memory()]}, {"text": "after"}, {"text": "after"}]


def _approvals(db: Database, run_id: str) -> list[PendingApproval]:
    with db.read() as session:
        return list(session.scalars(select(PendingApproval).where(PendingApproval.run_id == uuid.UUID(run_id))))


def _event_id(db: Database, run_id: str, kind: str) -> int:
    with db.read() as session:
        statement = select(RunEvent.id).where(RunEvent.run_id == uuid.UUID(run_id), RunEvent.type == kind)
        found: int = session.scalars(statement.order_by(RunEvent.id)).first() or 0
        return found


def _task_ended(pool: Pool, run_id: str) -> bool:
    """Whether the task that was running the run has returned: its worker met the cancel at its next fenced write
    (or its suspension did) and stopped."""
    task = f"hango.run[run-{run_id}-1]"
    return any(logged(worker_log_name(pool.settings, name), task, "succeeded in") for name in WORKERS)


Moment = float | Literal["napping", "paused"]


def _interrupt_round(pool: Pool, db: Database, agent_id: str, moment: Moment) -> str:
    """Start a run and interrupt it: ``moment`` seconds after it started, or once its nap has started, or once it
    waits for a human. Check what the interrupt left, and return where the cancel met the run: ``paused`` (waiting
    for a human), ``mid-call`` (a call of its was running) or ``between-turns``."""
    thread_id = pool.new_thread(agent_id)
    first = pool.send(thread_id, "first")
    wait_until(lambda: _runs(db, [first])[first].state != "queued", timeout=60, interval=0.01)
    if moment == "paused":
        wait_until(lambda: _runs(db, [first])[first].state == "awaiting_approval", timeout=60, interval=0.01)
    elif moment == "napping":
        wait_until(lambda: _event_id(db, first, "tool.started"), timeout=60, interval=0.01)
    else:
        time.sleep(moment)  # not a wait for something: the moment at which the interrupt meets the run's end
    second = pool.send(thread_id, "second", "interrupt")
    _all_ended(db, [second], settled=(*TERMINAL, "awaiting_approval"))

    cancelled = _runs(db, [first])[first]
    assert cancelled.state == "cancelled", (cancelled.state, cancelled.error)
    approvals = _approvals(db, first)
    assert [approval.state for approval in approvals] == ["cancelled"] * len(approvals)
    if not approvals:  # its worker's next write meets the fence: wait for that, then look at what is stored
        wait_until(lambda: _task_ended(pool, first), timeout=60)

    # Never both active: the interrupting run started after the cancelled one ended.
    started = _runs(db, [second])[second]
    assert cancelled.finished_at is not None
    assert started.started_at is not None
    assert cancelled.finished_at <= started.started_at
    assert _event_id(db, first, "run.finished") < _event_id(db, second, "run.started")

    # The conversation: the cancelled run's messages, then the new run's input; nothing the cancelled run's worker
    # did after the cancel landed; every call of the cancelled run answered once, before the new input, a call it
    # left unanswered by "tool call interrupted" in a message of its own, its last.
    messages = _conversation(pool, thread_id)
    owners = [message["run_id"] for message in messages]
    boundary = owners.index(second)
    assert owners == [first] * boundary + [second] * (len(owners) - boundary)
    assert messages[boundary]["role"] == "user"
    assert messages[boundary]["content"][0]["text"] == "second"
    before = [(index, block) for index in range(boundary) for block in messages[index]["content"]]
    calls = sorted(block["id"] for _, block in before if block["type"] == "tool_use")
    results = [(index, block) for index, block in before if block["type"] == "tool_result"]
    assert sorted(block["tool_use_id"] for _, block in results) == calls
    interrupted = [(index, block) for index, block in results if block["content"] == "tool call interrupted"]
    for index, block in interrupted:
        assert block["is_error"] is True
        assert index == boundary - 1
        assert messages[index]["role"] == "tool"
    return "paused" if approvals else "mid-call" if interrupted else "between-turns"


def test_an_interrupt_racing_a_runs_end_cancels_it_whole_and_never_leaves_two_active(pool: Pool, db: Database) -> None:
    long_nap = create_agent(pool.client, pool.owner, _nap_then_pause(2.0))
    short_nap = create_agent(pool.client, pool.owner, _nap_then_pause(0.3))
    # Interrupted surely in the middle of a call (a long nap: its worker writes the result after the next run has
    # started), surely while paused, and at moments around the short nap's end, where the run's next turn, its
    # suspension and the interrupt's cancel meet.
    rounds: list[tuple[str, Moment]] = [(long_nap, "napping"), (short_nap, "paused")]
    rounds += [(short_nap, delay) for delay in (0.2, 0.25, 0.3, 0.35, 0.4)]
    with ThreadPoolExecutor(2) as executor:
        outcomes = list(executor.map(lambda item: _interrupt_round(pool, db, *item), rounds))
    assert outcomes[:2] == ["mid-call", "paused"], outcomes


def test_a_threads_scratch_files_share_one_storage_budget_across_its_runs(pool: Pool, db: Database) -> None:
    # Each file takes a little over half the module's HANGO_MAX_RUN_STORAGE_BYTES.
    def write(path: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "write_file", "args": {"file_path": path, "content": "x" * (STORAGE // 2)}}]}

    agent_id = create_agent(pool.client, pool.owner, [write("/notes/a.md"), {"text": "one"}, write("/notes/b.md")])
    thread_id, other = pool.new_thread(agent_id), pool.new_thread(agent_id)
    runs = [pool.send(thread_id, "first"), pool.send(thread_id, "second", "enqueue"), pool.send(other, "first")]
    assert [run.state for run in _all_ended(db, runs).values()] == ["succeeded"] * 3

    def results(thread_id: str) -> list[dict[str, Any]]:
        messages = _conversation(pool, thread_id)
        return [block for message in messages for block in message["content"] if block["type"] == "tool_result"]

    first, second = results(thread_id)
    assert not first["is_error"]
    # The second run's file would bring the thread's scratch files (the first run's included) over the budget.
    assert second["is_error"], second
    assert "HANGO_MAX_RUN_STORAGE_BYTES" in second["content"], second
    # Another thread of the same agent has a budget of its own.
    [elsewhere] = results(other)
    assert not elsewhere["is_error"], elsewhere
