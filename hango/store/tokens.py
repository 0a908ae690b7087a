"""API tokens, stored hashed."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import cast

from sqlalchemy import ColumnElement, Row, Select, bindparam, select
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import ApiToken, Membership, Role


def create_token(session: Session, tenant_id: uuid.UUID, user_id: uuid.UUID, token_hash: str) -> ApiToken:
    """Insert a token digest for a user in a tenant."""
    token = ApiToken(id=uuid.uuid4(), tenant_id=tenant_id, user_id=user_id, token_hash=token_hash)
    session.add(token)
    session.flush()
    return token


def get_token(session: Session, tenant_id: uuid.UUID, token_id: uuid.UUID) -> ApiToken:
    """A token of the tenant; :class:`NotFound` for another tenant's or an unknown one."""
    token = session.scalar(select(ApiToken).where(ApiToken.tenant_id == tenant_id, ApiToken.id == token_id))
    if token is None:
        raise NotFound(f"token {token_id} not found")
    return token


def revoke_token(token: ApiToken) -> None:
    """Mark a token revoked; it stops working at once (authentication reads it on every request)."""
    if token.revoked_at is None:
        token.revoked_at = datetime.now(UTC)


def _live(which: ColumnElement[bool]) -> Select[uuid.UUID, uuid.UUID, uuid.UUID, str]:
    # The join on the membership is what makes a removed user's tokens stop working.
    return (
        select(ApiToken.id, ApiToken.tenant_id, ApiToken.user_id, Membership.role)
        .join(
            Membership,
            (Membership.tenant_id == ApiToken.tenant_id) & (Membership.user_id == ApiToken.user_id),
        )
        .where(which, ApiToken.revoked_at.is_(None))
    )


# Built once: every request authenticates.
_BY_HASH = _live(ApiToken.token_hash == bindparam("token_hash"))
_BY_ID = _live(ApiToken.id == bindparam("token_id"))


def principal_for_hash(session: Session, token_hash: str) -> Principal | None:
    """The principal a live token stands for, or ``None`` for an unknown or revoked token."""
    return _principal(session.execute(_BY_HASH, {"token_hash": token_hash}).one_or_none())


def principal_for_token(session: Session, token_id: uuid.UUID) -> Principal | None:
    """The principal a token stands for now, or ``None`` once it is revoked or its user left the tenant."""
    return _principal(session.execute(_BY_ID, {"token_id": token_id}).one_or_none())


def _principal(row: Row[uuid.UUID, uuid.UUID, uuid.UUID, str] | None) -> Principal | None:
    if row is None:
        return None
    token_id, tenant_id, user_id, role = row
    return Principal(tenant_id=tenant_id, user_id=user_id, role=cast(Role, role), token_id=token_id)
