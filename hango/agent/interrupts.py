"""Interrupt rules: which tool calls need a human decision, expressed as data.

``interrupt_on`` maps a tool name to ``true`` (every call, all four decisions), ``false`` (never) or
``{"allowed_decisions": [...], "when": {argument: matcher}}``. A ``when`` clause matches only when **every** listed
argument matches: ``{"equals": value}`` (exact JSON equality, no coercion), ``{"prefix": str | [str]}`` (any of),
``{"size_over": n}`` (UTF-8 bytes of a string, or of the compact JSON of any other value, exceed ``n``). A missing
argument does not match. Path arguments are matched after normalisation, and a directory prefix (one ending in
``/``) also matches the directory itself, so ``/memories``, ``/memories/.`` and ``/memories/x/..`` cannot slip past
a ``/memories/`` prefix any more than ``/memories/../memories//x`` can.

A rule may also name who decides its calls, ``"reviewers": {"roles": ["owner"], "users": ["<user id>"]}``, and how
many distinct approvals they need, ``"approvals_required": N`` (2 to 5; only ``approve`` and ``reject`` then). It
may give its calls a deadline of their own, ``"ttl": "4h"`` (instead of ``HANGO_APPROVAL_TTL``), and say what the
deadline does, ``"on_expiry"``: ``"fail"`` the run (the default), ``"reject"`` the call and go on, or
``{"escalate": {"roles": [...], "users": [...]}, "ttl": "1h"}``: hand the call to other reviewers once, for a
second deadline that fails the run.

The default rules protect the agent's persistent memory and skills. User entries win per tool name; removing a
default takes an explicit ``false``, which the agents service logs and audits. Whatever an agent's rules no longer
cover — a default they narrow or lift, a writing tool no rule interrupts — is said in words when it is saved
(:func:`rule_warnings`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hango.agent.mcp import is_mcp_name
from hango.agent.paths import PathError, is_under, normalize_path
from hango.agent.spec import AgentSpec
from hango.agent.state import OnExpiry
from hango.kernel.canonical import canonical_json
from hango.kernel.config import parse_duration, spelt_duration
from hango.kernel.errors import FieldError, InvalidInput
from hango.kernel.models import DECISIONS

PATH_ARGUMENTS = frozenset({"file_path", "path"})
MATCHERS = ("equals", "prefix", "size_over")
_PROTECTED = {
    "when": {"file_path": {"prefix": ["/memories/", "/skills/"]}},
    "description": "Writes to the agent's persistent memories and skills need a reviewer.",
}
DEFAULT_RULES: dict[str, Any] = {"write_file": _PROTECTED, "edit_file": _PROTECTED}
RULE_FIELDS = ("allowed_decisions", "when", "reviewers", "approvals_required", "ttl", "on_expiry", "description")
# A rule's ``description`` is shown to every reviewer of its calls: a sentence or two, not a document.
MAX_DESCRIPTION_CHARS = 1000
# Members never decide, so a rule can only narrow the deciding roles.
REVIEWER_ROLES = ("owner", "admin")
# What a quorum can do: N approvals run the call, one rejection refuses it. An edit or an answer is one person's.
QUORUM_DECISIONS = ("approve", "reject")
MAX_APPROVALS_REQUIRED = 5
# What an approval's deadline may do besides escalating (``{"escalate": {...}, "ttl": ...}``).
EXPIRY_ACTIONS = ("fail", "reject")
# The longest deadline a rule may set, unless the caller says otherwise (``HANGO_APPROVAL_MAX_TTL``).
MAX_RULE_TTL = timedelta(days=30)


@dataclass(frozen=True)
class InterruptRule:
    """A tool's rule after the merge: which decisions a human may take, and when the rule applies."""

    allowed_decisions: tuple[str, ...]
    when: Mapping[str, Mapping[str, Any]] | None = None
    # Who may decide (``{"roles": [...], "users": [...]}``; None: every owner and admin) and how many must approve.
    reviewers: Mapping[str, list[str]] | None = None
    approvals_required: int = 1
    # Its calls' deadline (None: ``HANGO_APPROVAL_TTL``) and what the deadline does, as the rule says it (None:
    # fail the run).
    ttl: timedelta | None = None
    on_expiry: OnExpiry = None
    # Why its calls wait, in the rule's own words (None: it gives none), shown to their reviewers.
    description: str | None = None

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
        # One identity with the approvals' digests: 1, 1.0, true and "1" differ, and big integers are exact.
        return canonical_json(value) == canonical_json(expected)
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


def validate_rules(config: Any, field: str = "interrupt_on", *, max_ttl: timedelta = MAX_RULE_TTL) -> None:
    """Refuse malformed rules at save time, naming every offending field; a deadline may be at most ``max_ttl``."""
    errors: list[FieldError] = []
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise InvalidInput.field(field, "must be an object mapping tool names to rules")
    for tool, rule in config.items():
        errors += _rule_errors(rule, f"{field}.{tool}", max_ttl)
    if errors:
        raise InvalidInput.of(errors)


def _rule_errors(rule: Any, field: str, max_ttl: timedelta = MAX_RULE_TTL) -> list[FieldError]:
    if isinstance(rule, bool):
        return []
    if not isinstance(rule, Mapping):
        return [FieldError(field, "must be true, false or an object with allowed_decisions and when")]
    errors = [FieldError(f"{field}.{key}", "unknown field") for key in rule if key not in RULE_FIELDS]
    errors += _decision_errors(rule.get("allowed_decisions"), f"{field}.allowed_decisions")
    when = rule.get("when")
    if when is not None:
        if not isinstance(when, Mapping) or not when:
            errors.append(FieldError(f"{field}.when", "must be a non-empty object mapping argument names to matchers"))
        else:
            for argument, matcher in when.items():
                errors += matcher_errors(matcher, f"{field}.when.{argument}")
    if "reviewers" in rule:
        errors += _reviewers_errors(rule["reviewers"], f"{field}.reviewers")
    if "approvals_required" in rule:
        errors += _quorum_errors(rule, field)
    if "ttl" in rule:
        errors += _ttl_errors(rule["ttl"], f"{field}.ttl", max_ttl)
    if "on_expiry" in rule:
        errors += _expiry_errors(rule["on_expiry"], f"{field}.on_expiry", max_ttl)
    if "description" in rule:
        errors += _description_errors(rule["description"], f"{field}.description")
    return errors


def _description_errors(description: Any, field: str) -> list[FieldError]:
    if not isinstance(description, str) or not description.strip():
        return [FieldError(field, "must be a non-empty string")]
    if len(description) > MAX_DESCRIPTION_CHARS:
        return [FieldError(field, f"must be at most {MAX_DESCRIPTION_CHARS} characters")]
    return []


def _ttl_errors(ttl: Any, field: str, max_ttl: timedelta) -> list[FieldError]:
    problem = f"must be a duration such as 30m, 4h or 2d, longer than zero and at most {spelt_duration(max_ttl)}"
    if not isinstance(ttl, str):
        return [FieldError(field, problem)]
    try:
        duration = parse_duration(ttl)
    except (ValueError, OverflowError):
        return [FieldError(field, problem)]
    return [] if timedelta(0) < duration <= max_ttl else [FieldError(field, problem)]


def _expiry_errors(on_expiry: Any, field: str, max_ttl: timedelta) -> list[FieldError]:
    if isinstance(on_expiry, str) and on_expiry in EXPIRY_ACTIONS:
        return []
    problem = 'must be "fail", "reject" or {"escalate": {"roles": [...], "users": [...]}, "ttl": "1h"}'
    if not isinstance(on_expiry, Mapping) or "escalate" not in on_expiry:
        return [FieldError(field, problem)]
    errors = [FieldError(f"{field}.{key}", "unknown field") for key in on_expiry if key not in ("escalate", "ttl")]
    errors += _reviewers_errors(on_expiry["escalate"], f"{field}.escalate")
    errors += _ttl_errors(on_expiry.get("ttl"), f"{field}.ttl", max_ttl)
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


def _reviewers_errors(reviewers: Any, field: str) -> list[FieldError]:
    if not isinstance(reviewers, Mapping):
        return [FieldError(field, "must be an object with roles and/or users")]
    errors = [FieldError(f"{field}.{key}", "unknown field") for key in reviewers if key not in ("roles", "users")]
    roles, users = reviewers.get("roles", []), reviewers.get("users", [])
    if not isinstance(roles, list) or any(role not in REVIEWER_ROLES for role in roles):
        errors.append(FieldError(f"{field}.roles", f"must be a list of {', '.join(REVIEWER_ROLES)}"))
    if not isinstance(users, list) or not all(_is_uuid(user) for user in users):
        errors.append(FieldError(f"{field}.users", "must be a list of user ids"))
    if not errors and not roles and not users:
        errors.append(FieldError(field, "must name at least one role or user"))
    return errors


def canonical_rules(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Valid rules with every user id they name in its one spelling (lower-case, hyphenated), each once.

    A rule naming ``{"users": ["4F0C…"]}`` and a check comparing ``"4f0c…"`` would disagree on who may decide;
    stored canonical, every later comparison is of one spelling (and the checks compare UUIDs anyway).
    """
    if config is None:
        return None
    return {tool: _canonical_rule(rule) for tool, rule in config.items()}


def _canonical_rule(rule: Any) -> Any:
    if not isinstance(rule, Mapping):
        return rule
    canonical = dict(rule)
    if "reviewers" in rule:
        canonical["reviewers"] = _canonical_reviewers(rule["reviewers"])
    on_expiry = rule.get("on_expiry")
    if isinstance(on_expiry, Mapping) and "escalate" in on_expiry:
        canonical["on_expiry"] = {**on_expiry, "escalate": _canonical_reviewers(on_expiry["escalate"])}
    return canonical


def _canonical_reviewers(reviewers: Mapping[str, Any]) -> dict[str, Any]:
    if "users" not in reviewers:
        return dict(reviewers)
    users = [str(uuid.UUID(user)) for user in reviewers["users"]]
    return {**reviewers, "users": list(dict.fromkeys(users))}


def _is_uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def is_reviewer(user_id: uuid.UUID, role: str | None, reviewers: Mapping[str, Any] | None) -> bool:
    """Whether a user with this role in the tenant (None: none) may decide under ``reviewers`` (None: every
    owner and admin). A member never decides; user ids are compared as UUIDs, whatever their spelling."""
    if role not in REVIEWER_ROLES:
        return False
    if reviewers is None:
        return True
    return role in (reviewers.get("roles") or []) or user_id in user_ids(reviewers)


def user_ids(reviewers: Mapping[str, Any]) -> set[uuid.UUID]:
    """The users a ``reviewers`` object names, as UUIDs (a spelling that is not one names nobody)."""
    named = set()
    for user in reviewers.get("users") or []:
        try:
            named.add(uuid.UUID(str(user)))
        except ValueError:
            continue
    return named


def _quorum_errors(rule: Mapping[str, Any], field: str) -> list[FieldError]:
    required = rule["approvals_required"]
    if isinstance(required, bool) or not isinstance(required, int) or not 2 <= required <= MAX_APPROVALS_REQUIRED:
        return [FieldError(f"{field}.approvals_required", f"must be a whole number from 2 to {MAX_APPROVALS_REQUIRED}")]
    decisions = rule.get("allowed_decisions")
    if isinstance(decisions, list) and any(decision not in QUORUM_DECISIONS for decision in decisions):
        return [
            FieldError(f"{field}.allowed_decisions", "under approvals_required only approve and reject are allowed")
        ]
    return []


def matcher_errors(matcher: Any, field: str) -> list[FieldError]:
    """What is wrong with one ``when`` matcher (a rule's, or a grant's), named under ``field``."""
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


def effective_config(user: Mapping[str, Any] | None, mcp_defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The merged rules as the API shows them: defaults (the built-in ones, and ``mcp_defaults``, the MCP tools'
    whose calls wait by default, :func:`hango.agent.mcp.default_rules`) overlaid by the user's entries, ``true``
    expanded."""
    merged: dict[str, Any] = {**DEFAULT_RULES, **(mcp_defaults or {}), **(user or {})}
    return {tool: _expand(rule) for tool, rule in sorted(merged.items())}


def _expand(rule: Any) -> Any:
    if rule is False:
        return False
    if rule is True:
        return {"allowed_decisions": list(DECISIONS)}
    default = QUORUM_DECISIONS if "approvals_required" in rule else DECISIONS
    expanded = {"allowed_decisions": list(rule.get("allowed_decisions") or default)}
    for key in ("when", "reviewers", "approvals_required", "ttl", "on_expiry", "description"):
        if rule.get(key):
            expanded[key] = rule[key]
    return expanded


def compile_rules(
    user: Mapping[str, Any] | None, mcp_defaults: Mapping[str, Any] | None = None
) -> dict[str, InterruptRule]:
    """The rules the middleware applies, by tool name (tools set to ``false`` have none)."""
    merged = effective_config(user, mcp_defaults)
    return {tool: _compiled(rule) for tool, rule in merged.items() if rule is not False}


def rule_sets(
    agent: AgentSpec, mcp_defaults: Mapping[str, Any] | None = None
) -> list[tuple[str, dict[str, InterruptRule]]]:
    """Every set of rules an agent's loops apply, named for a reader: the agent's own, then each declared
    subagent's own (a subagent without ``interrupt_on`` applies its parent's, one of these), each with
    ``mcp_defaults`` beneath its own entries."""
    sets = [("the agent's rules", compile_rules(agent.interrupt_on, mcp_defaults))]
    for subagent in agent.subagents:
        if subagent.interrupt_on is not None:
            sets.append((f"subagent {subagent.name}'s rules", compile_rules(subagent.interrupt_on, mcp_defaults)))
    return sets


def _compiled(rule: Mapping[str, Any]) -> InterruptRule:
    return InterruptRule(
        tuple(rule["allowed_decisions"]),
        rule.get("when"),
        reviewers=rule.get("reviewers"),
        approvals_required=rule.get("approvals_required", 1),
        ttl=parse_duration(rule["ttl"]) if rule.get("ttl") else None,
        on_expiry=rule.get("on_expiry"),
        description=rule.get("description"),
    )


def overridden_defaults(user: Mapping[str, Any] | None) -> list[str]:
    """Default rules the user's configuration replaces or removes: each is logged and audited at save time.

    An MCP tool's default interrupts every call (unless its server is trusted and the tool read-only), so an entry
    that lifts it (``false``) or narrows it (a ``when``) overrides it.
    """
    given = user or {}
    built_in = [tool for tool in DEFAULT_RULES if tool in given and not _is_default(tool, given[tool])]
    mcp = [tool for tool, rule in given.items() if is_mcp_name(tool) and _lifts_mcp_default(rule)]
    return sorted(built_in + mcp)


def _lifts_mcp_default(rule: Any) -> bool:
    return rule is False or (isinstance(rule, Mapping) and bool(rule.get("when")))


def _is_default(tool: str, rule: Any) -> bool:
    # The default rule written out again, with or without its description, replaces nothing.
    default = DEFAULT_RULES[tool]
    return isinstance(rule, Mapping) and rule.get("when") == default["when"] and {**default, **rule} == default


@dataclass(frozen=True)
class Override:
    """A default rule replaced or removed by an agent's rules (``subagent`` None) or by one subagent's own."""

    tool: str
    rule: Any
    subagent: str | None = None


def config_overrides(agent: AgentSpec) -> list[Override]:
    """Every default rule an agent configuration replaces or removes, at the top level and in each subagent.

    A subagent that declares no ``interrupt_on`` inherits the parent's rules, so only a declared one can override.
    """
    top = agent.interrupt_on or {}
    found = [Override(tool, top[tool]) for tool in overridden_defaults(top)]
    for subagent in agent.subagents:
        own = subagent.interrupt_on
        if own is not None:
            found += [Override(tool, own[tool], subagent.name) for tool in overridden_defaults(own)]
    return found


@dataclass(frozen=True)
class RuleWarning:
    """Something an agent's rules no longer cover, told to whoever saves the agent: the tool, and a sentence."""

    tool: str
    message: str


def rule_warnings(agent: AgentSpec, writing_tools: Collection[str]) -> list[RuleWarning]:
    """What an agent's rules leave unreviewed, in words a reviewer understands.

    One warning for each default rule the agent's own entries, or a subagent's own, replace or lift
    (:func:`config_overrides`), and one for each tool in ``writing_tools`` that the agent or a subagent names and
    that no rule of its loop interrupts. A tool with a default rule is only ever told of as an override.
    """
    warnings = [
        RuleWarning(override.tool, _in_subagent(override.subagent) + override_message(override.tool, override.rule))
        for override in config_overrides(agent)
    ]
    warnings += _unreviewed_writers(None, agent.tools, agent.interrupt_on, writing_tools)
    for subagent in agent.subagents:
        rules = agent.interrupt_on if subagent.interrupt_on is None else subagent.interrupt_on
        warnings += _unreviewed_writers(subagent.name, subagent.tools, rules, writing_tools)
    return warnings


def override_message(tool: str, rule: Any) -> str:
    """What replacing ``tool``'s default rule by ``rule`` (``false`` included) leaves of the default's protection.

    For example "write_file to /memories/ and /skills/ is no longer interrupted except where file_path equals
    /memories/q.md".
    """
    if is_mcp_name(tool):
        if rule is False:
            return f"{tool} is no longer interrupted: its calls run without review"
        return f"{tool} is no longer interrupted except where {describe_when(rule['when'])}"
    default_when = DEFAULT_RULES[tool]["when"]
    scope = f"{tool} to {' and '.join(default_when['file_path']['prefix'])}"
    if rule is False:
        return f"{scope} is no longer interrupted"
    when = rule.get("when") if isinstance(rule, Mapping) else None
    if not when:
        return f"{scope} is still interrupted, by the agent's rule on every {tool} call instead of the default"
    if _covers(when, default_when):
        return f"{scope} is still interrupted, under the agent's own rule instead of the default"
    return f"{scope} is no longer interrupted except where {describe_when(when)}"


def describe_when(when: Mapping[str, Mapping[str, Any]]) -> str:
    """A ``when`` clause in words: "file_path is under /memories/ and content is over 100 bytes"."""
    return " and ".join(_describe_matcher(argument, matcher) for argument, matcher in when.items())


def _describe_matcher(argument: str, matcher: Mapping[str, Any]) -> str:
    kind, expected = next(iter(matcher.items()))
    if kind == "equals":
        return f"{argument} equals {expected if isinstance(expected, str) else _canonical(expected)}"
    if kind == "prefix":
        prefixes = " or ".join([expected] if isinstance(expected, str) else expected)
        return f"{argument} {'is under' if argument in PATH_ARGUMENTS else 'starts with'} {prefixes}"
    return f"{argument} is over {expected} bytes"


def _covers(when: Mapping[str, Mapping[str, Any]], default_when: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether a rule matching ``when`` interrupts every call the default's ``when`` (path prefixes) matches."""
    if set(when) != set(default_when) or set(when["file_path"]) != {"prefix"}:
        return False
    prefix = when["file_path"]["prefix"]
    prefixes = [prefix] if isinstance(prefix, str) else list(prefix)
    # A protected directory is covered when its own path and everything inside it match one of the rule's prefixes.
    return all(
        any(is_under(directory, given) and is_under(directory.rstrip("/"), given) for given in prefixes)
        for directory in default_when["file_path"]["prefix"]
    )


def _unreviewed_writers(
    subagent: str | None, tools: Collection[str], rules: Mapping[str, Any] | None, writing_tools: Collection[str]
) -> list[RuleWarning]:
    given = rules or {}
    return [
        RuleWarning(
            tool, f"{_in_subagent(subagent)}{tool} can write, and no rule interrupts it: its calls run without review"
        )
        for tool in tools
        if tool in writing_tools and tool not in DEFAULT_RULES and given.get(tool) in (None, False)
    ]


def _in_subagent(subagent: str | None) -> str:
    return "" if subagent is None else f"in subagent {subagent}, "
