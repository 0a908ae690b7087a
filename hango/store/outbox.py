"""The outbox: a delivery row per event and subscribed webhook, written in the transaction that made the event.

So a rolled-back change sends nothing, and a committed one loses nothing: the rows are enqueued after commit, and
beat's sweep enqueues those whose enqueue was lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.kernel.config import Settings
from hango.kernel.models import Run, WebhookEventType
from hango.store import webhooks as store


@dataclass(frozen=True)
class Notification:
    """One event worth telling webhooks about: an approval item (``approval.*``) or a finished run."""

    tenant_id: uuid.UUID
    type: WebhookEventType
    run_id: uuid.UUID
    approval: dict[str, Any] | None = None


def run_item(run: Run) -> dict[str, Any]:
    """A run as the API shows it, in JSON types (the data of ``run.finished``)."""
    return {
        "id": str(run.id),
        "agent_id": str(run.agent_id),
        "thread_id": str(run.thread_id) if run.thread_id else None,
        "state": run.state,
        "created_by": str(run.created_by),
        "created_at": _time(run.created_at),
        "started_at": _time(run.started_at),
        "finished_at": _time(run.finished_at),
        "awaiting_since": _time(run.awaiting_since),
        "error": run.error,
        "turn": run.turn,
        "usage": {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens},
    }


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass
class Outbox:
    """Collects a transaction's notifications and writes their delivery rows just before it commits."""

    settings: Settings
    notifications: list[Notification] = field(default_factory=list)
    written: list[uuid.UUID] = field(default_factory=list)

    def add(self, notification: Notification) -> None:
        """Tell the tenant's webhooks about this, if any subscribes."""
        self.notifications.append(notification)

    def write(self, session: Session, has_webhooks: Mapping[uuid.UUID, bool]) -> None:
        """Write one delivery row per notification and subscribed active webhook; their ids go to ``written``.

        ``has_webhooks`` is the tenants' flag as this transaction already read it: a tenant known to have none is
        not asked for its subscriptions.
        """
        tenants = {n.tenant_id for n in self.notifications if has_webhooks.get(n.tenant_id, True)}
        if not tenants:
            self.notifications.clear()
            return
        hooks = store.subscribers(session, tenants)
        wanted = [n for n in self.notifications if any(_subscribes(hook.events, n) for hook in hooks)]
        runs = _runs(session, [n.run_id for n in wanted if n.approval is None])
        now = datetime.now(UTC)
        rows = []
        for notification in wanted:
            payload = self.payload(notification, runs, now)
            event_id = uuid.uuid4()
            for hook in hooks:
                if hook.tenant_id == notification.tenant_id and _subscribes(hook.events, notification):
                    rows.append(self._row(hook.id, notification, event_id, payload, now))
        store.insert_deliveries(session, rows)
        self.written.extend(row["id"] for row in rows)
        self.notifications.clear()

    def payload(self, notification: Notification, runs: dict[uuid.UUID, Run], now: datetime) -> dict[str, Any]:
        """The body: ``type``, ``timestamp`` and ``data`` (the approval item or the run) with its ``links``."""
        base = self.settings.public_url.rstrip("/")
        run_link = f"{base}/v1/runs/{notification.run_id}"
        if notification.approval is not None:
            inbox = f"{base}/inbox/approvals/{notification.approval['id']}"
            data = {**notification.approval, "links": {"inbox": inbox, "run": run_link}}
        else:
            inbox = f"{base}/inbox/runs/{notification.run_id}"
            data = {**run_item(runs[notification.run_id]), "links": {"inbox": inbox, "run": run_link}}
        return {"type": notification.type, "timestamp": now.isoformat(), "data": data}

    def _row(
        self,
        webhook_id: uuid.UUID,
        notification: Notification,
        event_id: uuid.UUID,
        payload: dict[str, Any],
        now: datetime,
    ) -> dict[str, Any]:
        return {
            "id": uuid.uuid4(),
            "tenant_id": notification.tenant_id,
            "webhook_id": webhook_id,
            "event_id": event_id,
            "event_type": notification.type,
            "payload": payload,
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "retry_until": now + self.settings.webhook_retry_for,
            # Enqueued after commit: beat leaves it alone unless that enqueue is lost.
            "enqueued_until": now + self.settings.webhook_requeue_after,
        }


def _subscribes(events: Sequence[str], notification: Notification) -> bool:
    return notification.type in events


def _runs(session: Session, run_ids: list[uuid.UUID]) -> dict[uuid.UUID, Run]:
    """The runs as this transaction changed them (re-read: the transition updated them by statement)."""
    if not run_ids:
        return {}
    statement = select(Run).where(Run.id.in_(set(run_ids))).execution_options(populate_existing=True)
    return {run.id: run for run in session.scalars(statement)}


def reminder_window(settings: Settings, now: datetime) -> datetime:
    """Approvals created before this have ``HANGO_APPROVAL_REMIND_BEFORE`` or less left before they expire."""
    return now - settings.approval_ttl + settings.approval_remind_before


def retry_window(settings: Settings, now: datetime) -> tuple[datetime, datetime]:
    """A manual retry's new window end and how long beat leaves it to the enqueue."""
    return now + settings.webhook_retry_for, now + settings.webhook_requeue_after


__all__ = ["Notification", "Outbox", "reminder_window", "retry_window", "run_item"]
