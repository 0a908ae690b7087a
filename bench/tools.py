"""A tool for the benchmarks: ``stamp`` pushes the wall-clock time of its execution to a Redis list."""

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
