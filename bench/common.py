"""Shared set-up for the benchmarks: a throwaway database, a tenant, a worker on a queue of its own."""

from __future__ import annotations

import os
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

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hango import migrate, tenancy
from hango.auth import Principal
from hango.config import Settings
from hango.db import engine_url
from hango.run.runtime import Runtime

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
def process(args: list[str], settings: Settings) -> Iterator[subprocess.Popen[bytes]]:
    """A ``hango`` process for the duration of the block."""
    child = subprocess.Popen(
        [sys.executable, "-m", "hango", *args],
        env=environment(settings),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield child
    finally:
        child.terminate()
        child.wait(timeout=30)


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


def summary(samples: list[float]) -> str:
    """Median and spread of samples, in milliseconds."""
    ordered = sorted(samples)
    p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
    return f"median {statistics.median(ordered) * 1000:8.2f} ms   p90 {p90 * 1000:8.2f} ms   n={len(ordered)}"
