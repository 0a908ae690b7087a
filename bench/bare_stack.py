"""The design card's stack with none of hango in it: the floor under hango's pause figure.

A pause is, at the least, an HTTP request that commits a row and enqueues a task, a Celery delivery, and a worker
that commits twice (the claim, then the suspension) before anyone can see the run waiting. This module is that
and nothing more: a Flask app served by gunicorn's threaded worker (``POST /runs/<id>`` inserts a row, commits,
sends a Celery task) and a Celery task on Redis (two ``UPDATE``s, each committed, then a Redis publish), with
SQLAlchemy Core statements built once on a pooled engine. No authentication, validation, events, audit rows,
approvals, tracing or loop. ``bench/figures.py`` times it beside hango's pause, and measures the CPU its
processes spend per request beside what hango's spend per 1-turn run.

Configured by ``HANGO_BENCH_BARE_DATABASE_URL``, ``HANGO_BENCH_BARE_REDIS_URL`` and ``HANGO_BENCH_BARE_QUEUE``;
``bench/figures.py`` creates its one table, ``bare_runs (id uuid primary key, state text)``.
"""

from __future__ import annotations

import os
import uuid

import redis
from celery import Celery
from flask import Flask
from sqlalchemy import create_engine, text

from hango.platform.db import engine_url

DATABASE_URL = os.environ.get("HANGO_BENCH_BARE_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("HANGO_BENCH_BARE_REDIS_URL", "redis://127.0.0.1:6379/0")
QUEUE = os.environ.get("HANGO_BENCH_BARE_QUEUE", "hango-bench-bare")
TASK = "bench.bare.run"
CHANNEL = f"hango:bench:bare:{QUEUE}"

engine = create_engine(engine_url(DATABASE_URL), pool_size=5)
_INSERT = text("INSERT INTO bare_runs (id, state) VALUES (:id, 'queued')")
_MOVE = text("UPDATE bare_runs SET state = :to WHERE id = :id AND state = :source")

celery_app = Celery("bare", broker=REDIS_URL, set_as_current=False)
celery_app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    worker_send_task_events=True,
    worker_hijack_root_logger=False,
)
flask_app = Flask("bare")
_publisher = redis.Redis.from_url(REDIS_URL)


@flask_app.get("/healthz")
def healthz() -> tuple[str, int]:
    """Up."""
    return "", 204


@flask_app.post("/runs/<uuid:run_id>")
def create(run_id: uuid.UUID) -> tuple[str, int]:
    """Commit the row, then enqueue."""
    with engine.begin() as connection:
        connection.execute(_INSERT, {"id": run_id})
    celery_app.send_task(TASK, args=[str(run_id)], queue=QUEUE)
    return "", 202


@celery_app.task(name=TASK)  # type: ignore[untyped-decorator]
def run(run_id: str) -> None:
    """Claim (one commit), suspend (another), then tell the waiting client."""
    for source, to in (("queued", "running"), ("running", "awaiting")):
        with engine.begin() as connection:
            connection.execute(_MOVE, {"id": run_id, "source": source, "to": to})
    _publisher.publish(CHANNEL, run_id)
