"""Standard Webhooks signatures (https://www.standardwebhooks.com): HMAC-SHA256 over ``{id}.{timestamp}.{body}``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix of every secret, not a secret)


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` and the base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def secret_bytes(secret: str) -> bytes:
    """The key a secret stands for: its base64 part, decoded."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,`` and the base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The headers of one delivery attempt."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, message_id, timestamp, body),
    }


def verify(secret: str, message_id: str, timestamp: int, body: bytes, signatures: str) -> bool:
    """Whether one of the space-separated ``v1,`` signatures of a header is this body's (constant time)."""
    expected = signature(secret, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, given) for given in signatures.split())
