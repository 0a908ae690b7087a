"""Webhooks: notifications to reviewers (owner, admin)."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlsplit

import marshmallow as ma
from marshmallow import fields, validate

from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request
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
            "description": "pending (to be sent or retried), delivered (a 2xx answer) or failed (retries exhausted)"
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
@blp.arguments(WebhookCreate)
@blp.response(201, WebhookCreated)
@audited("webhook.create", "webhook")
def create_webhook(body: dict[str, Any]) -> dict[str, Any]:
    """Create a webhook (owner, admin); its signing secret is shown only in this response."""
    created = service.create(services().runtime, principal(), body["url"], body["events"], body["description"])
    webhook = created.webhook
    # Never the secret, nor the whole URL (its path or query may hold a credential of the receiver).
    audit_target("webhook", webhook.id, events=webhook.events, host=urlsplit(webhook.url).hostname)
    return {**_fields(webhook), "secret": created.secret}


@blp.route("/webhooks", methods=["GET"])
@blp.problems(403)
@blp.arguments(ListArgs, location="query")
@blp.response(200, WebhookList)
def list_webhooks(args: dict[str, Any]) -> Page[WebhookRow]:
    """The tenant's webhooks, newest first (owner, admin)."""
    return service.list_webhooks(services().runtime, principal(), page_request(args))


@blp.route("/webhooks/<uuid:webhook_id>", methods=["GET"])
@blp.problems(403, 404)
@blp.response(200, Webhook)
def get_webhook(webhook_id: uuid.UUID) -> WebhookRow:
    """One webhook (owner, admin)."""
    return service.get(services().runtime, principal(), webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@audited("webhook.delete", "webhook", target_arg="webhook_id")
def delete_webhook(webhook_id: uuid.UUID) -> None:
    """Delete a webhook and its delivery log (owner, admin)."""
    service.delete(services().runtime, principal(), webhook_id)


@blp.route("/webhooks/<uuid:webhook_id>/deliveries", methods=["GET"])
@blp.problems(403, 404)
@blp.arguments(ListArgs, location="query")
@blp.response(200, DeliveryList)
def list_deliveries(args: dict[str, Any], webhook_id: uuid.UUID) -> Page[WebhookDelivery]:
    """A webhook's deliveries, newest first (owner, admin)."""
    return service.deliveries(services().runtime, principal(), webhook_id, page_request(args))


@blp.route("/webhooks/<uuid:webhook_id>/deliveries/<uuid:delivery_id>/retry", methods=["POST"])
@blp.problems(403, 404)
@blp.response(202, Delivery)
@audited("webhook.retry_delivery", "webhook_delivery", target_arg="delivery_id")
def retry_delivery(webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDelivery:
    """Send a delivery again now, with the same webhook-id and a new retry window (owner, admin)."""
    return service.retry(services().runtime, principal(), webhook_id, delivery_id)


def _fields(webhook: WebhookRow) -> dict[str, Any]:
    return {name: getattr(webhook, name) for name in Webhook().fields}
