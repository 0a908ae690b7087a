"""What every runtime service needs, built once per process by an edge, and the unit of work they share."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from sqlalchemy.orm import Session

from hango.agent.tools.base import ToolRegistry
from hango.agent.tools.filesystem import builtin_registry
from hango.agent.tools.task import TASK_TOOL
from hango.config import Settings
from hango.db import Database
from hango.models import Run
from hango.queue import RunQueue, make_celery
from hango.run.events import Event, Publisher, append_event

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    """The process's database, Redis, run queue, event publisher and tool registry."""

    settings: Settings
    db: Database
    redis: redis.Redis
    queue: RunQueue
    publisher: Publisher
    tools: ToolRegistry

    @classmethod
    def build(cls, settings: Settings, *, db: Database | None = None) -> Runtime:
        """Wire a runtime from settings; nothing connects until first use."""
        client = redis.Redis.from_url(settings.require_redis_url(), socket_timeout=5, socket_connect_timeout=5)
        tools = builtin_registry()
        tools.add(TASK_TOOL)
        tools.load_entry_points()
        tools.load_modules(settings.tool_modules)
        return cls(
            settings=settings,
            db=db or Database(settings.require_database_url(), pool_size=settings.db_pool_size),
            redis=client,
            queue=RunQueue(settings, client, make_celery(settings)),
            publisher=Publisher(client),
            tools=tools,
        )


@dataclass
class Work:
    """One transaction plus what must happen only after it commits: publishing events and enqueueing runs."""

    session: Session
    events: list[Event] = field(default_factory=list)
    enqueues: list[tuple[uuid.UUID, int]] = field(default_factory=list)

    def emit(self, run: Run, type_: str, data: dict[str, Any] | None = None) -> Event:
        """Append an event to the run's log; it is published after commit."""
        event = append_event(self.session, run, type_, data or {})
        self.events.append(event)
        return event

    def discard_after_commit(self) -> None:
        """Forget the events and enqueues gathered so far (their writes were rolled back to a savepoint)."""
        self.events.clear()
        self.enqueues.clear()

    def enqueue_after_commit(self, run: Run) -> None:
        """Enqueue the run's current queued generation once the transaction has committed."""
        self.enqueues.append((run.id, run.queue_generation))


@contextmanager
def unit_of_work(runtime: Runtime) -> Iterator[Work]:
    """A transaction whose events are published, and whose runs are enqueued, only after it commits."""
    with runtime.db.transaction() as session:
        work = Work(session)
        yield work
    runtime.publisher.publish(work.events)
    for run_id, generation in work.enqueues:
        try:
            runtime.queue.enqueue(run_id, generation)
        except Exception:  # the broker is disposable: the reconciler re-enqueues runs left queued
            log.warning(
                "could not enqueue run %s; the reconciler will", run_id, extra={"run_id": str(run_id)}, exc_info=True
            )
