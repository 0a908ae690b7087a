"""Tools for tests, loaded by workers through ``HANGO_TOOL_MODULES=tests.support.tools``.

``count`` records every execution in Redis so a test can prove a call ran exactly once (or never);
``slow_count`` and ``idempotent_slow_count`` (which declares itself safe to run again) also record the
``idempotency_key`` each execution was given, and sleep on their first execution only; ``sleep``
holds a batch open long enough to kill or cancel a worker in the middle of it; ``explode`` is a buggy tool;
``nul_result`` answers what the database refuses to store; ``spin`` burns CPU in pure Python and swallows every
``Exception``, and ``scribble`` writes a file and then sleeps, so that a test can see the per-call timeout stop them
and undo what they did; ``lock_run`` takes its own run's row lock in the batch's transaction, says so in Redis and
sleeps, so that a test can freeze a worker that holds the lock.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import redis
from sqlalchemy import text

from hango.agent.deadline import shielded
from hango.agent.tools.base import Tool, ToolContext
from hango.store.files import SqlFileSystem

REDIS_URL = os.environ.get("HANGO_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def counter_key(key: str) -> str:
    """The Redis key counting executions of ``count`` with this ``key`` argument."""
    return f"hango:test:count:{key}"


def executions(key: str) -> int:
    """How many times ``count`` ran with this key."""
    value = redis.Redis.from_url(REDIS_URL).get(counter_key(key))
    return int(value or 0)


def _incr(key: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    total = int(client.incr(counter_key(key)))
    client.expire(counter_key(key), 3600)  # test counters must not pile up in a shared Redis
    return total


def _count(context: ToolContext, args: dict[str, Any]) -> str:
    return f"counted {args['key']} ({_incr(args['key'])})"


def _sleep(context: ToolContext, args: dict[str, Any]) -> str:
    time.sleep(float(args["seconds"]))
    return f"slept {args['seconds']}s"


def keys_seen(key: str) -> list[str]:
    """The ``idempotency_key`` of every execution of ``slow_count``/``idempotent_slow_count`` with this key."""
    seen = redis.Redis.from_url(REDIS_URL).lrange(f"hango:test:keys:{key}", 0, -1)
    return [value.decode() for value in seen]


def _slow_count(context: ToolContext, args: dict[str, Any]) -> str:
    # Only the first execution sleeps, so a test can kill a worker in the middle of it and see a retry finish.
    client = redis.Redis.from_url(REDIS_URL)
    client.rpush(f"hango:test:keys:{args['key']}", context.idempotency_key or "")
    client.expire(f"hango:test:keys:{args['key']}", 3600)
    total = _incr(args["key"])
    if total == 1:
        time.sleep(float(args["seconds"]))
    return f"counted {args['key']} ({total})"


def _explode(context: ToolContext, args: dict[str, Any]) -> str:
    raise RuntimeError("the tool has a bug")


def _spin(context: ToolContext, args: dict[str, Any]) -> str:
    # A careless tool: CPU-bound pure Python that swallows every Exception, so only the deadline can stop it.
    end = time.monotonic() + float(args["seconds"])
    turns = 0
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            turns += 1
    return f"spun {turns} times"


def _scribble(context: ToolContext, args: dict[str, Any]) -> str:
    # Half a change: the file is written, then the call runs past its deadline, which must undo the write.
    context.files.write(args["file_path"], "half-done\n")
    time.sleep(float(args["seconds"]))
    return f"wrote {args['file_path']}"


def lock_marker(run_id: object) -> str:
    """The Redis key ``lock_run`` sets once it holds the row lock of the run ``run_id``."""
    return f"hango:test:locked:{run_id}"


def holds_lock(run_id: object) -> bool:
    """Whether ``lock_run`` has taken the row lock of the run ``run_id``."""
    return bool(redis.Redis.from_url(REDIS_URL).exists(lock_marker(run_id)))


def _lock_run(context: ToolContext, args: dict[str, Any]) -> str:
    # The batch's transaction is the session of the run's filesystem view: the lock is held until the batch ends.
    files = context.files
    assert isinstance(files, SqlFileSystem), "lock_run needs the worker's SQL filesystem"
    with shielded():
        files._session.execute(text("SELECT 1 FROM runs WHERE id = :run_id FOR UPDATE"), {"run_id": context.run_id})
    redis.Redis.from_url(REDIS_URL).set(lock_marker(context.run_id), "1", ex=3600)
    time.sleep(float(args["seconds"]))
    return f"held the row of run {context.run_id} for {args['seconds']}s"


def _nul_result(context: ToolContext, args: dict[str, Any]) -> str:
    # PostgreSQL's jsonb refuses \u0000, so storing this result fails in SQL, outside the tool's own savepoint.
    return f"secret-{args.get('marker', '')}\x00"


TOOLS = [
    Tool(
        "count",
        "Count an execution under a key.",
        {
            "type": "object",
            "properties": {"key": {"type": "string", "minLength": 1}},
            "required": ["key"],
            "additionalProperties": False,
        },
        _count,
    ),
    Tool(
        "sleep",
        "Sleep for a number of seconds.",
        {
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 60}},
            "required": ["seconds"],
            "additionalProperties": False,
        },
        _sleep,
    ),
    Tool(
        "slow_count",
        "Count an execution; the first one also sleeps.",
        {
            "type": "object",
            "properties": {"key": {"type": "string"}, "seconds": {"type": "number", "minimum": 0, "maximum": 60}},
            "required": ["key", "seconds"],
            "additionalProperties": False,
        },
        _slow_count,
    ),
    Tool(
        "idempotent_slow_count",
        "Count an execution; the first one also sleeps. Safe to run again.",
        {
            "type": "object",
            "properties": {"key": {"type": "string"}, "seconds": {"type": "number", "minimum": 0, "maximum": 60}},
            "required": ["key", "seconds"],
            "additionalProperties": False,
        },
        _slow_count,
        idempotent=True,
    ),
    Tool("explode", "Always fails.", {"type": "object", "additionalProperties": False}, _explode),
    Tool(
        "nul_result",
        "Answers with a NUL character, which the database cannot store.",
        {"type": "object", "properties": {"marker": {"type": "string"}}, "additionalProperties": False},
        _nul_result,
    ),
    Tool(
        "spin",
        "Burn CPU for a number of seconds.",
        {
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 600}},
            "required": ["seconds"],
            "additionalProperties": False,
        },
        _spin,
    ),
    Tool(
        "scribble",
        "Write a file, then sleep for a number of seconds.",
        {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "seconds": {"type": "number", "minimum": 0, "maximum": 600},
            },
            "required": ["file_path", "seconds"],
            "additionalProperties": False,
        },
        _scribble,
    ),
    Tool(
        "lock_run",
        "Lock this run's row in the batch's transaction, then sleep for a number of seconds.",
        {
            "type": "object",
            "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 60}},
            "required": ["seconds"],
            "additionalProperties": False,
        },
        _lock_run,
    ),
]
