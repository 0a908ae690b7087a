"""Every figure of issue 10's table in one run, each beside its floor.

Run: ``.venv/bin/python -m bench.figures [--quick]`` (PostgreSQL and Redis on 127.0.0.1). ``--quick`` plays fewer
rounds and fills the approval table with 100k rows instead of 1M.

The processes are the ones a user runs: ``hango api`` (one gunicorn gevent process, 32 connections) and ``hango worker``
(its default concurrency, 2 prefork children) on a queue of this benchmark's own, in a scratch database. Agents are
scripted (the ``scripted`` model provider); their first tool call writes ``/memories/x``, which the default
interrupt rules send to a human. Latencies are wall-clock times seen by this client: a figure ending at a run's
state ends when the event that state's commit publishes (``run.awaiting_approval``, ``run.finished``) reaches a
Redis subscriber of this process, a little after the commit itself; nothing polls the database meanwhile.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from sqlalchemy import Connection, create_engine, text

from bench.client import (
    Client,
    RunEvents,
    celery_round_trips,
    celery_throughput,
    reading,
    redis_publish_latency,
    run_events,
    wait_ready,
)
from bench.common import (
    REDIS_URL,
    bench_settings,
    cpu_seconds,
    forget_queue,
    forget_runs,
    free_port,
    percentile,
    process,
    python_process,
    scratch_database,
)
from bench.tools import wake_key
from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import Agent, Run
from hango.platform.db import engine_url
from hango.platform.queue import PING_TASK
from hango.platform.runtime import Runtime
from hango.run import service
from hango.services import tenancy

WRITE_MEMORY = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/x", "content": "remember this"}}
APPROVE = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
FINISHED = ("succeeded", "failed", "cancelled")
# The issue's own figures on ``main`` before the redesign, printed beside the new ones.
THEN_RUNS_PER_SECOND = 47.0


@dataclass(frozen=True)
class Rounds:
    """How much work each figure does."""

    latency: int
    history: int
    runs: int
    approvals: int
    kills: int

    @classmethod
    def of(cls, quick: bool) -> Rounds:
        """The full or the quick set."""
        if quick:
            return cls(latency=10, history=3, runs=60, approvals=100_000, kills=1)
        return cls(latency=30, history=8, runs=200, approvals=1_000_000, kills=2)


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    figure: str
    hango: str
    p90: str
    floor: str
    ratio: str
    goal: str
    met: bool | None  # None: a floor, with no goal of its own

    def markdown(self) -> str:
        """The row in the doc's table."""
        met = "" if self.met is None else "yes" if self.met else "**no**"
        return f"| {self.figure} | {self.hango} | {self.p90} | {self.floor} | {self.ratio} | {self.goal} | {met} |"


HEADER = "| figure | hango p50 | hango p90 | floor | ratio | goal | met |\n|---|---|---|---|---|---|---|"


@dataclass(frozen=True)
class Floors:
    """The bare broker figures every hango figure is compared with."""

    celery: list[float]
    redis: list[float]
    celery_per_second: float


@dataclass
class Bench:
    """The running system and a few helpers around it."""

    settings: Settings
    runtime: Runtime
    owner: Client
    principal: Principal
    database: Connection
    rounds: Rounds
    url: str
    events: RunEvents
    api_pid: int  # ``hango api``: gunicorn's arbiter, its workers are its children
    worker_pid: int  # ``hango worker``: Celery's main process, its pool children are its children

    def agent(self, script: list[dict[str, Any]], tools: list[str]) -> str:
        """A scripted agent, created over HTTP; its id."""
        # The turn limit counts the assistant turns of the history too.
        body = {
            "name": f"bench-{uuid.uuid4().hex[:8]}",
            "model": {"provider": "scripted", "script": script},
            "tools": tools,
            "max_turns": len(script) + 5,
        }
        answer = self.owner.post("/v1/agents", body)
        return str(answer["id"])

    def start(self, agent_id: str, messages: list[dict[str, Any]] | None = None) -> str:
        """POST /v1/runs; the run's id."""
        body: dict[str, Any] = {"agent_id": agent_id}
        body.update({"messages": messages} if messages else {"input": "go"})
        return str(self.owner.post("/v1/runs", body)["id"])

    def paused(self, run_id: str) -> float:
        """When ``run.awaiting_approval`` (published after the commit that set ``awaiting_since``) arrived."""
        return self.events.wait(run_id, "run.awaiting_approval")

    def succeeded(self, run_id: str) -> float:
        """When the run's ``run.finished`` in state ``succeeded`` arrived."""
        return self.events.wait(run_id, "run.finished:succeeded")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 100k approvals (about 3 minutes)")
    parser.add_argument("--only", choices=sorted(FIGURES), action="append", help="measure only these figures")
    args = parser.parse_args()
    rounds = Rounds.of(args.quick)
    started = time.monotonic()
    rows: list[Row] = []
    with scratch_database() as url, system(url, rounds) as bench:
        print(__doc__.split("\n\n")[2].replace("\n", " "), flush=True)
        floors = measure_floors(bench)
        print(HEADER, flush=True)
        for name, figure in FIGURES.items():
            if args.only and name not in args.only:
                continue
            began = time.monotonic()
            for row in figure(bench, floors):
                rows.append(row)
                print(row.markdown(), flush=True)
            print(f"({name}: {time.monotonic() - began:.0f} s)", flush=True)
    print(f"\nAll figures ({'quick' if args.quick else 'full'} run, {time.monotonic() - started:.0f} s):\n")
    print(HEADER)
    for row in rows:
        print(row.markdown())


@contextmanager
def system(url: str, rounds: Rounds, connections: int = 32) -> Iterator[Bench]:
    """The API and a worker on a queue of their own; their Redis keys are removed afterwards.

    ``connections`` is the API's client connections; a benchmark that holds more keep-alive connections at once
    than that would see some of them wait for a free one.
    """
    settings = bench_settings(url).replace(tool_modules=("bench.tools",))
    runtime = Runtime.build(settings)
    created = tenancy.create_tenant(runtime.db, "bench", f"bench-{uuid.uuid4().hex[:6]}@example.com")
    port = free_port()
    engine = create_engine(engine_url(url), isolation_level="AUTOCOMMIT")
    try:
        with (
            engine.connect() as database,
            process(["worker"], settings) as worker,
            process(["api", "--port", str(port), "--workers", "1", "--connections", str(connections)], settings) as api,
            run_events(runtime.redis) as events,
        ):
            wait_ready(port)
            principal = Principal(created.tenant_id, created.user_id, "owner")
            client = Client(port, created.token)
            yield Bench(settings, runtime, client, principal, database, rounds, url, events, api.pid, worker.pid)
    finally:
        with engine.connect() as database:
            enqueued = [
                (row.id, row.queue_generation)
                for row in database.execute(text("SELECT id, queue_generation FROM runs"))
            ]
        forget_runs(runtime.redis, enqueued)
        forget_queue(runtime.redis, settings.queue)
        runtime.redis.delete(_pong_key(settings))
        engine.dispose()
        runtime.db.engine.dispose()


def measure_floors(bench: Bench) -> Floors:
    """A bare Celery round trip, bare Redis publish→receive and bare Celery no-op throughput, on the same broker."""
    reply = _pong_key(bench.settings)
    celery = bench.runtime.queue._celery
    round_trips = celery_round_trips(celery, bench.runtime.redis, bench.settings, reply, 200)
    publish = redis_publish_latency(bench.runtime.redis, f"hango:bench:{uuid.uuid4().hex}", 500)
    rate = statistics.median(
        celery_throughput(celery, bench.runtime.redis, bench.settings, reply, 1000) for _ in range(3)
    )
    print(f"floor: bare Celery round trip (no-op task, worker pushes to a Redis list): {_ms_summary(round_trips)}")
    print(f"floor: bare Redis publish -> receive: {_ms_summary(publish)}")
    print(f"floor: bare Celery no-op tasks/s (1000 published at once, 2 pool children): {rate:.0f}/s", flush=True)
    return Floors(round_trips, publish, rate)


def pause_and_resume(bench: Bench, floors: Floors) -> list[Row]:
    """Pause: POST /v1/runs sent → ``awaiting_since`` set. Resume: decision POST sent → ``succeeded``."""
    agent_id = bench.agent([{"tool_calls": [WRITE_MEMORY]}], ["write_file"])
    pauses, resumes = [], []
    for _ in range(bench.rounds.latency + 2):
        pause, resume = _pause_then_resume(bench, agent_id)
        pauses.append(pause)
        resumes.append(resume)
    celery = statistics.median(floors.celery)
    paused = "pause: POST /v1/runs sent → awaiting_since committed (its event received)"
    succeeded = "resume: decision POST sent → run succeeded (its event received)"
    return [
        _latency_row(paused, pauses[2:], celery, "Celery RT", 3),
        _latency_row(succeeded, resumes[2:], celery, "Celery RT", 3),
    ]


def _pause_then_resume(
    bench: Bench, agent_id: str, messages: list[dict[str, Any]] | None = None
) -> tuple[float, float]:
    sent = time.perf_counter()
    run_id = bench.start(agent_id, messages)
    pause = bench.paused(run_id) - sent
    sent = time.perf_counter()
    bench.owner.post(f"/v1/runs/{run_id}/approvals", APPROVE)
    return pause, bench.succeeded(run_id) - sent


def bare_stack_pause(bench: Bench, floors: Floors) -> list[Row]:
    """The pause of the design card's stack with none of hango (:mod:`bench.bare_stack`): a POST to Flask under
    gunicorn that commits a row and sends a Celery task, whose worker commits twice and publishes on Redis."""
    with bare_stack(bench) as stack:
        samples = _bare_pauses(bench, stack)
    celery = statistics.median(floors.celery)
    row = _latency_row(f"stack floor under the pause: {BARE_PAUSE}", samples, celery, "Celery RT", 3)
    return [dataclasses.replace(row, goal="(no goal: what the stack alone costs)", met=None)]


BARE_PAUSE = "bare Flask POST (1 commit) → Celery task (2 commits) → Redis publish received"


@dataclass(frozen=True)
class BareStack:
    """:mod:`bench.bare_stack` running: an HTTP client of its server, a subscriber of its worker's publishes."""

    http: Client
    published: redis.client.PubSub
    api_pid: int  # gunicorn's arbiter (gthread, 1 worker of 32 threads, its child)
    worker_pid: int  # Celery's main process (2 prefork children)


@contextmanager
def bare_stack(bench: Bench) -> Iterator[BareStack]:
    """The bare stack's gunicorn and Celery worker on a queue of their own, its server answering; its Redis keys
    are removed afterwards."""
    env = {
        **os.environ,
        "HANGO_BENCH_BARE_DATABASE_URL": bench.url,
        "HANGO_BENCH_BARE_REDIS_URL": REDIS_URL,
        "HANGO_BENCH_BARE_QUEUE": f"hango-bench-bare-{uuid.uuid4().hex[:8]}",
    }
    bench.database.execute(text("CREATE TABLE IF NOT EXISTS bare_runs (id uuid PRIMARY KEY, state text NOT NULL)"))
    port = free_port()
    gunicorn = ["-m", "gunicorn", "-k", "gthread", "-w", "1", "--threads", "32", "-b", f"127.0.0.1:{port}"]
    queue = env["HANGO_BENCH_BARE_QUEUE"]
    worker = ["-m", "celery", "-A", "bench.bare_stack:celery_app", "worker", "-c", "2", "-Q", queue, "-l", "WARNING"]
    client = redis.Redis.from_url(REDIS_URL)
    with (
        python_process([*gunicorn, "bench.bare_stack:flask_app"], env) as server,
        python_process(worker, env) as consumer,
    ):
        published = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        published.subscribe(f"hango:bench:bare:{queue}")
        http = Client(port, "none")
        try:
            _wait_bare(http)
            yield BareStack(http, published, server.pid, consumer.pid)
        finally:
            published.close()
            forget_queue(client, queue)
            client.close()


def _bare_pauses(bench: Bench, stack: BareStack) -> list[float]:
    """One request at a time: POST sent → the worker's publish received."""
    samples = []
    for _ in range(bench.rounds.latency + 20):
        run_id = str(uuid.uuid4())
        sent = time.perf_counter()
        status, _ = stack.http.request("POST", f"/runs/{run_id}")
        assert status == 202, status
        while (message := stack.published.get_message(timeout=30)) is None or message["data"].decode() != run_id:
            if message is None and time.perf_counter() - sent > 30:
                raise TimeoutError("the bare stack's worker did not answer")
        samples.append(time.perf_counter() - sent)
    return samples[20:]  # the first ones warm the pools of both processes


def _wait_bare(http: Client) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            http.request("GET", "/healthz")
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("the bare stack's server did not start")


def decided_at_sse_client(bench: Bench, floors: Floors) -> list[Row]:
    """Decision POST sent → ``approval.decided`` read by an SSE client of a real ``hango api`` (no polling)."""
    agent_id = bench.agent([{"tool_calls": [WRITE_MEMORY]}], ["write_file"])
    samples = []
    for _ in range(bench.rounds.latency + 2):
        run_id = bench.start(agent_id)
        with reading(bench.owner, run_id) as reader:
            if not reader.paused.wait(60):
                raise TimeoutError(f"run {run_id} did not pause")
            sent = time.time()
            bench.owner.post(f"/v1/runs/{run_id}/approvals", APPROVE)
            reader.finished.wait(60)
        samples.append(reader.seen["approval.decided"] - sent)
    samples = samples[2:]
    p50 = statistics.median(samples)
    redis_p50 = statistics.median(floors.redis)
    return [
        Row(
            "approval.decided at an SSE client, from decision POST sent",
            _ms(p50),
            _ms(percentile(samples, 0.9)),
            f"Redis publish→receive {_ms(redis_p50)}",
            f"{p50 / redis_p50:.1f}x",
            "≤ 5 ms",
            p50 <= 0.005,
        )
    ]


def history(size: int) -> list[dict[str, Any]]:
    """``size`` input messages of about 300 characters, alternating, ending with the user's turn."""
    filler = "All work and no play makes a long conversation. " * 6
    roles = ["user" if (size - 1 - index) % 2 == 0 else "assistant" for index in range(size)]
    return [{"role": role, "content": f"{index}: {filler}"} for index, role in enumerate(roles)]


def resume_by_history(bench: Bench, floors: Floors) -> list[Row]:
    """Resume (decision POST sent → succeeded) of a run with 10 and with 1,000 messages before it suspends."""
    medians: dict[int, float] = {}
    samples: dict[int, list[float]] = {}
    for size in (10, 1000):
        messages = history(size)
        assistant_turns = sum(1 for message in messages if message["role"] == "assistant")
        # The scripted model plays the entry numbered by the assistant turns already in the history.
        script = [{"text": "noted"}] * assistant_turns + [{"tool_calls": [WRITE_MEMORY]}]
        agent_id = bench.agent(script, ["write_file"])
        resumes = [_pause_then_resume(bench, agent_id, messages)[1] for _ in range(bench.rounds.history + 1)][1:]
        samples[size], medians[size] = resumes, statistics.median(resumes)
    ratio = medians[1000] / medians[10]
    return [
        Row(
            "resume at 1,000 messages (given as POST /v1/runs `messages`) vs at 10",
            f"{_ms(medians[1000])} / {_ms(medians[10])}",
            f"{_ms(percentile(samples[1000], 0.9))} / {_ms(percentile(samples[10], 0.9))}",
            f"at 10: {_ms(medians[10])}",
            f"{ratio:.2f}x",
            "≤ 1.3x",
            ratio <= 1.3,
        )
    ]


def runs_per_second(bench: Bench, floors: Floors) -> list[Row]:
    """1-turn scripted runs submitted over HTTP by 4 client threads, until the last one finished; the CPU time the
    API's and the worker's processes spent meanwhile, beside the bare stack's for as many requests."""
    agent_id = bench.agent([{"text": "done"}], [])
    _drain(bench, agent_id, 10)  # warm-up
    before = Cpu.of(bench.api_pid, bench.worker_pid)
    started = time.perf_counter()
    _drain(bench, agent_id, bench.rounds.runs)
    rate = bench.rounds.runs / (time.perf_counter() - started)
    hango = (Cpu.of(bench.api_pid, bench.worker_pid) - before).per(bench.rounds.runs)
    ratio = rate / floors.celery_per_second
    row = Row(
        f"1-turn scripted runs/s, {bench.rounds.runs} HTTP submits → all finished (worker concurrency 2)",
        f"{rate:.1f}/s",
        "",
        f"Celery no-op {floors.celery_per_second:.0f}/s",
        f"{ratio:.3f}x ({rate / THEN_RUNS_PER_SECOND:.2f}x the issue's 47/s)",
        "≥ 0.25x Celery no-op (aim 0.5x)",
        ratio >= 0.25,
    )
    return [row, *_cpu_rows(hango, bare_stack_cpu(bench))]


@dataclass(frozen=True)
class Cpu:
    """CPU seconds (user + system) of a stack's HTTP server and of its Celery worker, each with its children."""

    api: float
    worker: float

    @classmethod
    def of(cls, api_pid: int, worker_pid: int) -> Cpu:
        """What the two process trees used so far."""
        return cls(cpu_seconds(api_pid), cpu_seconds(worker_pid))

    def __sub__(self, earlier: Cpu) -> Cpu:
        return Cpu(self.api - earlier.api, self.worker - earlier.worker)

    def per(self, count: int) -> Cpu:
        """Each figure divided by ``count``."""
        return Cpu(self.api / count, self.worker / count)

    @property
    def total(self) -> float:
        """Server and worker together."""
        return self.api + self.worker


BARE_CPU_REQUESTS = 200


def bare_stack_cpu(bench: Bench) -> Cpu:
    """CPU per request of :mod:`bench.bare_stack`: POSTs from as many client threads as hango's throughput figure,
    until each one's publish was received; its server and worker processes only.

    As many requests as hango's runs, and at least :data:`BARE_CPU_REQUESTS`: a reading counts whole 10 ms clock
    ticks per process, and the bare stack spends about a millisecond per request, so 60 would leave the figure
    uncertain by a tenth or more; 200 take under a second.
    """
    count = max(bench.rounds.runs, BARE_CPU_REQUESTS)
    with bare_stack(bench) as stack:
        _bare_drain(stack, 20)  # warm-up: the pools of both processes
        before = Cpu.of(stack.api_pid, stack.worker_pid)
        started = time.perf_counter()
        _bare_drain(stack, count)
        elapsed = time.perf_counter() - started
        used = Cpu.of(stack.api_pid, stack.worker_pid) - before
    print(f"bare stack: {count} POSTs → all published in {elapsed:.2f} s ({count / elapsed:.0f}/s)", flush=True)
    return used.per(count)


def _bare_drain(stack: BareStack, count: int) -> None:
    """POST ``count`` runs from 4 threads (as :func:`_drain`), then wait until each one's publish arrived."""
    run_ids = [str(uuid.uuid4()) for _ in range(count)]
    with ThreadPoolExecutor(4) as pool:
        statuses = set(pool.map(lambda run_id: stack.http.request("POST", f"/runs/{run_id}")[0], run_ids))
    assert statuses == {202}, statuses
    waiting = set(run_ids)
    deadline = time.monotonic() + 60
    while waiting:
        message = stack.published.get_message(timeout=1)
        if message is not None:
            waiting.discard(message["data"].decode())
        elif time.monotonic() > deadline:
            raise TimeoutError(f"the bare stack's worker did not publish {len(waiting)} of {count} runs")


def _cpu_rows(hango: Cpu, bare: Cpu) -> list[Row]:
    """CPU ms per 1-turn run of hango's API, worker and both, each beside the bare stack's per request."""
    rows = []
    for part, ours, floor in (
        ("API (gunicorn arbiter + worker)", hango.api, bare.api),
        ("worker (Celery main + 2 pool children)", hango.worker, bare.worker),
        ("API + worker", hango.total, bare.total),
    ):
        rows.append(
            Row(
                f"CPU (user + system) per 1-turn run, {part}, during the runs/s figure",
                _ms(ours),
                "",
                f"bare stack {_ms(floor)}",
                f"{ours / floor:.1f}x" if floor > 0 else "—",
                "—",
                None,
            )
        )
    return rows


def _drain(bench: Bench, agent_id: str, count: int) -> None:
    """Submit ``count`` runs from 4 threads, then wait until each one's ``run.finished`` (succeeded) arrived.

    The finishes are read from the Redis subscriber, not by polling the runs table: a poll over hundreds of ids
    every few milliseconds would load the database the figure is measuring.
    """
    with ThreadPoolExecutor(4) as pool:
        run_ids = list(pool.map(lambda _: bench.start(agent_id), range(count)))
    for run_id in run_ids:
        bench.succeeded(run_id)


QUEUE_TENANTS = 100
QUEUE_RUNS_PER_TENANT = 100
QUEUE_AGENT = "queue-bench"


def tenant_queue(bench: Bench, floors: Floors) -> list[Row]:
    """First page of GET /v1/approvals, as the owner and as a member, at 1k pending approvals and at 1M (or 100k)."""
    queue = _queue_tenants(bench)
    small = _page_latencies(bench, queue, 1, 1000)
    large = _page_latencies(bench, queue, 1001, bench.rounds.approvals)
    total = f"{bench.rounds.approvals:,}"
    rows = []
    for who in ("owner", "member"):
        p50, floor = statistics.median(large[who]), statistics.median(small[who])
        rows.append(
            Row(
                f"first page of GET /v1/approvals as {who}, {total} pending",
                _ms(p50),
                _ms(percentile(large[who], 0.9)),
                f"same at 1k rows {_ms(floor)}",
                f"{p50 / floor:.1f}x",
                "≤ 50 ms",
                p50 <= 0.05,
            )
        )
    return rows


@dataclass(frozen=True)
class QueueTenant:
    """The tenant whose queue is read, and its two readers."""

    tenant_id: uuid.UUID
    member_id: uuid.UUID
    owner: Client
    member: Client


def _queue_tenants(bench: Bench) -> QueueTenant:
    """The measured tenant (an owner and a member with tokens) and 99 others, each with one agent and 100 runs.

    One run in ten of the measured tenant is the member's, so the member sees about a tenth of the tenant's queue.
    """
    measured = tenancy.create_tenant(bench.runtime.db, "queue", f"queue-{uuid.uuid4().hex[:6]}@example.com")
    principal = Principal(measured.tenant_id, measured.user_id, "owner")
    member = tenancy.create_member(bench.runtime.db, principal, f"member-{uuid.uuid4().hex[:6]}@example.com", "member")
    tenants = [measured.tenant_id] + [
        tenancy.create_tenant(bench.runtime.db, "other", f"other-{uuid.uuid4().hex[:8]}@example.com").tenant_id
        for _ in range(QUEUE_TENANTS - 1)
    ]
    bench.database.execute(
        text(
            "INSERT INTO agents (id, tenant_id, name, model, created_by) "
            'SELECT gen_random_uuid(), m.tenant_id, :name, \'{"provider": "scripted"}\'::jsonb, m.user_id '
            "FROM memberships m WHERE m.role = 'owner' AND m.tenant_id = ANY(CAST(:tenants AS uuid[]))"
        ),
        {"name": QUEUE_AGENT, "tenants": tenants},
    )
    bench.database.execute(
        text(
            "INSERT INTO runs (id, tenant_id, agent_id, agent_snapshot, created_by, state, awaiting_since, "
            "queue_generation) "
            "SELECT gen_random_uuid(), a.tenant_id, a.id, '{}'::jsonb, "
            "CASE WHEN a.tenant_id = :measured AND r % 10 = 0 THEN :member ELSE a.created_by END, "
            "'awaiting_approval', now(), 1 "
            "FROM agents a CROSS JOIN generate_series(1, :runs) r WHERE a.name = :name"
        ),
        {
            "measured": measured.tenant_id,
            "member": member.membership.user_id,
            "runs": QUEUE_RUNS_PER_TENANT,
            "name": QUEUE_AGENT,
        },
    )
    port = bench.owner.port
    return QueueTenant(
        measured.tenant_id, member.membership.user_id, Client(port, measured.token), Client(port, member.token)
    )


def _page_latencies(bench: Bench, queue: QueueTenant, first: int, last: int) -> dict[str, list[float]]:
    """Add approvals numbered ``first`` to ``last`` in one statement, then time the first page as owner and member.

    Approval ``g`` belongs to run ``g mod 10,000`` of the 100 tenants' runs: every tenant holds 1 % of the table.
    They are spread over the last 14 hours, so none is past the default 24 h time to live.
    """
    started = time.perf_counter()
    bench.database.execute(
        text(
            "WITH numbered AS (SELECT r.id, r.tenant_id, dense_rank() OVER (ORDER BY r.tenant_id) - 1 AS tenant, "
            "row_number() OVER (PARTITION BY r.tenant_id ORDER BY r.id) - 1 AS run "
            "FROM runs r JOIN agents a ON a.id = r.agent_id WHERE a.name = :name) "
            "INSERT INTO pending_approvals (id, tenant_id, run_id, turn, tool_call_id, tool_name, arguments, "
            "arguments_sha256, allowed_decisions, state, created_at) "
            "SELECT gen_random_uuid(), r.tenant_id, r.id, 1, 'call_' || g, 'write_file', "
            "jsonb_build_object('file_path', '/memories/x', 'content', 'remember ' || g), "
            # The arguments' canonical JSON (RFC 8785: keys in order, no spaces), as the server would digest it.
            'encode(sha256(convert_to(\'{"content":"remember \' || g || \'","file_path":"/memories/x"}\', '
            "'UTF8')), 'hex'), "
            "ARRAY['approve', 'edit', 'reject', 'respond'], 'pending', now() - (:last - g) * interval '50 ms' "
            "FROM generate_series(CAST(:first AS int), CAST(:last AS int)) g "
            "JOIN numbered r ON r.tenant = g % :tenants AND r.run = (g / :tenants) % :runs"
        ),
        {"name": QUEUE_AGENT, "first": first, "last": last, "tenants": QUEUE_TENANTS, "runs": QUEUE_RUNS_PER_TENANT},
    )
    bench.database.execute(text("ANALYZE pending_approvals, runs"))
    tenant, members = bench.database.execute(
        text(
            "SELECT count(*), count(*) FILTER (WHERE r.created_by = :member) FROM pending_approvals p "
            "JOIN runs r ON r.id = p.run_id WHERE p.tenant_id = :tenant AND p.state = 'pending'"
        ),
        {"tenant": queue.tenant_id, "member": queue.member_id},
    ).one()
    print(
        f"queue: {last:,} pending approvals in the table ({last - first + 1:,} inserted in "
        f"{time.perf_counter() - started:.1f} s, then ANALYZE), 1 % per tenant of {QUEUE_TENANTS}: the measured "
        f"tenant holds {tenant:,}, its member's runs {members:,}",
        flush=True,
    )
    latencies: dict[str, list[float]] = {}
    for who, client in (("owner", queue.owner), ("member", queue.member)):
        samples = []
        for _ in range(bench.rounds.latency + 3):
            began = time.perf_counter()
            client.get("/v1/approvals")
            samples.append(time.perf_counter() - began)
        latencies[who] = samples[3:]
    return latencies


def worker_killed(bench: Bench, floors: Floors) -> list[Row]:
    """SIGKILL of a worker's process group mid-tool → the run ``running`` under another lease owner.

    Lease, heartbeat and reconciler settings are hango's defaults; a standby worker running beat is up and
    consuming before the kill, so its start-up is not counted.
    """
    settings = Settings(
        database_url=bench.url,
        redis_url=REDIS_URL,
        queue=f"hango-bench-{uuid.uuid4().hex[:8]}",
        tool_modules=("bench.tools",),
    )
    runtime = Runtime.build(settings)
    created = tenancy.create_tenant(runtime.db, "kill", f"kill-{uuid.uuid4().hex[:6]}@example.com")
    principal = Principal(created.tenant_id, created.user_id, "owner")
    try:
        samples = [_kill_once(runtime, principal) for _ in range(bench.rounds.kills)]
    finally:
        forget_queue(runtime.redis, settings.queue)
        runtime.redis.delete(_pong_key(settings))
        runtime.db.engine.dispose()
    lease = settings.run_lease.total_seconds()
    p50 = statistics.median(samples)
    return [
        Row(
            f"kill -9 of a worker → its run running again (lease {lease:g} s, heartbeat "
            f"{settings.run_heartbeat_interval.total_seconds():g} s, reconcile "
            f"{settings.reconcile_interval.total_seconds():g} s: the defaults)",
            f"{p50:.1f} s",
            f"max {max(samples):.1f} s (n={len(samples)})",
            f"lease {lease:g} s",
            f"{p50 / lease:.2f}x",
            "≤ 20 s",
            p50 <= 20,
        )
    ]


def _kill_once(runtime: Runtime, principal: Principal) -> float:
    key = f"hango:bench:nap:{uuid.uuid4().hex}"
    agent_id = _nap_agent(runtime, principal, key)
    settings = runtime.settings
    try:
        with process(["worker", "--concurrency", "1"], settings, own_group=True) as doomed:
            run = service.create_run(runtime, principal, agent_id, [user_message("go")])
            _wait_stamp(runtime, key)
            first_owner = _lease(runtime, run.id)[1]
            with process(["worker", "--concurrency", "1", "--beat"], settings, own_group=True):
                _wait_consuming(runtime)
                os.killpg(doomed.pid, signal.SIGKILL)
                killed = time.monotonic()
                while _lease(runtime, run.id)[1] in (None, first_owner) or _lease(runtime, run.id)[0] != "running":
                    if time.monotonic() - killed > 120:
                        raise TimeoutError("the killed worker's run did not run again within 120 s")
                    time.sleep(0.02)
                elapsed = time.monotonic() - killed
                print(f"kill: the run ran again under a new lease owner {elapsed:.1f} s after SIGKILL", flush=True)
                runtime.redis.set(wake_key(key), "1", ex=600)
                while _lease(runtime, run.id)[0] not in FINISHED:
                    time.sleep(0.05)
    finally:
        runtime.redis.delete(key, wake_key(key))
    return elapsed


def _wait_stamp(runtime: Runtime, key: str) -> None:
    # Short pops: the runtime's Redis client has a socket timeout shorter than a worker's start-up.
    deadline = time.monotonic() + 120
    while runtime.redis.blpop([key], timeout=1) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the nap never started")


def _nap_agent(runtime: Runtime, principal: Principal, key: str) -> uuid.UUID:
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=principal.tenant_id,
        name=f"kill-{uuid.uuid4().hex[:8]}",
        system_prompt="",
        model={
            "provider": "scripted",
            "script": [{"tool_calls": [{"name": "nap", "args": {"key": key, "seconds": 120}}]}],
        },
        tools=["nap"],
        interrupt_on={},
        subagents=[],
        max_turns=5,
        created_by=principal.user_id,
    )
    with runtime.db.transaction() as session:
        session.add(agent)
    return agent.id


def _lease(runtime: Runtime, run_id: uuid.UUID) -> tuple[str, str | None]:
    with runtime.db.transaction() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.state, run.lease_owner


def _pong_key(settings: Settings) -> str:
    """The list that pings of this queue answer on (a late answer is removed with the queue's keys)."""
    return f"hango:bench:pong:{settings.queue}"


def _wait_consuming(runtime: Runtime) -> None:
    """Return once a worker other than the busy one answers a ping on the queue."""
    reply = _pong_key(runtime.settings)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        runtime.queue._celery.send_task(PING_TASK, args=[reply], queue=runtime.settings.queue)
        if runtime.redis.blpop([reply], timeout=2) is not None:
            return
    raise TimeoutError("the standby worker did not start consuming")


def _latency_row(figure: str, samples: list[float], floor: float, floor_name: str, goal: float) -> Row:
    p50 = statistics.median(samples)
    ratio = p50 / floor
    return Row(
        figure,
        _ms(p50),
        _ms(percentile(samples, 0.9)),
        f"{floor_name} {_ms(floor)}",
        f"{ratio:.1f}x",
        f"≤ {goal:g}x {floor_name}",
        ratio <= goal,
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds >= 0.01 else f"{seconds * 1000:.2f} ms"


def _ms_summary(samples: list[float]) -> str:
    return f"p50 {_ms(statistics.median(samples))}, p90 {_ms(percentile(samples, 0.9))}, n={len(samples)}"


FIGURES: dict[str, Callable[[Bench, Floors], list[Row]]] = {
    "pause-resume": pause_and_resume,
    "stack": bare_stack_pause,
    "sse": decided_at_sse_client,
    "history": resume_by_history,
    "throughput": runs_per_second,
    "queue": tenant_queue,
    "kill": worker_killed,
}

if __name__ == "__main__":
    main()
