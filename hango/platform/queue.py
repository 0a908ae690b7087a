"""The broker side of the runtime: the Celery application factory and the deduplicated run queue.

The run task's name is the contract between whoever enqueues (the API, the reconciler) and the worker that
executes it; it lives here so that neither edge imports the other.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import redis
from celery import Celery

from hango.kernel.config import Settings

log = logging.getLogger(__name__)
RUN_TASK = "hango.run"
RECONCILE_TASK = "hango.reconcile"
PING_TASK = "hango.ping"
EXPIRE_TASK = "hango.expire_approvals"
STATS_TASK = "hango.worker_stats"
WEBHOOK_DELIVER_TASK = "hango.webhook_deliver"
WEBHOOK_SWEEP_TASK = "hango.webhook_sweep"


def make_celery(settings: Settings) -> Celery:
    """A Celery app on the Redis broker, configured for durable, late-acknowledged, one-at-a-time runs."""
    broker = settings.require_redis_url()
    app = Celery("hango", broker=broker, set_as_current=False)
    time_limit = settings.task_time_limit.total_seconds()
    app.conf.update(
        task_default_queue=settings.queue,
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # A run is acknowledged only when its task returns; a worker that dies mid-run leaves the message to be
        # redelivered, and the claim (a conditional update) makes a redelivery harmless.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=time_limit,
        task_soft_time_limit=max(time_limit - 30, time_limit * 0.9),
        # Redis redelivers unacknowledged messages after the visibility timeout; it must outlast the longest task.
        broker_transport_options={"visibility_timeout": int(time_limit * 2) + 60},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # Workers' task events feed Flower's task list. A task-sent event costs the sender a second broker publish
        # per enqueue (a third of an enqueue's time, measured), so it is Celery's default, off, unless asked for.
        worker_send_task_events=True,
        task_send_sent_event=settings.task_sent_events,
        worker_cancel_long_running_tasks_on_connection_loss=False,
        beat_schedule={
            "reconcile-runs": {
                "task": RECONCILE_TASK,
                "schedule": settings.reconcile_interval.total_seconds(),
                "options": {"queue": settings.queue, "expires": settings.reconcile_interval.total_seconds()},
            },
            "expire-approvals": {
                "task": EXPIRE_TASK,
                "schedule": settings.approval_sweep_interval.total_seconds(),
                "options": {"queue": settings.queue, "expires": settings.approval_sweep_interval.total_seconds()},
            },
            "webhook-sweep": {
                "task": WEBHOOK_SWEEP_TASK,
                "schedule": settings.webhook_sweep_interval.total_seconds(),
                "options": {"queue": settings.queue, "expires": settings.webhook_sweep_interval.total_seconds()},
            },
        },
    )
    return app


class RunQueue:
    """Puts runs on the queue at most once per queued generation.

    Each transition of a run to ``queued`` bumps ``runs.queue_generation``; the task id and a Redis ``SET NX`` key
    are derived from ``(run_id, generation)``, so the API, a retrying client and the reconciler may all ask to
    enqueue the same generation and only one message is sent while the key lives. Redis holds no truth here:
    losing the key only allows a duplicate message, which the worker's conditional claim turns into a no-op.
    """

    def __init__(self, settings: Settings, client: redis.Redis, celery: Celery) -> None:
        self._client = client
        self._celery = celery
        self._queue = settings.queue
        self._ttl = max(1, int(settings.enqueue_dedup_ttl.total_seconds()))

    def prepare(self) -> None:
        """Load now what Celery loads when a process sends its first task: the message protocol and its sender,
        routes and queues, the (disabled) result backend and the broker transport's modules. Nothing connects.

        An API worker that has not would spend about a hundred milliseconds in those imports at its first enqueue
        (its first run created, or its first decision), with every greenlet of the process waiting: the live
        events of that decision would reach the process's streams only afterwards.
        """
        celery = self._celery
        amqp = celery.amqp
        _ = (amqp.send_task_message, amqp.router, amqp.queues, celery.backend, celery.producer_pool)

    def enqueue(self, run_id: uuid.UUID, generation: int) -> bool:
        """Send the run's task unless this generation was sent recently; ``True`` when a message was sent."""
        key = f"hango:enqueued:{run_id}:{generation}"
        if not self._client.set(key, "1", nx=True, ex=self._ttl):
            return False
        try:
            self._celery.send_task(
                RUN_TASK, args=[str(run_id)], task_id=f"run-{run_id}-{generation}", queue=self._queue
            )
        except Exception:
            # Let the reconciler try again instead of waiting for the key to expire.
            self._client.delete(key)
            raise
        log.info("run enqueued", extra={"run_id": str(run_id), "generation": generation})
        return True


class DeliveryQueue:
    """Puts webhook deliveries on the queue. A lost or duplicate message is harmless: beat enqueues due deliveries
    again, and the task's conditional claim lets one attempt at a time through."""

    def __init__(self, settings: Settings, celery: Celery) -> None:
        self._celery = celery
        self._queue = settings.queue

    def enqueue(self, delivery_id: uuid.UUID) -> None:
        """Send the delivery's task."""
        self._celery.send_task(WEBHOOK_DELIVER_TASK, args=[str(delivery_id)], queue=self._queue)


def task_options(settings: Settings) -> dict[str, Any]:
    """Options shared by every task the worker registers."""
    return {"acks_late": True, "reject_on_worker_lost": True, "queue": settings.queue}
