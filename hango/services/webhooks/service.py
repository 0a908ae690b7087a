"""What the API calls: webhooks' creation, listing, deletion, their delivery log and a delivery's manual retry.

Owners and admins only. Each function owns its transaction; a manual retry is enqueued after commit.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from hango.kernel import addresses
from hango.kernel.auth import Principal
from hango.kernel.errors import Conflict, InvalidInput
from hango.kernel.models import Webhook, WebhookDelivery
from hango.kernel.pagination import Page, PageRequest
from hango.kernel.secret_box import SecretBox
from hango.platform.runtime import Runtime
from hango.platform.work import enqueue_deliveries
from hango.services.tenancy import require_manager
from hango.services.webhooks.signing import new_secret
from hango.store import webhooks as store
from hango.store.outbox import retry_window

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewWebhook:
    """A webhook just created; ``secret`` is its only clear-text appearance."""

    webhook: Webhook
    secret: str


def create(runtime: Runtime, principal: Principal, url: str, events: Sequence[str], description: str) -> NewWebhook:
    """Create a webhook with a fresh secret.

    Raises:
        Forbidden: the caller is a member.
        InvalidInput: the URL is malformed or refused (``url``).
        Conflict: the tenant already has ``HANGO_MAX_WEBHOOKS_PER_TENANT`` webhooks.
    """
    require_manager(principal)
    settings = runtime.settings
    try:
        addresses.resolve(
            url, allow_private=settings.webhook_allow_private_urls, max_length=settings.webhook_max_url_length
        )
    except addresses.RefusedUrl as exc:
        extra = {"tenant_id": str(principal.tenant_id), "user_id": str(principal.user_id), **exc.log_fields()}
        log.warning("webhook URL refused", extra=extra)
        raise InvalidInput.field("url", str(exc)) from exc
    secret = new_secret()
    box = SecretBox(settings.webhook_secret_keys)
    if not box.encrypts:
        log.warning("storing a webhook secret unencrypted: set HANGO_WEBHOOK_SECRET_KEYS to encrypt secrets at rest")
    webhook = Webhook(
        id=uuid.uuid4(),
        tenant_id=principal.tenant_id,
        url=url,
        events=list(dict.fromkeys(events)),
        description=description,
        secret=box.seal(secret),
        active=True,
        created_by=principal.user_id,
    )
    with runtime.db.transaction() as session:
        store.lock_tenant(session, principal.tenant_id)
        limit = settings.max_webhooks_per_tenant
        if store.count(session, principal.tenant_id) >= limit:
            raise Conflict(f"the tenant already has {limit} webhooks (HANGO_MAX_WEBHOOKS_PER_TENANT)")
        store.add(session, webhook)
        store.mark_subscribed(session, principal.tenant_id)
    return NewWebhook(webhook, secret)


def list_webhooks(runtime: Runtime, principal: Principal, request: PageRequest) -> Page[Webhook]:
    """The tenant's webhooks, newest first."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        return store.page(session, principal.tenant_id, request)


def get(runtime: Runtime, principal: Principal, webhook_id: uuid.UUID) -> Webhook:
    """One webhook of the tenant."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        return store.get(session, principal.tenant_id, webhook_id)


def delete(runtime: Runtime, principal: Principal, webhook_id: uuid.UUID) -> None:
    """Delete a webhook and its deliveries; nothing more is sent to it."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        store.lock_tenant(session, principal.tenant_id)
        session.delete(store.get(session, principal.tenant_id, webhook_id))
        session.flush()
        store.recount_subscribed(session, principal.tenant_id)


def deliveries(
    runtime: Runtime, principal: Principal, webhook_id: uuid.UUID, request: PageRequest
) -> Page[WebhookDelivery]:
    """A webhook's delivery log, newest first."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        webhook = store.get(session, principal.tenant_id, webhook_id)
        return store.delivery_page(session, webhook, request)


def retry(runtime: Runtime, principal: Principal, webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """Send a delivery again now, whatever its state, with a new retry window; the same ``webhook-id``.

    A success marks the webhook active again, so this is also how a deactivated webhook is brought back.
    """
    require_manager(principal)
    now = datetime.now(UTC)
    retry_until, enqueued_until = retry_window(runtime.settings, now)
    with runtime.db.transaction() as session:
        webhook = store.get(session, principal.tenant_id, webhook_id)
        delivery = store.get_delivery(session, webhook, delivery_id)
        store.reopen(session, delivery, now, retry_until, enqueued_until)
    enqueue_deliveries(runtime, [delivery.id])
    return delivery
