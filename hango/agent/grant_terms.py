"""The terms of a grant, apart from its storage: what its ``ttl`` and ``when`` may be, the ``when`` that pins one
call exactly, and whether a grant covers a call.

Shared by ``POST /v1/grants`` (:mod:`hango.services.grants`), a decision's ``remember`` (its checks, in
:mod:`hango.services.approvals.checks`) and the loop's lookup; pure functions of the values given, like the rule
language of :mod:`hango.agent.interrupts` whose matchers a ``when`` uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from hango.agent.interrupts import InterruptRule, matcher_errors
from hango.agent.tools.base import Tool
from hango.kernel.canonical import canonical_json
from hango.kernel.config import Settings, parse_duration
from hango.kernel.errors import FieldError
from hango.kernel.models import Grant


def ttl_errors(ttl: Any, settings: Settings, field: str = "ttl") -> list[FieldError]:
    """What is wrong with a grant's ``ttl``: a duration such as ``1h``, above zero, at most
    ``HANGO_GRANT_MAX_TTL``."""
    try:
        duration = parse_duration(ttl) if isinstance(ttl, str) else None
    except (ValueError, OverflowError):  # past what a timedelta holds: far past the cap anyway
        duration = None
    if duration is None:
        return [FieldError(field, "must be a duration such as 90s, 15m, 1h or 7d")]
    if duration <= timedelta(0):
        return [FieldError(field, "must be longer than zero")]
    if duration > settings.grant_max_ttl:
        return [FieldError(field, f"must be at most {settings.grant_max_ttl} (HANGO_GRANT_MAX_TTL)")]
    return []


def when_errors(when: Any, settings: Settings, field: str = "when") -> list[FieldError]:
    """What is wrong with a grant's ``when``: null, or matchers exactly as an interrupt rule's ``when`` takes, of
    at most ``HANGO_GRANT_MAX_WHEN_BYTES``."""
    if when is None:
        return []
    if not isinstance(when, Mapping) or not when:
        return [FieldError(field, "must be null or a non-empty object mapping argument names to matchers")]
    size = len(json.dumps(when, separators=(",", ":"), ensure_ascii=False).encode())
    if size > settings.grant_max_when_bytes:
        limit = settings.grant_max_when_bytes
        return [FieldError(field, f"is {size} bytes of JSON, over {limit} (HANGO_GRANT_MAX_WHEN_BYTES)")]
    errors: list[FieldError] = []
    for argument, matcher in when.items():
        errors += matcher_errors(matcher, f"{field}.{argument}")
    return errors


def exact_call(arguments: Mapping[str, Any], tool: Tool | None) -> dict[str, Any] | None:
    """The ``when`` of an exact grant covering this call: ``equals`` on each of its arguments, the tool's defaults
    filled in (None for a call without any, which a ``remember`` refuses).

    What a reviewer approved is what they saw, so "remember" covers exactly that call: an argument the model left
    to its default is pinned to that default (``replace_all: false``), and a call giving any argument the approved
    one did not have is not covered (:func:`covers`).
    """
    return {name: {"equals": value} for name, value in with_defaults(tool, arguments).items()} or None


def with_defaults(tool: Tool | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the tool will read them: its schema's top-level defaults filled in where the call gives
    none (an unknown tool: the arguments as they are)."""
    return tool.with_defaults(arguments) if tool is not None else dict(arguments)


def covers(grant: Grant, arguments: Mapping[str, Any], filled: Mapping[str, Any]) -> bool:
    """Whether the grant's ``when`` approves a call with these arguments (``filled``: with the tool's defaults).

    An exact grant covers one argument object: the same arguments, every value equal in canonical JSON (``1`` is
    not ``1.0``, a path is compared as written), nothing more. Any other grant matches as a rule's ``when`` does.
    """
    if not grant.exact:
        return InterruptRule(allowed_decisions=(), when=grant.when).matches(arguments)
    pinned = {name: matcher.get("equals") for name, matcher in (grant.when or {}).items()}
    return canonical_json(pinned) == canonical_json(dict(filled))
