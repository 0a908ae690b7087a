"""The caller's tenant and its approval policy: ``GET`` for everyone in it, ``PUT`` for an owner (audited)."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import fields

from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import JsonBoolean, NoQuery
from hango.services import tenancy

blp = Blueprint("tenant", __name__, url_prefix="/v1", description="The tenant's settings")


class TenantSettings(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the tenant's id"})
    name = fields.String(required=True, metadata={"description": "the tenant's name, given when it was created"})
    self_approval = fields.Boolean(
        required=True, metadata={"description": "false: a run's creator may never decide that run's approvals"}
    )


class TenantUpdate(ma.Schema):
    self_approval = JsonBoolean(
        required=True,
        metadata={
            "description": "true: a run's creator who is an owner or admin may decide that run's approvals; false: "
            "never"
        },
    )


@blp.route("/tenant", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.response(200, TenantSettings, example=examples.TENANT)
def get_tenant(args: dict[str, Any]) -> tenancy.TenantPolicy:
    """The tenant's settings (everyone in the tenant).

    The tenant of the caller's token: its id, its name and its approval policy.
    """
    return tenancy.tenant_policy(services().db, principal())


@blp.route("/tenant", methods=["PUT"])
@blp.problems(403)
@blp.arguments(TenantUpdate, example=examples.TENANT_UPDATE)
@blp.response(200, TenantSettings, example=examples.TENANT)
@audited("tenant.update", "tenant")
def update_tenant(body: dict[str, Any]) -> tenancy.TenantPolicy:
    """Change the approval policy (owner only).

    ``self_approval`` false forbids a run's creator, even an owner or admin, to decide that run's approvals; true
    allows it again. It applies to the next decisions, of runs old and new. An admin or a member gets a 403. The
    answer is the settings as saved. Audited as tenant.update.
    """
    audit_target("tenant", principal().tenant_id, self_approval=body["self_approval"])
    return tenancy.set_self_approval(services().db, principal(), body["self_approval"])
