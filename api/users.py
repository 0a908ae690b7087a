"""Users and tokens."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, NoQuery, list_of, page_request
from hango.kernel.models import ROLES
from hango.kernel.pagination import Page
from hango.services import tenancy

blp = Blueprint("users", __name__, url_prefix="/v1", description="Users of the tenant and their API tokens")


class UserCreate(ma.Schema):
    email = fields.Email(
        required=True,
        validate=validate.Length(max=320),
        metadata={
            "description": "the user's email address, at most 320 characters, compared without regard to case; an "
            "email already known in another tenant joins the same person to this one"
        },
    )
    role = fields.String(
        required=True,
        validate=validate.OneOf(ROLES),
        metadata={"description": "the new user's role; only an owner may create an owner or an admin"},
    )


class User(ma.Schema):
    id = fields.UUID(attribute="user_id", required=True, metadata={"description": "the user's id"})
    email = fields.String(
        attribute="user.email", required=True, metadata={"description": "the user's email address, lowercased"}
    )
    role = fields.String(required=True, metadata={"description": "owner, admin or member, in this tenant"})
    created_at = fields.DateTime(required=True, metadata={"description": "when the user joined the tenant"})


class UserCreated(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the new user's id"})
    email = fields.String(required=True, metadata={"description": "the user's email address, lowercased"})
    role = fields.String(required=True, metadata={"description": "the role given in the request"})
    token = fields.String(
        required=True,
        metadata={
            "description": "the user's first bearer token (hango_…); shown only in this response, the server keeps "
            "only its hash"
        },
    )


class TokenCreated(ma.Schema):
    id = fields.UUID(required=True, metadata={"description": "the token's id, for DELETE /v1/tokens/{token_id}"})
    token = fields.String(
        required=True,
        metadata={"description": "the bearer token (hango_…); shown only in this response, the server keeps its hash"},
    )


class Me(ma.Schema):
    user_id = fields.UUID(required=True, metadata={"description": "the token's user"})
    email = fields.String(
        attribute="user.email", required=True, metadata={"description": "the user's email address, lowercased"}
    )
    tenant_id = fields.UUID(required=True, metadata={"description": "the tenant every request of the token acts in"})
    role = fields.String(
        required=True,
        validate=validate.OneOf(ROLES),
        metadata={"description": "owner and admin decide approvals; a member sees their own runs' read-only"},
    )


UserList = list_of(User, "UserList")


@blp.route("/users", methods=["POST"])
@blp.problems(403, 409)
@blp.arguments(UserCreate)
@blp.response(201, UserCreated)
@audited("user.create", "user")
def create_user(body: dict[str, Any]) -> dict[str, Any]:
    """Create a user of the tenant with a role and a first token (owner, admin)."""
    created = tenancy.create_member(services().db, principal(), body["email"], body["role"])
    membership = created.membership
    audit_target("user", membership.user_id, role=membership.role)
    return {"id": membership.user_id, "email": membership.user.email, "role": membership.role, "token": created.token}


@blp.route("/me", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.response(200, Me)
def me(_: dict[str, Any]) -> Any:
    """The token's user: who the caller is, in which tenant, with which role (a page offers what the role allows)."""
    return tenancy.membership_of(services().db, principal())


@blp.route("/users", methods=["GET"])
@blp.problems(403)
@blp.arguments(ListArgs, location="query")
@blp.response(200, UserList)
def list_users(args: dict[str, Any]) -> Page[Any]:
    """The tenant's users (owner, admin)."""
    return tenancy.list_members(services().db, principal(), page_request(args))


@blp.route("/users/<uuid:user_id>/tokens", methods=["POST"])
@blp.problems(403, 404)
@blp.response(201, TokenCreated)
@audited("token.create", "user", target_arg="user_id")
def create_token(user_id: uuid.UUID) -> dict[str, Any]:
    """Issue another token for a user (owner, admin, or that user)."""
    issued = tenancy.issue_token(services().db, principal(), user_id)
    audit_target("api_token", issued.record.id, user_id=str(user_id))
    return {"id": issued.record.id, "token": issued.token}


@blp.route("/tokens/<uuid:token_id>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@audited("token.revoke", "api_token", target_arg="token_id")
def revoke_token(token_id: uuid.UUID) -> None:
    """Revoke a token (owner, admin, or the token's user); it is refused at once."""
    tenancy.revoke_token(services().db, principal(), token_id)
