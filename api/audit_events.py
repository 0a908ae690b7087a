"""The tenant's audit trail."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import fields

from hango.api import examples
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request
from hango.kernel.pagination import Page
from hango.services import audit
from hango.store.audit import AuditFilter

blp = Blueprint("audit", __name__, url_prefix="/v1", description="Who did what, with what outcome")


class AuditArgs(ListArgs):
    action = fields.String(load_default=None, metadata={"description": "only rows of this action, e.g. run.create"})
    target_kind = fields.String(load_default=None, metadata={"description": "only rows about this kind of target"})
    target_id = fields.String(load_default=None, metadata={"description": "only rows about this target id"})


class AuditEvent(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the row's id"})
    actor_kind = fields.String(
        required=True, metadata={"description": "user (a request) or system (the server itself, e.g. an expiry)"}
    )
    actor_id = fields.UUID(
        allow_none=True, required=True, metadata={"description": "the acting user; null for the system or no user"}
    )
    action = fields.String(
        required=True, metadata={"description": "what was done or attempted, e.g. agent.create or approval.decide"}
    )
    target_kind = fields.String(
        required=True, metadata={"description": "the kind of resource acted on, e.g. run or pending_approval"}
    )
    target_id = fields.String(
        allow_none=True, required=True, metadata={"description": "the resource's id; null when there is none yet"}
    )
    outcome = fields.String(
        required=True,
        metadata={"description": "success, denied (a 401 or 403) or error (any other refusal or failure)"},
    )
    detail = fields.Dict(
        required=True,
        metadata={"description": "facts of the action by name; never secrets, tool arguments or messages"},
    )
    trace_id = fields.String(
        allow_none=True, required=True, metadata={"description": "the request's trace id, when it was traced"}
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when the row was written"})


AuditEventList = list_of(AuditEvent, "AuditEventList")


@blp.route("/audit-events", methods=["GET"])
@blp.problems(403)
@blp.arguments(AuditArgs, location="query")
@blp.response(200, AuditEventList, example=examples.AUDIT_EVENTS)
def list_audit_events(args: dict[str, Any]) -> Page[Any]:
    """The tenant's audit rows, newest first (owner, admin).

    One row per audited action, refused attempts included (outcome denied or error): who acted, on what, with
    which outcome, and the facts that matter, never secrets, tool arguments or messages. ?action=, ?target_kind=
    and ?target_id= keep the rows equal to each value given. A member gets a 403.
    """
    filters = AuditFilter(action=args["action"], target_kind=args["target_kind"], target_id=args["target_id"])
    return audit.list_events(services().db, principal(), filters, page_request(args))
