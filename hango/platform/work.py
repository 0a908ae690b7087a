"""The unit of work: one transaction plus what must happen only after it commits (publishing its events, waking
the streams of its threads, enqueueing its runs and webhook deliveries). Services open one with
:func:`unit_of_work` on the process's :class:`hango.platform.runtime.Runtime`."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy.orm import Session

from hango.kernel.models import PendingApproval, Run, WebhookEventType
from hango.platform.events import ApprovalNotice, Event
from hango.platform.runtime import Runtime
from hango.store import approval_events as approval_event_store
from hango.store import events as event_store
from hango.store.approvals import approval_item
from hango.store.outbox import Notification, Outbox
from hango.store.runs import RunCounters

log = logging.getLogger(__name__)

# The approval stream's events that webhooks may subscribe to: every one. A run cancelled while it waits closes each
# pending approval with its own approval.cancelled (the card a reviewer was told about goes away), besides the
# run's run.finished.
_APPROVAL_NOTIFICATIONS: dict[str, WebhookEventType] = {
    "approval.requested": "approval.requested",
    "approval.decided": "approval.decided",
    "approval.expired": "approval.expired",
    "approval.escalated": "approval.escalated",
    "approval.cancelled": "approval.cancelled",
}


class Queued(Protocol):
    """A queued run as enqueuing it needs it: its id and the generation its message carries."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def queue_generation(self) -> int: ...


@dataclass
class Work:
    """One transaction plus what must happen only after it commits: publishing events, enqueueing runs and
    webhook deliveries.

    Events are written together just before the commit, in one statement, and published once the commit
    succeeded. A writer that updates the run's row anyway numbers its events in that same statement
    (:meth:`numbered`); others are numbered at the end (:meth:`emit`).
    """

    session: Session
    approval_ttl: timedelta
    # The transaction's webhook deliveries (``None``: nobody is told, as in tests of the store alone).
    outbox: Outbox | None = None
    events: list[Event] = field(default_factory=list)
    notices: list[ApprovalNotice] = field(default_factory=list)
    enqueues: list[tuple[uuid.UUID, int]] = field(default_factory=list)
    # Threads whose runs this transaction changed: their streams are woken after commit.
    woken: set[uuid.UUID] = field(default_factory=set)
    _rows: list[dict[str, Any]] = field(default_factory=list)
    _approvals: list[tuple[str, PendingApproval, dict[str, Any]]] = field(default_factory=list)
    _emitted: dict[tuple[uuid.UUID, uuid.UUID], list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)
    # Tenants' ``has_webhooks`` as statements of this transaction returned it: the outbox skips those without.
    _has_webhooks: dict[uuid.UUID, bool] = field(default_factory=dict)

    def emit(self, run: Run, type_: str, data: dict[str, Any] | None = None) -> None:
        """Append an event to the run's log, numbered when the transaction ends; published after commit."""
        self._emitted.setdefault((run.id, run.tenant_id), []).append((type_, data or {}))

    def numbered(self, run: Run | RunCounters, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append events whose numbers the caller took: it raised ``runs.event_seq`` by ``len(events)`` in the
        statement that returned ``run``, so they end at ``run.event_seq``."""
        if (run.id, run.tenant_id) in self._emitted:
            raise RuntimeError("events numbered after unnumbered ones of the same run would be out of order")
        if isinstance(run, RunCounters) and run.tenant_webhooks is not None:
            self._has_webhooks[run.tenant_id] = run.tenant_webhooks
        first = run.event_seq - len(events) + 1
        for index, (type_, data) in enumerate(events):
            self._record(Event(run.id, first + index, type_, data), run.tenant_id)

    def approvals(self, type_: str, rows: Sequence[PendingApproval]) -> None:
        """Append approvals, as they are now, to their tenant's approval stream; numbered just before commit."""
        self._approvals.extend((type_, row, approval_item(row, self.approval_ttl)) for row in rows)

    def write_events(self) -> None:
        """Number and write the events of this transaction; :func:`unit_of_work` calls this just before commit."""
        for (run_id, tenant_id), emitted in self._emitted.items():
            first = event_store.reserve(self.session, run_id, len(emitted))
            for index, (type_, data) in enumerate(emitted):
                self._record(Event(run_id, first + index, type_, data), tenant_id)
        self._emitted.clear()
        approval_rows = self._number_approval_events()
        self._notify_webhooks()
        self._approvals.clear()
        event_store.insert_events(self.session, self._rows)
        self._rows.clear()
        approval_event_store.insert_events(self.session, approval_rows)

    def _notify_webhooks(self) -> None:
        if self.outbox is None:
            return
        for row in self._rows:
            if row["type"] == "run.finished":
                self.outbox.add(Notification(row["tenant_id"], "run.finished", row["run_id"]))
        for type_, approval, data in self._approvals:
            if type_ in _APPROVAL_NOTIFICATIONS:
                kind = _APPROVAL_NOTIFICATIONS[type_]
                self.outbox.add(Notification(approval.tenant_id, kind, approval.run_id, data))
        self.outbox.write(self.session, self._has_webhooks)

    def _number_approval_events(self) -> list[dict[str, Any]]:
        # Numbering locks the tenant's row until the commit (the stream's numbers are given in commit order), and
        # reads the tenant's has_webhooks on the way. Tenants in one order, so two transactions that name the same
        # tenants cannot deadlock.
        by_tenant: dict[uuid.UUID, list[tuple[str, PendingApproval, dict[str, Any]]]] = {}
        for entry in self._approvals:
            by_tenant.setdefault(entry[1].tenant_id, []).append(entry)
        rows = []
        for tenant_id in sorted(by_tenant):
            entries = by_tenant[tenant_id]
            first, self._has_webhooks[tenant_id] = approval_event_store.reserve_reading_webhooks(
                self.session, tenant_id, len(entries)
            )
            for seq, (type_, row, data) in enumerate(entries, start=first):
                self.notices.append(ApprovalNotice(tenant_id, seq, type_, row.run_creator, data))
                rows.append(
                    {
                        "tenant_id": tenant_id,
                        "seq": seq,
                        "type": type_,
                        "approval_id": row.id,
                        "run_creator": row.run_creator,
                        "data": data,
                    }
                )
        return rows

    def _record(self, event: Event, tenant_id: uuid.UUID) -> None:
        self.events.append(event)
        self._rows.append(
            {
                "tenant_id": tenant_id,
                "run_id": event.run_id,
                "seq": event.seq,
                "type": event.type,
                "data": event_store.stored_data(event.type, event.data),
            }
        )

    def wake_thread(self, thread_id: uuid.UUID) -> None:
        """Wake the thread's streams once the transaction has committed: it gave the thread a run."""
        self.woken.add(thread_id)

    def enqueue_after_commit(self, run: Queued) -> None:
        """Enqueue the run's current queued generation once the transaction has committed."""
        self.enqueues.append((run.id, run.queue_generation))


@contextmanager
def unit_of_work(runtime: Runtime) -> Iterator[Work]:
    """A transaction whose events are published, and whose runs and webhook deliveries are enqueued, only after it
    commits."""
    with runtime.db.transaction() as session:
        work = Work(session, runtime.settings.approval_ttl, Outbox(runtime.settings))
        yield work
        work.write_events()
    runtime.publisher.publish(work.events, work.notices, work.woken)
    for run_id, generation in work.enqueues:
        try:
            runtime.queue.enqueue(run_id, generation)
        except Exception:  # the broker is disposable: the reconciler re-enqueues runs left queued
            log.warning(
                "could not enqueue run %s; the reconciler will", run_id, extra={"run_id": str(run_id)}, exc_info=True
            )
    if work.outbox is not None:
        enqueue_deliveries(runtime, work.outbox.written)


def enqueue_deliveries(runtime: Runtime, delivery_ids: Sequence[uuid.UUID]) -> None:
    """Enqueue committed webhook deliveries; one the broker loses is enqueued by beat's sweep later."""
    for delivery_id in delivery_ids:
        try:
            runtime.deliveries.enqueue(delivery_id)
        except Exception:  # the broker is disposable: beat's sweep enqueues due deliveries
            log.warning("could not enqueue webhook delivery %s; beat will", delivery_id, exc_info=True)
