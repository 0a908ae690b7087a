"""One canonical JSON form per value, and digests over it: the same value, however its keys are ordered or its
strings escaped, has one form; two different values never share one.

A decision carries the digest of the arguments its reviewer saw (``arguments_sha256``), so a decision made on a
stale or lossy view of a call is refused instead of applied to different arguments. The digest is computed over
the arguments exactly as the tool will receive them (the Python values read back from PostgreSQL's ``jsonb``).

The form is RFC 8785 (the JSON Canonicalization Scheme: keys sorted by UTF-16 code units, no whitespace, strings
minimally escaped, floats in ECMAScript's shortest form) with two changes that keep it injective over the values a
tool can receive, where RFC 8785, built on IEEE doubles, is not:

- An integer is written with every digit, whatever its size (``9007199254740993``, ``10**400``). RFC 8785 would
  need it as a double, where ``2**53 + 1`` and ``2**53`` are the same number.
- A float with an integral value keeps a ``.0`` (``1.0``, ``1e+21`` keeps its exponent), so the integer ``1`` and
  the float ``1.0``, which a Python tool tells apart, have different forms. RFC 8785 writes both as ``1``.

For JSON without integers beyond 2**53 and without integral floats, the form is RFC 8785's byte for byte.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import rfc8785

__all__ = ["CanonicalizationError", "canonical_json", "sha256_hex"]

CanonicalizationError = rfc8785.CanonicalizationError


def sha256_hex(value: Any) -> str:
    """Hex SHA-256 of ``value``'s canonical JSON."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def canonical_json(value: Any) -> bytes:
    """``value``'s canonical JSON, UTF-8 encoded.

    Raises:
        CanonicalizationError: a float that is not finite, a string that is not valid Unicode, or a value JSON
            cannot hold (a set, an object key that is not a string).
    """
    parts: list[bytes] = []
    _write(value, parts.append)
    return b"".join(parts)


def _write(value: Any, out: Callable[[bytes], Any]) -> None:
    if value is None or isinstance(value, bool | str):
        out(rfc8785.dumps(value))
    elif isinstance(value, int):
        out(_integer(value))
    elif isinstance(value, float):
        out(_float(value))
    elif isinstance(value, Mapping):
        _write_object(value, out)
    elif isinstance(value, list | tuple):
        out(b"[")
        for index, item in enumerate(value):
            if index:
                out(b",")
            _write(item, out)
        out(b"]")
    else:
        raise CanonicalizationError(f"a {type(value).__name__} is not a JSON value")


def _write_object(value: Mapping[Any, Any], out: Callable[[bytes], Any]) -> None:
    if not all(isinstance(key, str) for key in value):
        raise CanonicalizationError("object keys must be strings")
    out(b"{")
    # RFC 8785 3.2.3: members sorted by their names' UTF-16 code units.
    for index, key in enumerate(sorted(value, key=lambda name: name.encode("utf-16-be"))):
        if index:
            out(b",")
        out(rfc8785.dumps(key))
        out(b":")
        _write(value[key], out)
    out(b"}")


def _integer(value: int) -> bytes:
    try:
        return str(value).encode()
    except ValueError as exc:  # past Python's digit limit for str(int); json.loads refuses such numbers too
        raise CanonicalizationError("an integer with too many digits") from exc


def _float(value: float) -> bytes:
    if not math.isfinite(value):
        raise CanonicalizationError(f"{value} is not a JSON number")
    written = rfc8785.dumps(value)
    # ECMAScript writes an integral double without a fraction; the float stays told apart from the integer.
    return written if b"." in written or b"e" in written else written + b".0"
