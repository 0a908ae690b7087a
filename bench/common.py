"""Shared set-up for the benchmarks: a throwaway database, a tenant, a worker on a queue of its own."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url

from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.platform.db import engine_url
from hango.platform.runtime import Runtime
from hango.processes import migrate
from hango.services import tenancy

ROOT = Path(__file__).resolve().parents[1]
ADMIN_URL = os.environ.get("HANGO_BENCH_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("HANGO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


@contextmanager
def scratch_database() -> Iterator[str]:
    """A migrated database that is dropped afterwards."""
    name = f"hango_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(engine_url(ADMIN_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def bench_settings(database_url: str) -> Settings:
    """Settings with a queue of the benchmark's own."""
    return Settings(
        database_url=database_url,
        redis_url=REDIS_URL,
        queue=f"hango-bench-{uuid.uuid4().hex[:8]}",
        run_heartbeat_interval=timedelta(seconds=5),
        sse_keepalive=timedelta(seconds=5),
    )


def environment(settings: Settings) -> dict[str, str]:
    """The environment of a hango process with these settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HANGO_")}
    for name, value in vars(settings).items():
        if value is None or value == ():
            continue
        if isinstance(value, tuple):
            env[f"HANGO_{name.upper()}"] = ",".join(value)
        else:
            env[f"HANGO_{name.upper()}"] = f"{value.total_seconds()}" if isinstance(value, timedelta) else str(value)
    env["HANGO_LOG_LEVEL"] = "WARNING"
    return env


@contextmanager
def process(args: list[str], settings: Settings, *, own_group: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """A ``hango`` process for the duration of the block.

    With ``own_group`` it leads a process group of its own, so that ``os.killpg`` reaches its pool children too
    (a benchmark that kills a worker with SIGKILL needs that); it is stopped the same way afterwards.
    """
    with python_process(["-m", "hango", *args], environment(settings), own_group=own_group) as child:
        yield child


@contextmanager
def python_process(
    args: list[str], env: dict[str, str], *, own_group: bool = False
) -> Iterator[subprocess.Popen[bytes]]:
    """``python <args>`` with this environment, in the repository, for the duration of the block."""
    child = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=own_group,
    )
    try:
        yield child
    finally:
        stop(child, own_group=own_group)


def stop(child: subprocess.Popen[bytes], *, own_group: bool = False, grace: float = 30) -> None:
    """SIGTERM, then SIGKILL if the process is still there after ``grace`` seconds (a worker busy in a long tool)."""
    if child.poll() is not None:
        return
    _signal(child, signal.SIGTERM, own_group)
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal(child, signal.SIGKILL, own_group)
        child.wait(timeout=30)


def _signal(child: subprocess.Popen[bytes], number: signal.Signals, own_group: bool) -> None:
    try:
        if own_group:
            os.killpg(child.pid, number)
        else:
            child.send_signal(number)
    except ProcessLookupError:
        pass


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` and all its descendants, read from ``/proc``.

    Each process of the tree counts its own ``utime + stime`` and its ``cutime + cstime``, the time of the children
    it has waited for: a pool child that exited and was reaped still counts, in its parent's figure. A process gone
    from the tree before the second of two readings is missed only if no one reaped it. Resolution: one clock tick
    (10 ms) per process.
    """
    stats = _process_stats()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    ticks, pending = 0, [pid]
    while pending:
        current = pending.pop()
        ticks += stats.get(current, (0, 0))[1]
        pending.extend(children.get(current, []))
    return ticks / CLOCK_TICKS


def _process_stats() -> dict[int, tuple[int, int]]:
    """Every process's parent id and CPU ticks (its own and its reaped children's, user and system)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:  # gone since the listing
            continue
        # The command name, in parentheses, may hold spaces; the fields after it start at ``state`` (field 3).
        fields = raw[raw.rindex(")") + 2 :].split()
        stats[int(entry.name)] = (int(fields[1]), sum(int(value) for value in fields[11:15]))
    return stats


def forget_queue(client: redis.Redis, queue: str) -> None:
    """Delete what a benchmark's own Celery queue left in Redis: the queue, its bindings, unacknowledged messages.

    A worker killed with SIGKILL leaves its message in kombu's shared ``unacked`` hash; only entries that name
    this queue are removed, so other users of the same Redis keep theirs.
    """
    names = [queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}"]
    names += [f"{queue}\x06\x16{priority}" for priority in range(10)]
    client.delete(*names)
    for tag, payload in client.hscan_iter("unacked"):
        if queue.encode() in payload:
            client.hdel("unacked", tag)
            client.zrem("unacked_index", tag)


def forget_runs(client: redis.Redis, runs: list[tuple[uuid.UUID, int]]) -> None:
    """Delete the enqueue deduplication keys of these ``(run id, queue generation)`` pairs, every generation."""
    keys = [f"hango:enqueued:{run_id}:{generation}" for run_id, last in runs for generation in range(1, last + 1)]
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])


def free_port() -> int:
    """A TCP port free on the loopback interface."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def owner(runtime: Runtime) -> Principal:
    """A fresh tenant's owner."""
    created = tenancy.create_tenant(runtime.db, "bench", f"bench-{uuid.uuid4().hex[:6]}@example.com")
    return Principal(created.tenant_id, created.user_id, "owner")


def timed(repeat: int, action: Callable[[], Any]) -> list[float]:
    """Wall-clock seconds of each of ``repeat`` runs of ``action``."""
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def percentile(samples: list[float], fraction: float) -> float:
    """The sample below which ``fraction`` of the samples lie (nearest rank); the median for 0.5."""
    if fraction == 0.5:
        return statistics.median(samples)
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * fraction + 0.5) - 1)]


def summary(samples: list[float]) -> str:
    """Median and spread of samples, in milliseconds."""
    median, p90 = percentile(samples, 0.5) * 1000, percentile(samples, 0.9) * 1000
    return f"median {median:8.2f} ms   p90 {p90:8.2f} ms   n={len(samples)}"


@contextmanager
def connected(url: str) -> Iterator[Connection]:
    """An autocommit connection to the database at ``url`` (for a benchmark whose hango system is not running)."""
    engine = create_engine(engine_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as database:
            yield database
    finally:
        engine.dispose()
