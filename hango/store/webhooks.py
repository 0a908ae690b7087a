"""Webhooks and their deliveries: the outbox rows, the delivery log, and the sweeper's questions."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, and_, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from hango.kernel.errors import NotFound
from hango.kernel.models import PendingApproval, Tenant, Webhook, WebhookDelivery
from hango.kernel.pagination import Page, PageRequest, paginate

_DELIVERIES = cast(Table, WebhookDelivery.__table__)


def lock_tenant(session: Session, tenant_id: uuid.UUID) -> None:
    """Hold the tenant's row until the transaction ends (two creations at once count each other's webhooks)."""
    session.execute(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())


def mark_subscribed(session: Session, tenant_id: uuid.UUID) -> None:
    """Set the tenant's ``has_webhooks``: its event transactions read its subscriptions from now on."""
    session.execute(update(Tenant).where(Tenant.id == tenant_id).values(has_webhooks=True))


def recount_subscribed(session: Session, tenant_id: uuid.UUID) -> None:
    """Set the tenant's ``has_webhooks`` to whether it still has a webhook; call it under :func:`lock_tenant`.

    Under that lock, this statement's snapshot is taken after every earlier holder committed, so two deletions of
    a tenant's last two webhooks at once cannot each see the other's webhook and leave the flag set. (Computed in
    the statement that takes the lock, the ``EXISTS`` would read the snapshot from before the wait.)
    """
    remaining = select(Webhook.id).where(Webhook.tenant_id == tenant_id).exists()
    session.execute(update(Tenant).where(Tenant.id == tenant_id).values(has_webhooks=remaining))


def count(session: Session, tenant_id: uuid.UUID) -> int:
    """How many webhooks the tenant has."""
    found: int = session.scalar(select(func.count()).where(Webhook.tenant_id == tenant_id)) or 0
    return found


def add(session: Session, webhook: Webhook) -> Webhook:
    """Insert a webhook; its ``created_at`` is read back."""
    session.add(webhook)
    session.flush()
    session.refresh(webhook)
    return webhook


def get(session: Session, tenant_id: uuid.UUID, webhook_id: uuid.UUID) -> Webhook:
    """A webhook of the tenant; :class:`NotFound` for another tenant's or an unknown one."""
    found = session.scalar(select(Webhook).where(Webhook.tenant_id == tenant_id, Webhook.id == webhook_id))
    if found is None:
        raise NotFound(f"webhook {webhook_id} not found")
    return found


def page(session: Session, tenant_id: uuid.UUID, request: PageRequest) -> Page[Webhook]:
    """The tenant's webhooks, newest first."""
    statement = select(Webhook).where(Webhook.tenant_id == tenant_id)
    return paginate(session, statement, [Webhook.created_at, Webhook.id], request, descending=True)


def subscribers(session: Session, tenant_ids: Iterable[uuid.UUID]) -> list[Webhook]:
    """The active webhooks of these tenants."""
    ids = sorted(set(tenant_ids))
    if not ids:
        return []
    return list(session.scalars(select(Webhook).where(Webhook.tenant_id.in_(ids), Webhook.active)))


def insert_deliveries(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert outbox rows (one per event and webhook)."""
    if rows:
        session.execute(insert(_DELIVERIES), list(rows))


def get_delivery(session: Session, webhook: Webhook, delivery_id: uuid.UUID) -> WebhookDelivery:
    """A delivery of the webhook; :class:`NotFound` otherwise."""
    found = session.scalar(
        select(WebhookDelivery).where(
            WebhookDelivery.tenant_id == webhook.tenant_id,
            WebhookDelivery.webhook_id == webhook.id,
            WebhookDelivery.id == delivery_id,
        )
    )
    if found is None:
        raise NotFound(f"delivery {delivery_id} not found")
    return found


def delivery_page(session: Session, webhook: Webhook, request: PageRequest) -> Page[WebhookDelivery]:
    """A webhook's deliveries, newest first."""
    statement = select(WebhookDelivery).where(
        WebhookDelivery.tenant_id == webhook.tenant_id, WebhookDelivery.webhook_id == webhook.id
    )
    keys = [WebhookDelivery.created_at, WebhookDelivery.id]
    return paginate(session, statement, keys, request, descending=True)


def claim(session: Session, delivery_id: uuid.UUID, now: datetime, hold: timedelta) -> WebhookDelivery | None:
    """Take a due, pending delivery that no other attempt holds, for ``hold``; ``None`` when there is none."""
    statement = (
        update(WebhookDelivery)
        .where(
            WebhookDelivery.id == delivery_id,
            WebhookDelivery.state == "pending",
            WebhookDelivery.next_attempt_at <= now,
            or_(WebhookDelivery.claimed_until.is_(None), WebhookDelivery.claimed_until < now),
        )
        .values(claimed_until=now + hold)
        .returning(WebhookDelivery)
    )
    return session.scalars(statement, execution_options={"populate_existing": True}).one_or_none()


def settle(session: Session, delivery_id: uuid.UUID, values: dict[str, Any]) -> None:
    """Record an attempt's outcome on a delivery and release it."""
    session.execute(
        update(WebhookDelivery).where(WebhookDelivery.id == delivery_id).values(claimed_until=None, **values)
    )


def set_active(session: Session, webhook_id: uuid.UUID, active: bool) -> None:
    """Mark a webhook active or not (its row is written only when that changes it)."""
    session.execute(update(Webhook).where(Webhook.id == webhook_id, Webhook.active != active).values(active=active))


def fail_pending(session: Session, webhook_id: uuid.UUID, error: str) -> None:
    """Give up every pending delivery of a webhook (it was deactivated)."""
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id, WebhookDelivery.state == "pending")
        .values(state="failed", next_attempt_at=None, last_error=error)
    )


def take_due(session: Session, now: datetime, enqueued_until: datetime, limit: int) -> list[uuid.UUID]:
    """Up to ``limit`` due pending deliveries that are on no queue, marked as enqueued until ``enqueued_until``."""
    due = (
        select(WebhookDelivery.id)
        .where(
            WebhookDelivery.state == "pending",
            WebhookDelivery.next_attempt_at <= now,
            or_(WebhookDelivery.enqueued_until.is_(None), WebhookDelivery.enqueued_until < now),
        )
        .order_by(WebhookDelivery.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    ids = list(session.scalars(due))
    if ids:
        session.execute(
            update(WebhookDelivery).where(WebhookDelivery.id.in_(ids)).values(enqueued_until=enqueued_until)
        )
    return ids


def prune_finished(session: Session, before: datetime, limit: int) -> int:
    """Forget up to ``limit`` delivered or failed deliveries created before ``before``, oldest first."""
    old = (
        select(WebhookDelivery.id)
        .where(WebhookDelivery.created_at < before, WebhookDelivery.state.in_(("delivered", "failed")))
        .order_by(WebhookDelivery.created_at)
        .limit(limit)
    )
    result = session.execute(delete(WebhookDelivery).where(WebhookDelivery.id.in_(old)))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def take_reminders(
    session: Session, due_before: datetime, deadline_by: datetime, now: datetime, limit: int
) -> list[PendingApproval]:
    """Up to ``limit`` pending approvals not yet reminded whose deadline comes by ``deadline_by`` (their own
    ``expires_at``) or, without one, created before ``due_before``, in tenants with an active ``approval.reminder``
    webhook; marked reminded at ``now``."""
    subscribed = (
        select(Webhook.id)
        .where(
            Webhook.tenant_id == PendingApproval.tenant_id,
            Webhook.active,
            Webhook.events.contains(["approval.reminder"]),
        )
        .exists()
    )
    statement = (
        select(PendingApproval)
        .where(
            and_(
                PendingApproval.state == "pending",
                PendingApproval.reminded_at.is_(None),
                or_(
                    PendingApproval.expires_at <= deadline_by,
                    and_(PendingApproval.expires_at.is_(None), PendingApproval.created_at <= due_before),
                ),
            ),
            subscribed,
        )
        .order_by(PendingApproval.created_at)
        .limit(limit)
        .with_for_update(of=PendingApproval, skip_locked=True)
    )
    rows = list(session.scalars(statement))
    for row in rows:
        row.reminded_at = now
    session.flush()
    return rows


def reopen(session: Session, delivery: WebhookDelivery, now: datetime, retry_until: datetime, until: datetime) -> None:
    """A manual retry: the delivery is pending again, due now, with a new window, and about to be enqueued."""
    delivery.state = "pending"
    delivery.next_attempt_at = now
    delivery.retry_until = retry_until
    delivery.enqueued_until = until
    delivery.claimed_until = None
    session.flush()


def delivered_since(session: Session, webhook_id: uuid.UUID, since: datetime) -> bool:
    """Whether a delivery of the webhook succeeded at or after ``since``."""
    statement = select(WebhookDelivery.id).where(
        WebhookDelivery.webhook_id == webhook_id,
        WebhookDelivery.state == "delivered",
        WebhookDelivery.delivered_at >= since,
    )
    return session.scalar(statement.limit(1)) is not None
