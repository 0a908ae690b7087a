"""``HANGO_TASK_SENT_EVENTS``: an enqueue sends Celery's task-sent event (what Flower lists queued tasks from) only
when asked, read by a real event receiver on the real broker."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
import redis

from hango.kernel.config import Settings
from hango.platform.queue import RunQueue, make_celery
from tests.conftest import REDIS_URL


def _sent_events(settings: Settings) -> list[str]:
    """The task-sent events of one run's task, enqueued with these settings (others on the broker are ignored)."""
    celery = make_celery(settings)
    client = redis.Redis.from_url(REDIS_URL)
    seen: list[str] = []
    run_id = uuid.uuid4()
    with celery.connection_for_read() as connection:
        receiver = celery.events.Receiver(connection, handlers={"task-sent": lambda event: seen.append(event["uuid"])})
        # The broker fans events out by pub/sub, which kombu subscribes to at the first read: read once before
        # the enqueue, then for a second after it.
        with receiver.consumer_context() as (events, _, _):
            try:
                _drain(events, 1)
                assert RunQueue(settings, client, celery).enqueue(run_id, 1)
                _drain(events, 5)
            finally:
                client.delete(f"hango:enqueued:{run_id}:1", settings.queue)
    return [task_id for task_id in seen if task_id == f"run-{run_id}-1"]


def _drain(connection: Any, reads: int) -> None:
    for _ in range(reads):
        with contextlib.suppress(TimeoutError):  # socket.timeout is TimeoutError
            connection.drain_events(timeout=0.2)


@pytest.fixture
def queued(settings: Settings) -> Settings:
    """The session's settings on a queue nobody consumes."""
    return settings.replace(queue=f"hango-test-sent-{uuid.uuid4().hex[:8]}")


def test_no_task_sent_event_by_default(queued: Settings) -> None:
    assert _sent_events(queued) == []


def test_an_enqueue_sends_its_task_sent_event_when_asked(queued: Settings) -> None:
    assert len(_sent_events(queued.replace(task_sent_events=True))) == 1
