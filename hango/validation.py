"""Turning marshmallow's nested error messages into hango's field errors (``decisions[1].args.content``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hango.errors import FieldError


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
