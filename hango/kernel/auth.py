"""Principals and bearer tokens.

Tokens are 256 random bits, shown once and stored only as a SHA-256 digest. A slow password hash buys nothing
for secrets of that entropy, while a fast digest lets every request look its token up by an indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from hango.kernel.models import Role

TOKEN_PREFIX = "hango_"  # noqa: S105 (a public marker, not a secret)


@dataclass(frozen=True)
class Principal:
    """Who is calling: one user acting in one tenant with one role."""

    tenant_id: uuid.UUID
    user_id: uuid.UUID
    role: Role
    token_id: uuid.UUID | None = None

    @property
    def is_manager(self) -> bool:
        """Owners and admins manage the tenant; members only use it."""
        return self.role in ("owner", "admin")


def new_token() -> str:
    """A fresh bearer token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The digest under which a token is stored and looked up."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
