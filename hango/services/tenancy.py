"""Tenancy services: tenants, users, tokens and authentication. Each function owns its transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from marshmallow import ValidationError, validate
from sqlalchemy.exc import IntegrityError

from hango.kernel.auth import Principal, hash_token, new_token
from hango.kernel.errors import Conflict, Forbidden, InvalidInput, Unauthorized
from hango.kernel.models import ApiToken, Membership, Role
from hango.kernel.pagination import Page, PageRequest
from hango.platform.db import Database
from hango.store import tenants as tenant_store
from hango.store import tokens as token_store


@dataclass(frozen=True)
class NewTenant:
    """What bootstrapping a tenant returns; the token is shown once and never stored in clear."""

    tenant_id: uuid.UUID
    user_id: uuid.UUID
    token: str


@dataclass(frozen=True)
class NewMember:
    """A membership just created, with the user's first token."""

    membership: Membership
    token: str


@dataclass(frozen=True)
class NewToken:
    """A token just issued; ``token`` is its only clear-text appearance."""

    record: ApiToken
    token: str


def normalise_email(email: str) -> str:
    """Emails identify users case-insensitively."""
    return email.strip().lower()


def _check_bootstrap(name: str, owner_email: str) -> None:
    if not name.strip():
        raise InvalidInput.field("name", "must not be empty")
    try:
        validate.Email()(owner_email.strip())
    except ValidationError as exc:
        raise InvalidInput.field("owner_email", "is not an email address") from exc


def create_tenant(db: Database, name: str, owner_email: str) -> NewTenant:
    """Create a tenant, its owner and the owner's first token (the CLI bootstrap)."""
    _check_bootstrap(name, owner_email)
    token = new_token()
    with db.transaction() as session:
        tenant = tenant_store.create_tenant(session, name.strip())
        user = tenant_store.get_or_create_user(session, normalise_email(owner_email))
        tenant_store.add_membership(session, tenant.id, user, "owner")
        token_store.create_token(session, tenant.id, user.id, hash_token(token))
    return NewTenant(tenant_id=tenant.id, user_id=user.id, token=token)


def authenticate(db: Database, token: str) -> Principal:
    """The principal behind a bearer token; :class:`Unauthorized` for an unknown or revoked one."""
    with db.read() as session:
        principal = token_store.principal_for_hash(session, hash_token(token))
    if principal is None:
        raise Unauthorized("the bearer token is unknown or revoked")
    return principal


def require_manager(principal: Principal) -> None:
    """Only owners and admins may manage the tenant."""
    if not principal.is_manager:
        raise Forbidden("this action needs the owner or admin role")


def require_token_authority(principal: Principal, target: Membership) -> None:
    """Who may mint or revoke a user's tokens: that user, an owner, or an admin for a member.

    A token is the user's whole authority, so an admin who could mint an owner's token would be an owner.
    """
    if principal.user_id == target.user_id or principal.role == "owner":
        return
    if principal.role == "admin" and target.role == "member":
        return
    if principal.role == "admin":
        raise Forbidden(f"an admin may manage only members' tokens, not an {target.role}'s")
    raise Forbidden("members may manage only their own tokens")


def create_member(db: Database, principal: Principal, email: str, role: Role) -> NewMember:
    """Add a user to the caller's tenant with a role and a first token.

    Only an owner may create an owner or an admin. An email already used in another tenant reuses that
    identity; one already in this tenant is a conflict.
    """
    require_manager(principal)
    if role != "member" and principal.role != "owner":
        raise Forbidden(f"only an owner may create a user with the {role} role")
    token = new_token()
    try:
        with db.transaction() as session:
            user = tenant_store.get_or_create_user(session, normalise_email(email))
            if tenant_store.find_membership(session, principal.tenant_id, user.id) is not None:
                raise Conflict(f"{user.email} is already a user of this tenant")
            membership = tenant_store.add_membership(session, principal.tenant_id, user, role)
            token_store.create_token(session, principal.tenant_id, user.id, hash_token(token))
    except IntegrityError as exc:
        # Two requests creating the same user at once: the unique constraints pick one winner.
        raise Conflict(f"{normalise_email(email)} was created by a concurrent request") from exc
    return NewMember(membership=membership, token=token)


def membership_of(db: Database, principal: Principal) -> Membership:
    """The caller's own membership (with its user): anyone may read who they are."""
    with db.transaction() as session:
        return tenant_store.get_membership(session, principal.tenant_id, principal.user_id)


def list_members(db: Database, principal: Principal, page: PageRequest) -> Page[Membership]:
    """The tenant's users with their roles (owners and admins only)."""
    require_manager(principal)
    with db.transaction() as session:
        return tenant_store.list_members(session, principal.tenant_id, page)


def issue_token(db: Database, principal: Principal, user_id: uuid.UUID) -> NewToken:
    """A new token for a user of the tenant (owners, admins, or that user)."""
    token = new_token()
    with db.transaction() as session:
        target = tenant_store.get_membership(session, principal.tenant_id, user_id)
        require_token_authority(principal, target)
        record = token_store.create_token(session, principal.tenant_id, user_id, hash_token(token))
    return NewToken(record=record, token=token)


def revoke_token(db: Database, principal: Principal, token_id: uuid.UUID) -> ApiToken:
    """Revoke a token of the tenant (owners, admins, or the token's user); idempotent."""
    with db.transaction() as session:
        record = token_store.get_token(session, principal.tenant_id, token_id)
        require_token_authority(principal, tenant_store.get_membership(session, principal.tenant_id, record.user_id))
        token_store.revoke_token(record)
    return record


@dataclass(frozen=True)
class TenantPolicy:
    """The tenant's settings that govern approvals."""

    id: uuid.UUID
    name: str
    self_approval: bool


def tenant_policy(db: Database, principal: Principal) -> TenantPolicy:
    """The caller's tenant and its approval settings (everyone in the tenant may read them)."""
    with db.read() as session:
        tenant = tenant_store.get_tenant(session, principal.tenant_id)
        return TenantPolicy(tenant.id, tenant.name, tenant.self_approval)


def set_self_approval(db: Database, principal: Principal, allowed: bool) -> TenantPolicy:
    """Whether a run's creator may decide that run's approvals (owner only).

    Raises:
        Forbidden: the caller is not an owner.
    """
    if principal.role != "owner":
        raise Forbidden("only an owner may change the tenant's approval policy")
    with db.transaction() as session:
        tenant = tenant_store.get_tenant(session, principal.tenant_id, lock=True)
        tenant.self_approval = allowed
        return TenantPolicy(tenant.id, tenant.name, tenant.self_approval)
