"""The event logs: a run's, numbered per run, and a tenant's approval stream, numbered per tenant. Both are
persisted, then published to Redis after commit."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import redis
from redis.exceptions import RedisError

from hango.kernel.models import ApprovalEvent, RunEvent

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

    @cached_property
    def frame(self) -> str:
        """The event as SSE sends it, built once however many streams send it."""
        return f"id: {self.seq}\nevent: {self.type}\ndata: {json.dumps(self.data, default=str)}\n\n"

    @cached_property
    def wire(self) -> bytes:
        """:attr:`frame`, encoded."""
        return self.frame.encode()

    @classmethod
    def from_row(cls, row: RunEvent) -> Event:
        """The event of a stored row."""
        return cls(row.run_id, row.seq, row.type, row.data)


@dataclass(frozen=True)
class ApprovalNotice:
    """A persisted event of a tenant's approval stream; ``run_creator`` decides which members may see it."""

    tenant_id: uuid.UUID
    seq: int
    type: str
    run_creator: uuid.UUID
    data: dict[str, Any]

    @cached_property
    def frame(self) -> str:
        """The event as SSE sends it, built once however many streams send it. The id is zero-padded, so that
        ids also increase as strings."""
        return f"id: {self.seq:019d}\nevent: {self.type}\ndata: {json.dumps(self.data, default=str)}\n\n"

    @cached_property
    def wire(self) -> bytes:
        """:attr:`frame`, encoded."""
        return self.frame.encode()

    def payload(self) -> str:
        """The JSON published on the tenant's channel."""
        body = {"seq": self.seq, "type": self.type, "run_creator": str(self.run_creator), "data": self.data}
        return json.dumps(body, default=str)

    @classmethod
    def from_row(cls, row: ApprovalEvent) -> ApprovalNotice:
        """The event of a stored row."""
        return cls(row.tenant_id, row.seq, row.type, row.run_creator, row.data)


def channel(run_id: uuid.UUID) -> str:
    """The Redis pub/sub channel of a run's live events."""
    return f"hango:run:{run_id}:events"


def approvals_channel(tenant_id: uuid.UUID) -> str:
    """The Redis pub/sub channel of a tenant's approval stream."""
    return f"hango:tenant:{tenant_id}:approvals"


class Publisher:
    """Publishes committed events; a failure is logged, never raised: SSE readers also re-read the log."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def publish(self, events: list[Event], notices: Sequence[ApprovalNotice] = ()) -> None:
        """Publish events, then approval notices, in order (one round trip)."""
        if not events and not notices:
            return
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.publish(channel(event.run_id), event.payload())
                for notice in notices:
                    pipe.publish(approvals_channel(notice.tenant_id), notice.payload())
                pipe.execute()
        except RedisError:
            log.warning("could not publish %d events and %d approval events", len(events), len(notices), exc_info=True)
