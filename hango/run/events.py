"""The run event log: persisted with a per-run sequence, then published to Redis after commit."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import RedisError

from hango.models import RunEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """A persisted event, as SSE sends it."""

    run_id: uuid.UUID
    seq: int
    type: str
    data: dict[str, Any]

    def payload(self) -> str:
        """The JSON published on the run's channel."""
        return json.dumps({"seq": self.seq, "type": self.type, "data": self.data}, default=str)

    @classmethod
    def from_row(cls, row: RunEvent) -> Event:
        """The event of a stored row."""
        return cls(row.run_id, row.seq, row.type, row.data)


def channel(run_id: uuid.UUID) -> str:
    """The Redis pub/sub channel of a run's live events."""
    return f"hango:run:{run_id}:events"


class Publisher:
    """Publishes committed events; a failure is logged, never raised: SSE readers also re-read the log."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def publish(self, events: list[Event]) -> None:
        """Publish events in order."""
        if not events:
            return
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.publish(channel(event.run_id), event.payload())
                pipe.execute()
        except RedisError:
            log.warning("could not publish %d run events", len(events), exc_info=True)
