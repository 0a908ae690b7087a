"""Standing approvals (grants): calls a rule would suspend that run without a human until they expire (owner,
admin)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request, refusal
from hango.kernel.models import Grant as GrantRow
from hango.services import grants as service
from hango.services.grants import GrantFilter, GrantSpec

blp = Blueprint("grants", __name__, url_prefix="/v1", description="Standing approvals of tool calls (grants)")

WHEN = "argument matchers as in an interrupt rule's `when` (equals, prefix, size_over); null: every call"


class GrantCreate(ma.Schema):
    agent_id = fields.UUID(
        required=True, metadata={"description": "the agent whose calls the grant approves (404 if not the tenant's)"}
    )
    tool_name = fields.String(
        required=True,
        validate=validate.Length(min=1, max=200),
        metadata={
            "description": "the tool whose calls it approves; a rule of the agent (or of one of its subagents) "
            "must interrupt it and let the caller approve alone (400 otherwise)"
        },
    )
    when = fields.Dict(keys=fields.String(), load_default=None, allow_none=True, metadata={"description": WHEN})
    ttl = fields.String(
        required=True,
        validate=validate.Length(min=1, max=50),
        metadata={"description": "how long the grant lasts, e.g. 1h (at most HANGO_GRANT_MAX_TTL)"},
    )
    run_id = fields.UUID(load_default=None, allow_none=True, metadata={"description": "only this run of the agent"})


class Grant(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the grant's id"})
    agent_id = fields.UUID(required=True, metadata={"description": "the agent whose calls it approves"})
    tool_name = fields.String(required=True, metadata={"description": "the tool whose calls it approves"})
    when = fields.Dict(allow_none=True, required=True, metadata={"description": WHEN})
    exact = fields.Boolean(
        required=True,
        metadata={
            "description": "made by a decision's `remember` without `when`: `when` pins every argument of the call "
            "approved, the tool's defaults included, and a call with any other argument is not covered"
        },
    )
    run_id = fields.UUID(
        allow_none=True, required=True, metadata={"description": "the one run it applies to; null: every run"}
    )
    created_by = fields.UUID(
        required=True, metadata={"description": "who created it; the calls it approves are decided in their name"}
    )
    created_at = fields.DateTime(required=True, metadata={"description": "when it was created"})
    expires_at = fields.DateTime(required=True, metadata={"description": "created_at plus its ttl: it ends then"})
    revoked_at = fields.DateTime(
        allow_none=True, required=True, metadata={"description": "when it was revoked; null while it is not"}
    )
    revoked_by = fields.UUID(allow_none=True, required=True, metadata={"description": "who revoked it; null if nobody"})
    active = fields.Boolean(required=True, metadata={"description": "neither revoked nor expired"})


class GrantArgs(ListArgs):
    agent_id = fields.UUID(load_default=None, metadata={"description": "only this agent's grants"})
    active = fields.Boolean(
        load_default=None, metadata={"description": "true: only active grants; false: only revoked or expired ones"}
    )


GrantList = list_of(Grant, "GrantList")


@blp.route("/grants", methods=["POST"])
@blp.problems(400, 403, 404, 409)
@blp.arguments(GrantCreate, example=examples.GRANT_CREATE)
@blp.response(201, Grant, example=examples.GRANT)
@audited("grant.create", "grant")
def create_grant(body: dict[str, Any]) -> dict[str, Any]:
    """Approve in advance the calls of an agent's tool that a rule would hold (owner, admin).

    Until ttl passes or it is revoked, a call of the tool that a rule would suspend and that `when` matches runs
    at once, recorded as an approval decided by the grant's creator (with grant_id) and audited as
    approval.auto_approve. A grant applies only where its creator could approve the call alone: never under a rule
    with approvals_required, one that does not allow approve, or one naming other reviewers. A grant that could
    never apply is a 400, as is a run_id of another agent. A member gets a 403; an
    agent or run outside the tenant is a 404; a tenant with HANGO_MAX_GRANTS_PER_TENANT active grants a 409.
    Audited as grant.create.
    """
    grant = service.create(services().runtime, principal(), GrantSpec(**body))
    audit_target("grant", grant.id, **service.audit_detail(grant))
    return grant_json(grant)


@blp.route("/grants", methods=["GET"])
@blp.problems(403)
@blp.arguments(GrantArgs, location="query")
@blp.response(200, GrantList, example=examples.GRANTS)
def list_grants(args: dict[str, Any]) -> dict[str, Any]:
    """The tenant's grants, newest first (owner, admin); ``?agent_id=`` and ``?active=`` filter.

    Active, expired and revoked grants alike unless ?active= says otherwise, a page at a time. A member gets a 403.
    """
    filters = GrantFilter(agent_id=args["agent_id"], active=args["active"])
    page = service.list_grants(services().runtime, principal(), filters, page_request(args))
    return {"items": [grant_json(grant) for grant in page.items], "next_cursor": page.next_cursor}


@blp.route("/grants/<uuid:grant_id>", methods=["GET"])
@blp.problems(403, 404)
@blp.response(200, Grant, example=examples.GRANT)
def get_grant(grant_id: uuid.UUID) -> dict[str, Any]:
    """One grant (owner, admin).

    In any state; active says whether it still applies. A member gets a 403; a grant outside the tenant is a 404.
    """
    return grant_json(service.get(services().runtime, principal(), grant_id))


@blp.route("/grants/<uuid:grant_id>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@blp.doc(
    responses={
        "403": refusal(
            403, examples.problem(403, "forbidden", "Forbidden", "this action needs the owner or admin role")
        )
    }
)
@audited("grant.revoke", "grant", target_arg="grant_id")
def revoke_grant(grant_id: uuid.UUID) -> None:
    """Revoke a grant at once (owner, admin); revoking a revoked grant again is a 204 that changes nothing.

    From then on the calls it covered wait for a reviewer again; the grant stays listed, with revoked_at and
    revoked_by. A member gets a 403; a grant outside the tenant is a 404. Audited as grant.revoke.
    """
    grant = service.revoke(services().runtime, principal(), grant_id)
    audit_target("grant", grant.id, **service.audit_detail(grant), revoked_by=str(grant.revoked_by))


def grant_json(grant: GrantRow) -> dict[str, Any]:
    """The API shape of a grant."""
    shown = {name: getattr(grant, name) for name in Grant().fields if name != "active"}
    return {**shown, "active": service.is_active(grant, datetime.now(UTC))}
