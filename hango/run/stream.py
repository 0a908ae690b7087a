"""Following a run's events: replay the stored log, then stream live events as they are published.

The database is the log; Redis only wakes readers early. A reader subscribes before it reads the log, takes a
published event directly only when it is exactly the next one, and otherwise re-reads the log, so a lost or
reordered publish costs latency, never an event.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

from hango.auth import Principal
from hango.models import TERMINAL_RUN_STATES
from hango.run.events import Event, channel
from hango.run.runtime import Runtime
from hango.run.service import events_after

FINISHED = "run.finished"


def follow_events(runtime: Runtime, principal: Principal, run_id: uuid.UUID, after: int) -> Iterator[Event | None]:
    """Yield the run's events after ``after`` until ``run.finished``; ``None`` marks an idle keep-alive tick."""
    pubsub = runtime.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(channel(run_id))
    timeout = runtime.settings.sse_keepalive.total_seconds()
    last = after
    try:
        while True:
            events, state = events_after(runtime, principal, run_id, last)
            for event in events:
                yield event
                last = event.seq
                if event.type == FINISHED:
                    return
            if not events and state in TERMINAL_RUN_STATES:
                return
            for live in _live(pubsub, run_id, last, timeout):
                if live is None:
                    yield None
                    break
                yield live
                last = live.seq
                if live.type == FINISHED:
                    return
    finally:
        pubsub.close()


def _live(pubsub: object, run_id: uuid.UUID, last: int, timeout: float) -> Iterator[Event | None]:
    """Published events that directly follow ``last``; stops (to re-read the log) on a gap or after a quiet spell."""
    while True:
        message = pubsub.get_message(timeout=timeout)  # type: ignore[attr-defined]
        if message is None:
            yield None
            return
        payload = json.loads(message["data"])
        if payload["seq"] <= last:
            continue
        if payload["seq"] != last + 1:
            return
        last = payload["seq"]
        yield Event(run_id, last, payload["type"], payload["data"])
