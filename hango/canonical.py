"""Digests of JSON values over their RFC 8785 (JCS) canonical form: the same value, however its keys are ordered or
its numbers spelled, has one digest.

A decision carries the digest of the arguments its reviewer saw (``arguments_sha256``), so a decision made on a
stale view of a call is refused instead of applied to different arguments.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

# JCS serialises numbers as ECMAScript doubles; integers beyond their exact range are refused by the library, so
# they are first made the double a JavaScript reader would see (and written as text past the double's range).
_EXACT = 2**53


def sha256_hex(value: Any) -> str:
    """Hex SHA-256 of ``value``'s canonical JSON."""
    return hashlib.sha256(rfc8785.dumps(_in_domain(value))).hexdigest()


def _in_domain(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str | float):
        return value
    if isinstance(value, int):
        if -_EXACT < value < _EXACT:
            return value
        try:
            return float(value)
        except OverflowError:
            return str(value)
    if isinstance(value, dict):
        return {key: _in_domain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_in_domain(item) for item in value]
    return value
