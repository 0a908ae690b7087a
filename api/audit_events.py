"""The tenant's audit trail."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import fields

from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request
from hango.kernel.pagination import Page
from hango.services import audit
from hango.store.audit import AuditFilter

blp = Blueprint("audit", __name__, url_prefix="/v1", description="Who did what, with what outcome")


class AuditArgs(ListArgs):
    action = fields.String(load_default=None)
    target_kind = fields.String(load_default=None)
    target_id = fields.String(load_default=None)


class AuditEvent(ma.Schema):
    id = fields.UUID(required=True)
    actor_kind = fields.String(required=True)
    actor_id = fields.UUID(allow_none=True, required=True)
    action = fields.String(required=True)
    target_kind = fields.String(required=True)
    target_id = fields.String(allow_none=True, required=True)
    outcome = fields.String(required=True)
    detail = fields.Dict(required=True)
    trace_id = fields.String(allow_none=True, required=True)
    created_at = fields.DateTime(required=True)


AuditEventList = list_of(AuditEvent, "AuditEventList")


@blp.route("/audit-events", methods=["GET"])
@blp.problems(403)
@blp.arguments(AuditArgs, location="query")
@blp.response(200, AuditEventList)
def list_audit_events(args: dict[str, Any]) -> Page[Any]:
    """The tenant's audit rows, newest first (owner, admin)."""
    filters = AuditFilter(action=args["action"], target_kind=args["target_kind"], target_id=args["target_id"])
    return audit.list_events(services().db, principal(), filters, page_request(args))
