"""Sending webhook deliveries, from Celery tasks only: one attempt per task, retried by beat's sweep.

A task claims its delivery with a conditional update (pending, due, held by no other attempt), sends it outside
any transaction, then records the answer: delivered; or the next attempt, after an exponential, jittered delay
from ``HANGO_WEBHOOK_RETRY_BASE``; or, once the next attempt would fall past the delivery's window
(``HANGO_WEBHOOK_RETRY_FOR``), failed — and the webhook deactivated when none of its deliveries succeeded in that
window. Every attempt carries the same ``webhook-id`` and a fresh timestamp and signature.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import httpx
from sqlalchemy.orm import Session

from hango import __version__
from hango.kernel import addresses
from hango.kernel.config import Settings
from hango.kernel.models import Webhook
from hango.kernel.secret_box import SecretBox
from hango.platform.runtime import Runtime
from hango.platform.work import enqueue_deliveries, unit_of_work
from hango.services.webhooks import signing
from hango.store import webhooks as store
from hango.store.approvals import approval_item
from hango.store.outbox import Notification, reminder_window

log = logging.getLogger(__name__)
Outcome = Literal["delivered", "retrying", "failed", "skipped"]
# The longest error text kept on a delivery.
_ERROR_CHARS = 500


@dataclass(frozen=True)
class Claimed:
    """What one attempt needs, read while claiming the delivery."""

    id: uuid.UUID
    webhook_id: uuid.UUID
    tenant_id: uuid.UUID
    event_id: uuid.UUID
    payload: dict[str, Any]
    attempts: int
    retry_until: datetime
    url: str
    sealed_secret: str


@dataclass(frozen=True)
class Answer:
    """How one attempt ended: the receiver's status code, or why there was none (``error``, stored on the delivery
    where the tenant's admins read it)."""

    status_code: int | None
    error: str | None
    # The refusal of the URL when the attempt was refused: what only the server's log says (the address).
    refused: addresses.RefusedUrl | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        """A 2xx answer."""
        return self.status_code is not None and 200 <= self.status_code < 300


def deliver(runtime: Runtime, delivery_id: uuid.UUID) -> Outcome:
    """Make one attempt of a delivery, if it is pending, due and held by no other attempt."""
    settings = runtime.settings
    claimed = _claim(runtime, delivery_id)
    if claimed is None:
        return "skipped"
    secret = SecretBox(settings.webhook_secret_keys).open(claimed.sealed_secret)
    answer = send(settings, claimed.url, secret, str(claimed.event_id), claimed.payload)
    if answer.refused is not None:
        _log_refused(claimed, answer.refused)
    with runtime.db.transaction() as session:
        outcome = record(session, settings, claimed, answer, datetime.now(UTC))
    log.info(
        "webhook delivery %s",
        outcome,
        extra={
            "delivery_id": str(claimed.id),
            "webhook_id": str(claimed.webhook_id),
            "status_code": answer.status_code,
            "error": answer.error,
        },
    )
    return outcome


def _log_refused(claimed: Claimed, refused: addresses.RefusedUrl) -> None:
    ids = {"delivery_id": str(claimed.id), "webhook_id": str(claimed.webhook_id), "tenant_id": str(claimed.tenant_id)}
    log.warning("webhook URL refused", extra={**ids, **refused.log_fields()})


def _claim(runtime: Runtime, delivery_id: uuid.UUID) -> Claimed | None:
    # Held for longer than an attempt can take, so a worker that died mid-attempt frees it for beat.
    hold = 2 * runtime.settings.webhook_timeout + timedelta(seconds=5)
    with runtime.db.transaction() as session:
        delivery = store.claim(session, delivery_id, datetime.now(UTC), hold)
        if delivery is None:
            return None
        webhook = session.get(Webhook, delivery.webhook_id)
        if webhook is None:
            return None
        return Claimed(
            id=delivery.id,
            webhook_id=webhook.id,
            tenant_id=webhook.tenant_id,
            event_id=delivery.event_id,
            payload=delivery.payload,
            attempts=delivery.attempts,
            retry_until=delivery.retry_until,
            url=webhook.url,
            sealed_secret=webhook.secret,
        )


def send(settings: Settings, url: str, secret: str, message_id: str, payload: dict[str, Any]) -> Answer:
    """POST a signed payload to the address the URL resolves to now, if that address is allowed.

    No redirect is followed and no proxy from the environment is used; the connection goes to the checked
    address, with the URL's host name for ``Host`` and for TLS.
    """
    try:
        target = addresses.resolve(
            url, allow_private=settings.webhook_allow_private_urls, max_length=settings.webhook_max_url_length
        )
    except addresses.RefusedUrl as exc:
        return Answer(None, f"refused: the URL {exc}", refused=exc)
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    headers = {
        **signing.headers(secret, message_id, int(time.time()), body),
        "host": target.host_header(),
        "user-agent": f"hango-webhooks/{__version__}",
    }
    extensions = {"sni_hostname": target.host} if target.url.scheme == "https" else {}
    try:
        with httpx.Client(timeout=settings.webhook_timeout.total_seconds(), trust_env=False) as client:
            request = client.build_request(
                "POST", target.connect_url(), content=body, headers=headers, extensions=extensions
            )
            # The body is never read: the status code is the whole answer.
            response = client.send(request, stream=True, follow_redirects=False)
            response.close()
    except httpx.TimeoutException:
        return Answer(None, f"timed out after {settings.webhook_timeout.total_seconds():g}s")
    except httpx.HTTPError as exc:
        return Answer(None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS])
    return Answer(response.status_code, None if 200 <= response.status_code < 300 else f"HTTP {response.status_code}")


def backoff(settings: Settings, attempts: int) -> timedelta:
    """The delay after the ``attempts``-th failed attempt: the base, doubled each time, plus up to a quarter."""
    doubled: timedelta = settings.webhook_retry_base * (2 ** min(attempts - 1, 30))
    jitter = random.uniform(1.0, 1.25)  # spreads the retries of many deliveries that failed together
    return min(doubled, settings.webhook_retry_for) * jitter


def record(session: Session, settings: Settings, claimed: Claimed, answer: Answer, now: datetime) -> Outcome:
    """Store an attempt's answer: delivered, the next attempt, or failed (deactivating the webhook)."""
    attempt: dict[str, Any] = {
        "attempts": claimed.attempts + 1,
        "last_status_code": answer.status_code,
        "last_error": answer.error,
    }
    if answer.ok:
        store.settle(
            session, claimed.id, {**attempt, "state": "delivered", "delivered_at": now, "next_attempt_at": None}
        )
        store.set_active(session, claimed.webhook_id, True)
        return "delivered"
    following = now + backoff(settings, claimed.attempts + 1)
    if following <= claimed.retry_until:
        store.settle(session, claimed.id, {**attempt, "next_attempt_at": following, "enqueued_until": None})
        return "retrying"
    store.settle(session, claimed.id, {**attempt, "state": "failed", "next_attempt_at": None})
    window_start = claimed.retry_until - settings.webhook_retry_for
    if not store.delivered_since(session, claimed.webhook_id, window_start):
        store.set_active(session, claimed.webhook_id, False)
        store.fail_pending(session, claimed.webhook_id, "the webhook was deactivated")
        log.warning(
            "webhook deactivated: no delivery succeeded in the retry window",
            extra={"webhook_id": str(claimed.webhook_id)},
        )
    return "failed"


@dataclass(frozen=True)
class SweepReport:
    """What one sweep did."""

    reminded: int
    enqueued: int
    pruned: int = 0


def sweep(runtime: Runtime) -> SweepReport:
    """Beat's sweep: write the reminders now due, enqueue due deliveries (retries, lost enqueues), and forget
    finished deliveries past ``HANGO_WEBHOOK_DELIVERIES_RETENTION``."""
    reminded = remind(runtime)
    enqueued = enqueue_due(runtime)
    return SweepReport(reminded=reminded, enqueued=enqueued, pruned=prune(runtime))


def prune(runtime: Runtime) -> int:
    """Forget finished deliveries older than the retention, ten batches at most per sweep; returns how many."""
    settings = runtime.settings
    before = datetime.now(UTC) - settings.webhook_deliveries_retention
    with runtime.db.transaction() as session:
        return store.prune_finished(session, before, 10 * settings.webhook_batch)


def enqueue_due(runtime: Runtime) -> int:
    """Enqueue up to ``HANGO_WEBHOOK_BATCH`` due deliveries that are on no queue; returns how many."""
    settings = runtime.settings
    now = datetime.now(UTC)
    with runtime.db.transaction() as session:
        due = store.take_due(session, now, now + settings.webhook_requeue_after, settings.webhook_batch)
    enqueue_deliveries(runtime, due)
    return len(due)


def remind(runtime: Runtime) -> int:
    """Write ``approval.reminder`` deliveries for up to ``HANGO_WEBHOOK_BATCH`` approvals now due one (once
    each); enqueued after commit. Returns how many approvals were reminded."""
    settings = runtime.settings
    now = datetime.now(UTC)
    with unit_of_work(runtime) as work:
        deadline_by = now + settings.approval_remind_before
        rows = store.take_reminders(
            work.session, reminder_window(settings, now), deadline_by, now, settings.webhook_batch
        )
        for row in rows:
            item = approval_item(row, settings.approval_ttl)
            if work.outbox is not None:
                work.outbox.add(Notification(row.tenant_id, "approval.reminder", row.run_id, item))
    return len(rows)
