"""Tools for the benchmarks: ``stamp`` pushes the wall-clock time of its execution to a Redis list; ``nap`` stamps,
then sleeps (a call long enough to kill its worker in the middle of it)."""

from __future__ import annotations

import os
import time
from typing import Any

import redis

from hango.agent.tools.base import Tool, ToolContext

REDIS_URL = os.environ.get("HANGO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def _stamp(context: ToolContext, args: dict[str, Any]) -> str:
    redis.Redis.from_url(REDIS_URL).lpush(args["key"], repr(time.time()))
    return "stamped"


TOOLS = [
    Tool(
        "stamp",
        "Record when it ran.",
        {
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
            "additionalProperties": False,
        },
        _stamp,
    )
]


def wake_key(key: str) -> str:
    """The Redis key that ends a ``nap`` early."""
    return f"{key}:wake"


def _nap(context: ToolContext, args: dict[str, Any]) -> str:
    # Stamps first, so the benchmark knows the call is running, then holds the worker (to be killed mid-call) until
    # the time is up or the benchmark wakes it, so that a worker still running it can stop without waiting.
    client = redis.Redis.from_url(REDIS_URL)
    client.lpush(args["key"], repr(time.time()))
    deadline = time.monotonic() + float(args["seconds"])
    while time.monotonic() < deadline and not client.exists(wake_key(args["key"])):
        time.sleep(0.1)
    return "rested"


TOOLS.append(
    Tool(
        "nap",
        "Record when it started, then sleep.",
        {
            "type": "object",
            "properties": {"key": {"type": "string"}, "seconds": {"type": "number"}},
            "required": ["key", "seconds"],
            "additionalProperties": False,
        },
        _nap,
    )
)
