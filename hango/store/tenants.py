"""Tenants, users and memberships."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.kernel.errors import NotFound
from hango.kernel.models import Membership, Role, Tenant, User
from hango.kernel.pagination import Page, PageRequest, paginate


def create_tenant(session: Session, name: str) -> Tenant:
    """Insert a tenant."""
    tenant = Tenant(id=uuid.uuid4(), name=name)
    session.add(tenant)
    session.flush()
    return tenant


def find_user_by_email(session: Session, email: str) -> User | None:
    """The user with this (normalised) email, in any tenant; used only to reuse an identity."""
    return session.scalar(select(User).where(User.email == email))


def create_user(session: Session, email: str) -> User:
    """Insert a user identity."""
    user = User(id=uuid.uuid4(), email=email)
    session.add(user)
    session.flush()
    return user


def get_or_create_user(session: Session, email: str) -> User:
    """The identity for ``email``, created when new."""
    return find_user_by_email(session, email) or create_user(session, email)


def add_membership(session: Session, tenant_id: uuid.UUID, user: User, role: Role) -> Membership:
    """Give a user a role in a tenant."""
    membership = Membership(id=uuid.uuid4(), tenant_id=tenant_id, user_id=user.id, role=role, user=user)
    session.add(membership)
    session.flush()
    return membership


def find_membership(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Membership | None:
    """A user's membership in the tenant, if any."""
    return session.scalar(select(Membership).where(Membership.tenant_id == tenant_id, Membership.user_id == user_id))


def get_membership(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID) -> Membership:
    """A user's membership in the tenant; :class:`NotFound` when the user is not in it."""
    membership = find_membership(session, tenant_id, user_id)
    if membership is None:
        raise NotFound(f"user {user_id} not found")
    return membership


def list_members(session: Session, tenant_id: uuid.UUID, page: PageRequest) -> Page[Membership]:
    """The tenant's memberships, oldest first."""
    statement = select(Membership).where(Membership.tenant_id == tenant_id)
    return paginate(session, statement, [Membership.created_at, Membership.id], page)


def get_tenant(session: Session, tenant_id: uuid.UUID, *, lock: bool = False) -> Tenant:
    """A tenant by id (locked for update when ``lock``); :class:`NotFound` once it is gone."""
    tenant = session.get(Tenant, tenant_id, with_for_update=lock)
    if tenant is None:
        raise NotFound("the tenant no longer exists")
    return tenant


def allows_self_approval(session: Session, tenant_id: uuid.UUID) -> bool:
    """Whether the tenant lets a run's creator decide that run's approvals."""
    return bool(session.scalar(select(Tenant.self_approval).where(Tenant.id == tenant_id)))
