"""Webhooks: notifications to reviewers (owner, admin)."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import marshmallow as ma
from marshmallow import fields, validate

from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request, refusal
from hango.kernel.models import DELIVERY_STATES, WEBHOOK_EVENT_TYPES, WebhookDelivery
from hango.kernel.models import Webhook as WebhookRow
from hango.kernel.pagination import Page
from hango.services.webhooks import service

blp = Blueprint("webhooks", __name__, url_prefix="/v1", description="Webhooks: signed notifications to reviewers")


class WebhookCreate(ma.Schema):
    url = fields.String(
        required=True, metadata={"description": "https URL (http only to a private address, when allowed)"}
    )
    events = fields.List(
        fields.String(validate=validate.OneOf(WEBHOOK_EVENT_TYPES)),
        required=True,
        validate=validate.Length(min=1, max=20),
        metadata={"description": "the event types to send, 1 to 20 of them"},
    )
    description = fields.String(
        load_default="",
        validate=validate.Length(max=1000),
        metadata={"description": "a note for people, at most 1000 characters; default empty"},
    )


class Webhook(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the webhook's id"})
    url = fields.String(required=True, metadata={"description": "where deliveries are POSTed"})
    events = fields.List(fields.String(), required=True, metadata={"description": "the event types it is sent"})
    description = fields.String(required=True, metadata={"description": "the note given at creation"})
    active = fields.Boolean(
        required=True,
        metadata={
            "description": "false once a delivery failed with no success for a whole HANGO_WEBHOOK_RETRY_FOR window: "
            "new events are not sent to it; a successful delivery (a retry) makes it true again"
        },
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when it was created"})


class WebhookCreated(Webhook):
    secret = fields.String(required=True, metadata={"description": "whsec_…, shown only in this response"})


class Delivery(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the delivery's id"})
    event_id = fields.UUID(required=True, metadata={"description": "the webhook-id header, the same on every retry"})
    event_type = fields.String(required=True, metadata={"description": "the event sent, e.g. approval.requested"})
    attempts = fields.Integer(required=True, metadata={"description": "how many times it has been sent so far"})
    state = fields.String(
        required=True,
        validate=validate.OneOf(DELIVERY_STATES),
        metadata={
            "description": "pending (to be sent or retried), delivered (a 2xx answer) or failed (retries "
            "exhausted, or the webhook deactivated)"
        },
    )
    last_status_code = fields.Integer(
        allow_none=True,
        required=True,
        metadata={"description": "the receiver's HTTP status at the last attempt; null: none, or no answer"},
    )
    last_error = fields.String(
        allow_none=True, required=True, metadata={"description": "why the last attempt failed; null if it did not"}
    )
    next_attempt_at = fields.DateTime(
        allow_none=True, required=True, metadata={"description": "when it is sent next; null once it is final"}
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when the event was queued for the webhook"})
    delivered_at = fields.DateTime(
        allow_none=True, required=True, metadata={"description": "when a 2xx answer came; null until then"}
    )


WebhookList = list_of(Webhook, "WebhookList")
DeliveryList = list_of(Delivery, "DeliveryList")


@blp.route("/webhooks", methods=["POST"])
@blp.problems(400, 403, 409)
@blp.arguments(WebhookCreate, example=examples.WEBHOOK_CREATE)
@blp.response(201, WebhookCreated, example=examples.WEBHOOK_CREATED)
@audited("webhook.create", "webhook")
def create_webhook(body: dict[str, Any]) -> dict[str, Any]:
    """Create a webhook (owner, admin); its signing secret is shown only in this response.

    The events chosen are POSTed to the URL as Standard Webhooks (webhook-id, webhook-timestamp and
    webhook-signature headers, signed with the secret), retried with backoff for HANGO_WEBHOOK_RETRY_FOR. The URL
    must be https, or http to a private address where HANGO_WEBHOOK_ALLOW_PRIVATE_URLS allows it, and resolve to
    addresses the server may reach (400 otherwise). A member gets a 403; a tenant that already has
    HANGO_MAX_WEBHOOKS_PER_TENANT webhooks a 409. Audited as webhook.create, with the URL's host only.
    """
    created = service.create(services().runtime, principal(), body["url"], body["events"], body["description"])
    webhook = created.webhook
    # Never the secret, nor the whole URL (its path or query may hold a credential of the receiver).
    audit_target("webhook", webhook.id, events=webhook.events, host=urlsplit(webhook.url).hostname)
    return {**_fields(webhook), "secret": created.secret}


@blp.route("/webhooks", methods=["GET"])
@blp.problems(403)
@blp.arguments(ListArgs, location="query")
@blp.response(200, WebhookList, example=examples.WEBHOOKS)
def list_webhooks(args: dict[str, Any]) -> Page[WebhookRow]:
    """The tenant's webhooks, newest first (owner, admin).

    Without their secrets, a page at a time (?limit=, ?cursor=). A member gets a 403.
    """
    return service.list_webhooks(services().runtime, principal(), page_request(args))


@blp.route("/webhooks/<uuid:webhook_id>", methods=["GET"])
@blp.problems(403, 404)
@blp.response(200, Webhook, example=examples.WEBHOOK)
def get_webhook(webhook_id: uuid.UUID) -> WebhookRow:
    """One webhook (owner, admin).

    Without its secret; active says whether events are still sent to it. A member gets a 403; a webhook outside the
    tenant is a 404.
    """
    return service.get(services().runtime, principal(), webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@blp.doc(
    responses={
        "404": refusal(404, examples.problem(404, "not-found", "Not found", f"webhook {examples.WEBHOOK_ID} not found"))
    }
)
@audited("webhook.delete", "webhook", target_arg="webhook_id")
def delete_webhook(webhook_id: uuid.UUID) -> None:
    """Delete a webhook and its delivery log (owner, admin).

    Its deliveries, pending ones included, are deleted with it. A member gets a 403; a webhook outside the tenant is
    a 404. Audited as webhook.delete.
    """
    service.delete(services().runtime, principal(), webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>/deliveries", methods=["GET"])
@blp.problems(403, 404)
@blp.arguments(ListArgs, location="query")
@blp.response(200, DeliveryList, example=examples.DELIVERIES)
def list_deliveries(args: dict[str, Any], webhook_id: uuid.UUID) -> Page[WebhookDelivery]:
    """A webhook's deliveries, newest first (owner, admin).

    One per event sent to it, with its attempts so far, the last answer or error, and when it is tried next. A
    member gets a 403; a webhook outside the tenant is a 404.
    """
    return service.deliveries(services().runtime, principal(), webhook_id, page_request(args))


@blp.route("/webhooks/<uuid:webhook_id>/deliveries/<uuid:delivery_id>/retry", methods=["POST"])
@blp.problems(403, 404)
@blp.response(202, Delivery, example=examples.DELIVERY)
@audited("webhook.retry_delivery", "webhook_delivery", target_arg="delivery_id")
def retry_delivery(webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """Send a delivery again now, with the same webhook-id and a new retry window (owner, admin).

    Takes no body. The delivery is queued to be sent at once (202: the answer does not wait for it), failed or not,
    and retried on failure for another HANGO_WEBHOOK_RETRY_FOR. A member gets a 403; a webhook or delivery outside
    the tenant is a 404. Audited as webhook.retry_delivery.
    """
    return service.retry(services().runtime, principal(), webhook_id, delivery_id)


def _fields(webhook: WebhookRow) -> dict[str, Any]:
    return {name: getattr(webhook, name) for name in Webhook().fields}
