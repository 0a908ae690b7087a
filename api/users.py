"""Users and tokens."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields, validate

from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, NoQuery, list_of, page_request, refusal
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
@blp.arguments(UserCreate, example=examples.USER_CREATE)
@blp.response(201, UserCreated, example=examples.USER_CREATED)
@audited("user.create", "user")
def create_user(body: dict[str, Any]) -> dict[str, Any]:
    """Create a user of the tenant with a role and a first token (owner, admin).

    An owner may create owners, admins and members; an admin only members (creating an owner or an admin is a 403),
    and a member nobody. The answer carries the user's first bearer token, shown only here: hand it to the user. An
    email already used in another tenant makes the same person a user of this one too; one already in this tenant
    is a 409. Audited as user.create.
    """
    created = tenancy.create_member(services().db, principal(), body["email"], body["role"])
    membership = created.membership
    audit_target("user", membership.user_id, role=membership.role)
    return {"id": membership.user_id, "email": membership.user.email, "role": membership.role, "token": created.token}


@blp.route("/me", methods=["GET"])
@blp.arguments(NoQuery, location="query")
@blp.response(200, Me, example=examples.ME)
def me(_: dict[str, Any]) -> Any:
    """The token's user: who the caller is, in which tenant, with which role (a page offers what the role allows).

    Anyone with a valid token may ask. A client reads the role here to offer only what it allows: owners and admins
    decide approvals and manage the tenant, members start runs and follow their own.
    """
    return tenancy.membership_of(services().db, principal())


@blp.route("/users", methods=["GET"])
@blp.problems(403)
@blp.arguments(ListArgs, location="query")
@blp.response(200, UserList, example=examples.USERS)
def list_users(args: dict[str, Any]) -> Page[Any]:
    """The tenant's users (owner, admin).

    Every user of the tenant with their role, in the order they joined, a page at a time (?limit=, ?cursor=). A
    member gets a 403.
    """
    return tenancy.list_members(services().db, principal(), page_request(args))


@blp.route("/users/<uuid:user_id>/tokens", methods=["POST"])
@blp.problems(403, 404)
@blp.response(201, TokenCreated, example=examples.TOKEN_CREATED)
@audited("token.create", "user", target_arg="user_id")
def create_token(user_id: uuid.UUID) -> dict[str, Any]:
    """Issue another token for a user (owner, admin, or that user).

    Takes no body. Anyone may issue tokens for themself; an owner for anyone of the tenant; an admin for members only
    (another admin or an owner: 403); a member for nobody else (403). A user outside the tenant is a 404. The token
    is shown only in this answer; its id is what DELETE /v1/tokens/{token_id} takes. Audited as token.create.
    """
    issued = tenancy.issue_token(services().db, principal(), user_id)
    audit_target("api_token", issued.record.id, user_id=str(user_id))
    return {"id": issued.record.id, "token": issued.token}


@blp.route("/tokens/<uuid:token_id>", methods=["DELETE"])
@blp.problems(403, 404)
@blp.response(204)
@blp.doc(
    responses={
        "403": refusal(
            403,
            examples.problem(403, "forbidden", "Forbidden", "an admin may manage only members' tokens, not an owner's"),
        )
    }
)
@audited("token.revoke", "api_token", target_arg="token_id")
def revoke_token(token_id: uuid.UUID) -> None:
    """Revoke a token (owner, admin, or the token's user); it is refused at once.

    The same people as for issuing one: the token's own user, an owner, or an admin for a member's token (another's:
    403). Every request with the token is a 401 from then on, and the event streams it holds close at their next
    keep-alive. Revoking a revoked token again is a 204; a token outside the tenant is a 404. Audited as token.revoke.
    """
    tenancy.revoke_token(services().db, principal(), token_id)
