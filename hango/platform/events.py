"""The event logs: a run's, numbered per run, and a tenant's approval stream, numbered per tenant. Both are
persisted, then published to Redis after commit. A thread's stream is its runs' logs one after the other; a thread
whose runs change is told so on a channel of its own, so that a stream waiting for the thread's next run wakes."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import redis
from redis.exceptions import RedisError

from hango.kernel.models import ApprovalEvent

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


# A thread event's id is its run's place in the thread, then the event's number in the run: ``runs.event_seq``
# stays far below 2**32, so ids increase across the thread's runs.
THREAD_POSITION_SHIFT = 32


@dataclass(frozen=True)
class ThreadEvent:
    """An event of a thread's run as the thread's stream sends it: numbered across the thread's runs, the run
    named in its data."""

    position: int  # the run's place in the thread (runs.thread_position)
    event: Event

    @property
    def seq(self) -> int:
        """The event's number in its run."""
        return self.event.seq

    @property
    def type(self) -> str:
        """The event's type."""
        return self.event.type

    @property
    def id(self) -> int:
        """The event's id in the thread's stream: it increases across the thread's runs."""
        return thread_event_id(self.position, self.event.seq)

    @cached_property
    def frame(self) -> str:
        """The event as the thread's stream sends it, built once however many streams send it."""
        data = json.dumps({**self.event.data, "run_id": str(self.event.run_id)}, default=str)
        return f"id: {self.id}\nevent: {self.event.type}\ndata: {data}\n\n"

    @cached_property
    def wire(self) -> bytes:
        """:attr:`frame`, encoded."""
        return self.frame.encode()


def thread_event_id(position: int, seq: int) -> int:
    """The id of the event numbered ``seq`` of the thread's run at ``position``."""
    return (position << THREAD_POSITION_SHIFT) + seq


def thread_event_place(event_id: int) -> tuple[int, int]:
    """The run's place in the thread and the event's number in that run, of a thread event's id."""
    return event_id >> THREAD_POSITION_SHIFT, event_id & ((1 << THREAD_POSITION_SHIFT) - 1)


def channel(run_id: uuid.UUID) -> str:
    """The Redis pub/sub channel of a run's live events."""
    return f"hango:run:{run_id}:events"


def approvals_channel(tenant_id: uuid.UUID) -> str:
    """The Redis pub/sub channel of a tenant's approval stream."""
    return f"hango:tenant:{tenant_id}:approvals"


def thread_channel(thread_id: uuid.UUID) -> str:
    """The Redis pub/sub channel that wakes a thread's streams when its runs change (a run created, the thread
    deleted). What is published there says nothing more: a woken stream reads the database."""
    return f"hango:thread:{thread_id}:runs"


WAKE_UP = "{}"  # what a thread's channel carries


class Publisher:
    """Publishes committed events; a failure is logged, never raised: SSE readers also re-read the log."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client

    def publish(
        self, events: list[Event], notices: Sequence[ApprovalNotice] = (), threads: Collection[uuid.UUID] = ()
    ) -> None:
        """Publish events, then approval notices, in order, then wake the streams of ``threads`` (one round trip)."""
        if not events and not notices and not threads:
            return
        try:
            with self._client.pipeline(transaction=False) as pipe:
                for event in events:
                    pipe.publish(channel(event.run_id), event.payload())
                for notice in notices:
                    pipe.publish(approvals_channel(notice.tenant_id), notice.payload())
                for thread_id in threads:
                    pipe.publish(thread_channel(thread_id), WAKE_UP)
                pipe.execute()
        except RedisError:
            log.warning(
                "could not publish %d events, %d approval events and %d thread wake-ups",
                len(events),
                len(notices),
                len(threads),
                exc_info=True,
            )
