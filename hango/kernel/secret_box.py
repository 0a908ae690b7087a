"""Secrets at rest (webhook secrets, MCP servers' headers): Fernet-encrypted when ``HANGO_WEBHOOK_SECRET_KEYS`` is
set.

A stored value says how it was stored (``fernet:`` or ``plain:``), so configuring keys later still reads secrets
written before, and rotating keys (a new first key, the old ones after it) reads every older secret.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from hango.kernel.errors import ConfigError

_FERNET = "fernet:"
_PLAIN = "plain:"


class SecretBox:
    """Seals secrets for storage and opens them for signing."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        self._fernet = MultiFernet([Fernet(key) for key in keys]) if keys else None

    @property
    def encrypts(self) -> bool:
        """Whether secrets are encrypted at rest."""
        return self._fernet is not None

    def seal(self, secret: str) -> str:
        """What to store for a secret."""
        if self._fernet is None:
            return _PLAIN + secret
        return _FERNET + self._fernet.encrypt(secret.encode()).decode("ascii")

    def open(self, stored: str) -> str:
        """The secret a stored value holds.

        Raises:
            ConfigError: it was encrypted with a key that is no longer configured.
        """
        if stored.startswith(_PLAIN):
            return stored.removeprefix(_PLAIN)
        if self._fernet is None:
            raise ConfigError("a stored secret is encrypted but HANGO_WEBHOOK_SECRET_KEYS is not set")
        try:
            return self._fernet.decrypt(stored.removeprefix(_FERNET).encode("ascii")).decode()
        except InvalidToken as exc:
            raise ConfigError(
                "a stored secret was encrypted with a key missing from HANGO_WEBHOOK_SECRET_KEYS"
            ) from exc
