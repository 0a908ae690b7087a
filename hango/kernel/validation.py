"""Reading untrusted JSON and turning marshmallow's nested errors into hango's field errors.

:func:`load_json` is the one way a request body becomes Python values: it bounds the nesting depth before the
(recursive) decoder sees the text, and refuses what the database could not store, so every hostile body is an
:class:`InvalidInput` naming the field rather than a ``RecursionError`` or a database error later on.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

from hango.kernel.errors import FieldError, InvalidInput

# A JSON string literal, so that brackets inside strings do not count towards the depth.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
# Opening brackets become the signed byte +1 and closing ones -1, so a running sum is the depth.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def field_errors(messages: Any, path: str = "") -> list[FieldError]:
    """Turn marshmallow's nested messages into ``field``/``message`` pairs with dotted, indexed paths."""
    if isinstance(messages, Mapping):
        errors: list[FieldError] = []
        for key, value in messages.items():
            errors.extend(field_errors(value, _join(path, key)))
        return errors
    if isinstance(messages, list | tuple) and all(isinstance(item, str) for item in messages):
        return [FieldError(path or "body", message) for message in messages]
    if isinstance(messages, list | tuple):
        return [error for item in messages for error in field_errors(item, path)]
    return [FieldError(path or "body", str(messages))]


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key == "_schema":
        return path
    return f"{path}.{key}" if path else str(key)


def load_json(raw: bytes, *, max_depth: int) -> Any:
    """Decode a request body, refusing with :class:`InvalidInput` what is not JSON hango can hold.

    Refused: bytes that are not UTF-8, text that is not JSON (``NaN``, ``Infinity`` and numbers out of float range
    included), arrays and objects nested deeper than ``max_depth``, and strings with a NUL or a lone surrogate
    (PostgreSQL stores neither).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput.field("body", f"is not UTF-8 (byte {exc.start})") from exc
    if nesting_depth(raw) > max_depth:
        raise InvalidInput.field("body", f"nests arrays and objects deeper than {max_depth} levels")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except ValueError as exc:  # JSONDecodeError, and the int-size limit of str-to-int conversion
        raise InvalidInput.field("body", f"is not valid JSON ({exc})") from exc
    _check_strings(value)
    return value


def nesting_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (0 for a scalar), measured without decoding it."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(memoryview(brackets.translate(_STEPS)).cast("b")), default=0)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range")
    return number


def _check_strings(value: Any) -> None:
    """Refuse keys and strings PostgreSQL cannot store, naming the first field that holds one."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            _check_string(path or "body", item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_string(_join(path, key) if _storable(key) else path or "body", key)
                pending.append((_join(path, key), child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{index}]", child) for index, child in enumerate(item))


def _check_string(field: str, text: str) -> None:
    if not _storable(text):
        raise InvalidInput.field(field, "contains a NUL character or a lone surrogate")


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
