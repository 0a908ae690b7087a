"""What a pause and a resume cost, step by step: SQL statements, commits, Redis round trips and this process's CPU time.

Run: ``.venv/bin/python -m bench.step_costs [--rounds 50]`` (PostgreSQL and Redis on 127.0.0.1).

Every step runs in this one process, so that every statement and every request to Redis is counted wherever it comes
from: the API's steps go through the Flask app (``create_app``, its test client: routing, authentication, schemas,
audit) and the worker's through :func:`hango.run.worker.execute_run`, as a Celery task calls it. What this leaves out
is the servers around them (gunicorn, Celery's own bookkeeping) and the network between processes; the latencies of
the real processes are ``bench/figures.py``'s. The agent is scripted: its first turn writes ``/memories/x``, which
the default rule sends to a human, and its second answers.

1. **create**: ``POST /v1/runs`` (the run stored queued with its input, audited, enqueued);
2. **pause**: the worker's claim, model call and suspension (``awaiting_approval``, the approval row, its events);
3. **decide**: ``POST /v1/runs/{id}/approvals`` (the decision stored, audited, the run queued again);
4. **resume**: the worker's claim, the approved call, the last model call and the end (``succeeded``).

Beside them, the floor the issue measures against does the same kinds of work with nothing of hango: a Flask-free
transaction of one ``INSERT`` and a commit, and two ``UPDATE`` commits, each with one Redis ``PUBLISH``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

from bench.common import bench_settings, scratch_database
from hango.api import create_app
from hango.platform.db import engine_url
from hango.platform.runtime import Runtime
from hango.run.worker import execute_run
from hango.services import tenancy

WRITE_MEMORY = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/x", "content": "remember this"}}
STEPS = ("create", "pause", "decide", "resume")
# Where a step's time goes, by the file (or the C function) cProfile charges it to: the first that matches.
LAYERS = (
    ("hango's edge (api/)", ("/api/",)),
    ("hango's run and agent", ("/hango/run/", "/hango/agent/")),
    ("hango's services, store, platform, kernel", ("/hango/",)),
    ("psycopg2 (waiting on PostgreSQL)", ("psycopg2",)),
    ("SQLAlchemy", ("/sqlalchemy/",)),
    ("Flask, Werkzeug, marshmallow, smorest", ("/flask", "/werkzeug/", "/marshmallow/", "/webargs/", "/apispec/")),
    ("Redis, kombu, Celery, sockets", ("/redis/", "/kombu/", "/celery/", "_socket", "select")),
    ("OpenTelemetry", ("/opentelemetry/",)),
)
OTHER = "the rest (the standard library, json, uuid, …)"


@dataclass
class Tally:
    """What one step did."""

    statements: int = 0
    commits: int = 0
    redis: int = 0
    cpu: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)
    # The last round's statements in order, each commit marked: what --sequence prints.
    order: list[str] = field(default_factory=list)


class Counter:
    """Counts SQL statements and commits of every engine of this process, and Redis round trips of every client."""

    def __init__(self) -> None:
        self.current: Tally | None = None
        event.listen(Engine, "before_cursor_execute", self._statement)
        event.listen(Engine, "commit", self._commit)
        original = redis.connection.AbstractConnection.send_packed_command
        counter = self

        def counted(connection: Any, command: Any, check_health: bool = True) -> None:
            if counter.current is not None:
                counter.current.redis += 1
            original(connection, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]

    def _statement(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.current is not None:
            self.current.statements += 1
            kind = f"{' '.join(statement.split()[:1])} {_table(statement)}"
            self.current.kinds[kind] = self.current.kinds.get(kind, 0) + 1
            self.current.order.append(kind)

    def _commit(self, conn: Any) -> None:
        if self.current is not None:
            self.current.commits += 1
            self.current.order.append("COMMIT")

    @contextmanager
    def step(self, tally: Tally) -> Iterator[None]:
        self.current = tally
        started = time.process_time()
        try:
            yield
        finally:
            tally.cpu += time.process_time() - started
            self.current = None


def _table(statement: str) -> str:
    """The table a statement is about: the first after FROM for a read, INTO for an insert, UPDATE for an update."""
    flat = statement.replace("\n", " ")
    while (inner := re.sub(r"\([^()]*\)", "", flat)) != flat:  # subqueries out: the statement's own table
        flat = inner
    words = flat.split()
    keyword = {"SELECT": "FROM", "INSERT": "INTO", "UPDATE": "UPDATE"}.get(words[0] if words else "", "")
    if keyword in words and words.index(keyword) + 1 < len(words):
        return words[words.index(keyword) + 1]
    return ""


def floor(settings: Any, counter: Counter, rounds: int) -> Tally:
    """The stack's floor: one transaction inserting a row, two updating it, each commit followed by a publish."""
    engine = create_engine(engine_url(settings.database_url))
    client = redis.Redis.from_url(settings.redis_url)
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS bench_floor (id uuid PRIMARY KEY, state text)"))
    tally = Tally()
    for _ in range(rounds):
        row = uuid.uuid4()
        with counter.step(tally):
            for sql in (
                "INSERT INTO bench_floor VALUES (:id, 'queued')",
                "UPDATE bench_floor SET state = 'a' WHERE id = :id",
                "UPDATE bench_floor SET state = 'b' WHERE id = :id",
            ):
                with engine.begin() as connection:
                    connection.execute(text(sql), {"id": row})
                client.publish("bench:floor", b"x")
    engine.dispose()
    return tally


def _layers(client: Any, runtime: Runtime, agent_id: str, headers: dict[str, str], rounds: int) -> dict[str, Any]:
    """Each step's time under cProfile, summed by layer."""
    profiles = {name: cProfile.Profile() for name in STEPS}
    decision = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
    for _ in range(rounds):
        with _profiled(profiles["create"]):
            run_id = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers).json["id"]
        with _profiled(profiles["pause"]):
            execute_run(runtime, uuid.UUID(run_id))
        with _profiled(profiles["decide"]):
            client.post(f"/v1/runs/{run_id}/approvals", json=decision, headers=headers)
        with _profiled(profiles["resume"]):
            execute_run(runtime, uuid.UUID(run_id))
    return {name: _by_layer(profile) for name, profile in profiles.items()}


@contextmanager
def _profiled(profile: cProfile.Profile) -> Iterator[None]:
    profile.enable()
    try:
        yield
    finally:
        profile.disable()


def _by_layer(profile: cProfile.Profile) -> dict[str, float]:
    totals: dict[str, float] = {}
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, own, _, _) in stats.items():
        where = f"{filename} {function}"
        layer = next((name for name, marks in LAYERS if any(mark in where for mark in marks)), OTHER)
        totals[layer] = totals.get(layer, 0.0) + own
    return totals


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--layers", action="store_true", help="also where each step's time goes, under cProfile")
    parser.add_argument("--sequence", action="store_true", help="also each step's statements in order, commits marked")
    args = parser.parse_args()
    counter = Counter()
    with scratch_database() as url:
        settings = bench_settings(url)
        runtime = Runtime.build(settings)
        created = tenancy.create_tenant(runtime.db, "steps", f"steps-{uuid.uuid4().hex[:6]}@example.com")
        headers = {"Authorization": f"Bearer {created.token}"}
        client = create_app(settings).test_client()
        body = {
            "name": "steps",
            "model": {"provider": "scripted", "script": [{"tool_calls": [WRITE_MEMORY]}, {"text": "done"}]},
            "tools": ["write_file"],
        }
        agent_id = client.post("/v1/agents", json=body, headers=headers).json["id"]
        tallies = {name: Tally() for name in STEPS}
        for round_number in range(args.rounds + 1):
            measured = round_number > 0  # the first round warms caches up
            steps = tallies if measured else {name: Tally() for name in STEPS}
            for tally in steps.values():
                tally.order.clear()
            with counter.step(steps["create"]):
                run_id = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers).json["id"]
            with counter.step(steps["pause"]):
                assert execute_run(runtime, uuid.UUID(run_id)) == "suspended"
            decision = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
            with counter.step(steps["decide"]):
                answer = client.post(f"/v1/runs/{run_id}/approvals", json=decision, headers=headers)
            assert answer.status_code == 200, answer.json
            with counter.step(steps["resume"]):
                assert execute_run(runtime, uuid.UUID(run_id)) == "finished"
        base = floor(settings, counter, args.rounds)
        layers = _layers(client, runtime, agent_id, headers, args.rounds) if args.layers else {}
        runtime.db.dispose()
    n = args.rounds
    print(f"per step, mean of {n} rounds (one process: the API through its Flask app, the worker's execute_run)")
    print("| step | statements | commits | Redis round trips | CPU ms |")
    print("|---|---|---|---|---|")
    rows = [*((name, tallies[name]) for name in STEPS), ("floor (1 insert + 2 updates, 3 commits, 3 publishes)", base)]
    for name, tally in rows:
        figures = (tally.statements / n, tally.commits / n, tally.redis / n, tally.cpu / n * 1000)
        print(f"| {name} | " + " | ".join(f"{figure:.1f}" for figure in figures) + " |")
    if layers:
        print("where each step's time goes under cProfile (wall time, inflated by the profiler: read the shares)")
        print("| layer | " + " | ".join(STEPS) + " |")
        print("|---|" + "---|" * len(STEPS))
        for layer in [name for name, _ in LAYERS] + [OTHER]:
            shares = (layers[step].get(layer, 0.0) / sum(layers[step].values()) * 100 for step in STEPS)
            print(f"| {layer} | " + " | ".join(f"{share:.0f} %" for share in shares) + " |")
    for name in STEPS:
        kinds = ", ".join(f"{kind} x{count / n:g}" for kind, count in sorted(tallies[name].kinds.items()))
        print(f"{name}: {kinds}")
    if args.sequence:
        for name in STEPS:
            print(f"{name}, in order: " + " → ".join(tallies[name].order))


if __name__ == "__main__":
    main()
