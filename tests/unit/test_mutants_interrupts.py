"""Interrupt rules as saved and merged: every malformed field named, defaults overlaid, overrides found.

Written to kill the mutants that survived mutation testing (docs/mutation-testing.md); each test states a
behaviour of ``hango.agent.interrupts`` that the agents API relies on.
"""

from __future__ import annotations

from typing import Any

import pytest

from hango.agent.interrupts import (
    DEFAULT_RULES,
    InterruptRule,
    Override,
    compile_rules,
    config_overrides,
    effective_config,
    overridden_defaults,
    validate_rules,
)
from hango.agent.spec import AgentSpec
from hango.kernel.errors import FieldError, InvalidInput
from hango.kernel.models import DECISIONS

EVERY_DECISION = ", ".join(DECISIONS)
MATCHERS = "equals, prefix, size_over"
PROTECTED = {
    "when": {"file_path": {"prefix": ["/memories/", "/skills/"]}},
    "description": "Writes to the agent's persistent memories and skills need a reviewer.",
}


def _errors(config: Any, field: str = "interrupt_on") -> list[FieldError]:
    with pytest.raises(InvalidInput) as raised:
        validate_rules(config, field)
    assert raised.value.detail == "; ".join(f"{e.field}: {e.message}" for e in raised.value.errors)
    return raised.value.errors


@pytest.mark.parametrize(
    "config",
    [
        None,
        {},
        {"shell": True, "ls": False},
        {"shell": {}},
        {"shell": {"allowed_decisions": ["approve", "reject"]}},
        {"shell": {"allowed_decisions": list(DECISIONS), "when": {"command": {"prefix": "rm "}}}},
        {"shell": {"when": {"command": {"prefix": ["rm ", "sudo "]}, "mode": {"equals": None}}}},
        {"shell": {"when": {"content": {"size_over": 0}}}},
        {"shell": {"when": {"content": {"size_over": 10_000}}}},
    ],
)
def test_well_formed_rules_are_accepted(config: Any) -> None:
    validate_rules(config)


@pytest.mark.parametrize("config", [[], "true", True, 1])
def test_rules_that_are_not_an_object_are_refused_as_a_whole(config: Any) -> None:
    assert _errors(config, "subagents[2].interrupt_on") == [
        FieldError("subagents[2].interrupt_on", "must be an object mapping tool names to rules")
    ]


def test_the_default_field_name_is_interrupt_on() -> None:
    with pytest.raises(InvalidInput) as raised:
        validate_rules([])
    assert raised.value.errors == [FieldError("interrupt_on", "must be an object mapping tool names to rules")]


@pytest.mark.parametrize("rule", [None, 1, "yes", ["approve"]])
def test_a_rule_must_be_a_boolean_or_an_object(rule: Any) -> None:
    assert _errors({"shell": rule}) == [
        FieldError("interrupt_on.shell", "must be true, false or an object with allowed_decisions and when")
    ]


def test_every_offending_field_of_every_tool_is_named() -> None:
    config = {
        "ok": True,
        "shell": {"allowed_decisions": [], "colour": "red", "when": {"command": {"prefix": 3}}},
        "grep": {"allowed_decisions": ["approve", "maybe", "edit", 7], "when": {}, "extra": 1},
    }
    assert _errors(config) == [
        FieldError("interrupt_on.shell.colour", "unknown field"),
        FieldError("interrupt_on.shell.allowed_decisions", f"must be a non-empty list of {EVERY_DECISION}"),
        FieldError("interrupt_on.shell.when.command.prefix", "must be a string or a non-empty list of strings"),
        FieldError("interrupt_on.grep.extra", "unknown field"),
        FieldError("interrupt_on.grep.allowed_decisions[1]", f"unknown decision 'maybe'; use one of {EVERY_DECISION}"),
        FieldError("interrupt_on.grep.allowed_decisions[3]", f"unknown decision 7; use one of {EVERY_DECISION}"),
        FieldError("interrupt_on.grep.when", "must be a non-empty object mapping argument names to matchers"),
    ]


@pytest.mark.parametrize("decisions", ["approve", {"approve": True}, [], 0])
def test_allowed_decisions_must_be_a_non_empty_list(decisions: Any) -> None:
    assert _errors({"shell": {"allowed_decisions": decisions}}) == [
        FieldError("interrupt_on.shell.allowed_decisions", f"must be a non-empty list of {EVERY_DECISION}")
    ]


@pytest.mark.parametrize("when", [[], "x", {}, ["command"]])
def test_when_must_be_a_non_empty_object(when: Any) -> None:
    assert _errors({"shell": {"when": when}}) == [
        FieldError("interrupt_on.shell.when", "must be a non-empty object mapping argument names to matchers")
    ]


@pytest.mark.parametrize(
    "matcher", [{}, {"equals": 1, "prefix": "x"}, "rm ", ["prefix", "rm "], None, {"equals": 1, "size_over": 1}]
)
def test_a_matcher_is_an_object_with_exactly_one_kind(matcher: Any) -> None:
    assert _errors({"shell": {"when": {"command": matcher}}}) == [
        FieldError("interrupt_on.shell.when.command", f"must be an object with exactly one of {MATCHERS}")
    ]


def test_an_unknown_matcher_is_named() -> None:
    assert _errors({"shell": {"when": {"command": {"glob": "*"}}}}) == [
        FieldError("interrupt_on.shell.when.command.glob", f"unknown matcher; use one of {MATCHERS}")
    ]


@pytest.mark.parametrize("prefix", [[], 3, None, ["rm ", 3], [None], {"rm ": True}])
def test_a_prefix_is_a_string_or_a_non_empty_list_of_strings(prefix: Any) -> None:
    assert _errors({"shell": {"when": {"command": {"prefix": prefix}}}}) == [
        FieldError("interrupt_on.shell.when.command.prefix", "must be a string or a non-empty list of strings")
    ]


@pytest.mark.parametrize("size", [-1, 1.5, "10", True, False, None])
def test_size_over_is_a_whole_number_of_bytes(size: Any) -> None:
    assert _errors({"shell": {"when": {"content": {"size_over": size}}}}) == [
        FieldError("interrupt_on.shell.when.content.size_over", "must be a whole number of bytes, 0 or more")
    ]


def test_every_matcher_of_a_when_is_checked() -> None:
    when = {"a": {"size_over": -1}, "b": {"equals": 1}, "c": {"prefix": []}}
    assert [e.field for e in _errors({"shell": {"when": when}})] == [
        "interrupt_on.shell.when.a.size_over",
        "interrupt_on.shell.when.c.prefix",
    ]


def test_the_effective_config_overlays_the_defaults_and_expands_true() -> None:
    config = effective_config({"shell": True, "write_file": False, "grep": {"when": {"pattern": {"equals": "x"}}}})
    assert config == {
        "edit_file": {"allowed_decisions": list(DECISIONS), **PROTECTED},
        "grep": {"allowed_decisions": list(DECISIONS), "when": {"pattern": {"equals": "x"}}},
        "shell": {"allowed_decisions": list(DECISIONS)},
        "write_file": False,
    }
    assert list(config) == sorted(config)


def test_the_effective_config_keeps_a_rules_own_decisions_and_drops_an_empty_when() -> None:
    config = effective_config({"shell": {"allowed_decisions": ["reject"], "when": {}}, "ls": {}})
    assert config["shell"] == {"allowed_decisions": ["reject"]}
    assert config["ls"] == {"allowed_decisions": list(DECISIONS)}
    assert effective_config(None) == effective_config({})
    assert set(effective_config(None)) == set(DEFAULT_RULES)


def test_compiled_rules_carry_the_decisions_and_the_when() -> None:
    rules = compile_rules({"shell": {"allowed_decisions": ["approve", "reject"]}, "edit_file": False})
    assert rules == {
        "shell": InterruptRule(("approve", "reject"), None),
        "write_file": InterruptRule(tuple(DECISIONS), PROTECTED["when"], description=PROTECTED["description"]),
    }


def test_a_rule_carries_its_description_and_a_long_one_is_refused() -> None:
    rules = compile_rules({"shell": {"description": "Shell commands touch the host."}})
    assert rules["shell"].description == "Shell commands touch the host."
    assert _errors({"shell": {"description": "x" * 1001}}) == [
        FieldError("interrupt_on.shell.description", "must be at most 1000 characters")
    ]
    assert _errors({"shell": {"description": " "}}) == [
        FieldError("interrupt_on.shell.description", "must be a non-empty string")
    ]
    validate_rules({"shell": {"description": "x" * 1000}})


@pytest.mark.parametrize(
    ("user", "overridden"),
    [
        (None, []),
        ({}, []),
        ({"shell": False}, []),
        ({"write_file": DEFAULT_RULES["write_file"]}, []),  # restating a default overrides nothing
        ({"write_file": {"when": PROTECTED["when"]}}, []),  # without its description too
        ({"write_file": {"description": PROTECTED["description"]}}, ["write_file"]),  # every write, not the default
        ({"write_file": False}, ["write_file"]),
        (
            {"edit_file": True, "write_file": {"when": {"file_path": {"prefix": "/memories/"}}}},
            ["edit_file", "write_file"],
        ),
    ],
)
def test_overridden_defaults_are_the_defaults_replaced_or_removed(user: Any, overridden: list[str]) -> None:
    assert overridden_defaults(user) == overridden


def test_config_overrides_are_found_at_the_top_level_and_in_declared_subagents_only() -> None:
    config = {
        "interrupt_on": {"write_file": False, "shell": True},
        "subagents": [
            {"name": "inherits"},
            {"name": "own", "interrupt_on": {"edit_file": True, "write_file": DEFAULT_RULES["write_file"]}},
            {"name": "empty", "interrupt_on": {}},
            {"name": "lifts", "interrupt_on": {"write_file": False, "edit_file": False}},
        ],
    }
    assert config_overrides(AgentSpec.of_snapshot(config)) == [
        Override("write_file", False),
        Override("edit_file", True, "own"),
        Override("edit_file", False, "lifts"),
        Override("write_file", False, "lifts"),
    ]


@pytest.mark.parametrize("config", [{}, {"interrupt_on": None, "subagents": None}, {"subagents": [{"name": "a"}]}])
def test_a_config_without_rules_overrides_nothing(config: dict[str, Any]) -> None:
    assert config_overrides(AgentSpec.of_snapshot(config)) == []
