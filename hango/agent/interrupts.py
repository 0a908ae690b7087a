"""Interrupt rules: which tool calls need a human decision, expressed as data.

``interrupt_on`` maps a tool name to ``true`` (every call, all four decisions), ``false`` (never) or
``{"allowed_decisions": [...], "when": {argument: matcher}}``. A ``when`` clause matches only when **every** listed
argument matches: ``{"equals": value}`` (exact JSON equality, no coercion), ``{"prefix": str | [str]}`` (any of),
``{"size_over": n}`` (UTF-8 bytes of a string, or of the compact JSON of any other value, exceed ``n``). A missing
argument does not match. Path arguments are matched after normalisation, and a directory prefix (one ending in
``/``) also matches the directory itself, so ``/memories``, ``/memories/.`` and ``/memories/x/..`` cannot slip past
a ``/memories/`` prefix any more than ``/memories/../memories//x`` can.

The default rules protect the agent's persistent memory and skills. User entries win per tool name; removing a
default takes an explicit ``false``, which the agents service logs and audits.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hango.agent.paths import PathError, is_under, normalize_path
from hango.errors import FieldError, InvalidInput
from hango.models import DECISIONS

PATH_ARGUMENTS = frozenset({"file_path", "path"})
MATCHERS = ("equals", "prefix", "size_over")
_PROTECTED = {"when": {"file_path": {"prefix": ["/memories/", "/skills/"]}}}
DEFAULT_RULES: dict[str, Any] = {"write_file": _PROTECTED, "edit_file": _PROTECTED}


@dataclass(frozen=True)
class InterruptRule:
    """A tool's rule after the merge: which decisions a human may take, and when the rule applies."""

    allowed_decisions: tuple[str, ...]
    when: Mapping[str, Mapping[str, Any]] | None = None

    def matches(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with these arguments must wait for a human."""
        if not self.when:
            return True
        return all(_matches(name, matcher, args) for name, matcher in self.when.items())


def _matches(name: str, matcher: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    if name not in args:
        return False
    value = args[name]
    if name in PATH_ARGUMENTS and isinstance(value, str):
        try:
            value = normalize_path(value)
        except PathError:
            # The tool refuses such a path anyway; for matching it is outside every scope.
            return False
    kind, expected = next(iter(matcher.items()))
    if kind == "equals":
        return _canonical(value) == _canonical(expected)
    if kind == "prefix":
        prefixes = [expected] if isinstance(expected, str) else list(expected)
        if not isinstance(value, str):
            return False
        if name in PATH_ARGUMENTS:
            return any(is_under(value, prefix) for prefix in prefixes)
        return any(value.startswith(prefix) for prefix in prefixes)
    size = len(value.encode()) if isinstance(value, str) else len(_canonical(value).encode())
    return size > int(expected)


def _canonical(value: Any) -> str:
    # JSON text distinguishes 1, 1.0, true and "1", which Python's == does not.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def validate_rules(config: Any, field: str = "interrupt_on") -> None:
    """Refuse malformed rules at save time, naming every offending field."""
    errors: list[FieldError] = []
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise InvalidInput.field(field, "must be an object mapping tool names to rules")
    for tool, rule in config.items():
        errors += _rule_errors(rule, f"{field}.{tool}")
    if errors:
        raise InvalidInput("; ".join(f"{e.field}: {e.message}" for e in errors), errors)


def _rule_errors(rule: Any, field: str) -> list[FieldError]:
    if isinstance(rule, bool):
        return []
    if not isinstance(rule, Mapping):
        return [FieldError(field, "must be true, false or an object with allowed_decisions and when")]
    errors = [FieldError(f"{field}.{key}", "unknown field") for key in rule if key not in ("allowed_decisions", "when")]
    errors += _decision_errors(rule.get("allowed_decisions"), f"{field}.allowed_decisions")
    when = rule.get("when")
    if when is not None:
        if not isinstance(when, Mapping) or not when:
            errors.append(FieldError(f"{field}.when", "must be a non-empty object mapping argument names to matchers"))
        else:
            for argument, matcher in when.items():
                errors += _matcher_errors(matcher, f"{field}.when.{argument}")
    return errors


def _decision_errors(decisions: Any, field: str) -> list[FieldError]:
    if decisions is None:
        return []
    if not isinstance(decisions, list) or not decisions:
        return [FieldError(field, f"must be a non-empty list of {', '.join(DECISIONS)}")]
    return [
        FieldError(f"{field}[{index}]", f"unknown decision {decision!r}; use one of {', '.join(DECISIONS)}")
        for index, decision in enumerate(decisions)
        if decision not in DECISIONS
    ]


def _matcher_errors(matcher: Any, field: str) -> list[FieldError]:
    if not isinstance(matcher, Mapping) or len(matcher) != 1:
        return [FieldError(field, f"must be an object with exactly one of {', '.join(MATCHERS)}")]
    kind, value = next(iter(matcher.items()))
    if kind == "equals":
        return []
    if kind == "prefix":
        valid = isinstance(value, str) or (
            isinstance(value, list) and value and all(isinstance(item, str) for item in value)
        )
        return [] if valid else [FieldError(f"{field}.prefix", "must be a string or a non-empty list of strings")]
    if kind == "size_over":
        valid = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return [] if valid else [FieldError(f"{field}.size_over", "must be a whole number of bytes, 0 or more")]
    return [FieldError(f"{field}.{kind}", f"unknown matcher; use one of {', '.join(MATCHERS)}")]


def effective_config(user: Mapping[str, Any] | None) -> dict[str, Any]:
    """The merged rules as the API shows them: defaults overlaid by the user's entries, ``true`` expanded."""
    merged: dict[str, Any] = {**DEFAULT_RULES, **(user or {})}
    return {tool: _expand(rule) for tool, rule in sorted(merged.items())}


def _expand(rule: Any) -> Any:
    if rule is False:
        return False
    if rule is True:
        return {"allowed_decisions": list(DECISIONS)}
    expanded = {"allowed_decisions": list(rule.get("allowed_decisions") or DECISIONS)}
    if rule.get("when"):
        expanded["when"] = rule["when"]
    return expanded


def compile_rules(user: Mapping[str, Any] | None) -> dict[str, InterruptRule]:
    """The rules the middleware applies, by tool name (tools set to ``false`` have none)."""
    return {
        tool: InterruptRule(tuple(rule["allowed_decisions"]), rule.get("when"))
        for tool, rule in effective_config(user).items()
        if rule is not False
    }


def overridden_defaults(user: Mapping[str, Any] | None) -> list[str]:
    """Default rules the user's configuration replaces or removes: each is logged and audited at save time."""
    return sorted(tool for tool in DEFAULT_RULES if tool in (user or {}) and (user or {})[tool] != DEFAULT_RULES[tool])


@dataclass(frozen=True)
class Override:
    """A default rule replaced or removed by an agent's rules (``subagent`` None) or by one subagent's own."""

    tool: str
    rule: Any
    subagent: str | None = None


def config_overrides(config: Mapping[str, Any]) -> list[Override]:
    """Every default rule an agent configuration replaces or removes, at the top level and in each subagent.

    A subagent that declares no ``interrupt_on`` inherits the parent's rules, so only a declared one can override.
    """
    top = config.get("interrupt_on") or {}
    found = [Override(tool, top[tool]) for tool in overridden_defaults(top)]
    for subagent in config.get("subagents") or []:
        own = subagent.get("interrupt_on")
        if own is not None:
            found += [Override(tool, own[tool], subagent.get("name")) for tool in overridden_defaults(own)]
    return found
