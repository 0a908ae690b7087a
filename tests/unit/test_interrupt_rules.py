"""The ``when`` matchers of interrupt rules: exact JSON equality, UTF-8 sizes, every argument, normalised paths."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from hango.agent.interrupts import InterruptRule, compile_rules, effective_config, validate_rules
from hango.kernel.errors import InvalidInput
from hango.kernel.models import DECISIONS


def _rule(**when: dict[str, Any]) -> InterruptRule:
    return InterruptRule(tuple(DECISIONS), when)


@pytest.mark.parametrize(
    ("expected", "value", "matches"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        (1, "1", False),
        (1.0, 1, False),
        (True, 1, False),
        (False, 0, False),
        ("1", 1, False),
        (None, None, True),
        (None, "", False),
        (None, 0, False),
        (None, False, False),
        ({"a": 1, "b": {"c": [1, 2]}}, {"b": {"c": [1, 2]}, "a": 1}, True),
        ({"a": 1, "b": {"c": [1, 2]}}, {"a": 1, "b": {"c": [2, 1]}}, False),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": 1}, {"a": 1, "b": None}, False),
        ([1, "x"], [1, "x"], True),
        ([1], [True], False),
        ("héllo", "héllo", True),
    ],
)
def test_equals_is_exact_json_equality_without_coercion(expected: Any, value: Any, matches: bool) -> None:
    assert _rule(mode={"equals": expected}).matches({"mode": value}) is matches


def test_equals_on_a_path_compares_the_normalised_path() -> None:
    rule = _rule(file_path={"equals": "/memories/AGENTS.md"})
    assert rule.matches({"file_path": "/memories//./AGENTS.md"})
    assert rule.matches({"file_path": "/skills/../memories/AGENTS.md"})
    assert not rule.matches({"file_path": "/memories/AGENTS.md.bak"})


@pytest.mark.parametrize(
    ("limit", "value", "matches"),
    [
        (3, "abc", False),  # exactly the limit is not over it
        (3, "abcd", True),
        (3, "éé", True),  # two characters, four UTF-8 bytes
        (4, "éé", False),
        (5, "日本", True),  # two characters, six bytes
        (6, "日本", False),
        (0, "", False),
        (0, "a", True),
        (6, {"a": 1}, True),  # compact JSON: {"a":1} is seven bytes
        (7, {"a": 1}, False),
        (4, [1, 2], True),  # [1,2]
        (5, [1, 2], False),
        (5, ["é"], True),  # ["é"] is six bytes when written as UTF-8, not as \u00e9
        (6, ["é"], False),
        (3, 1234, True),
        (4, 1234, False),
        (3, True, True),  # true
        (4, True, False),
        (3, None, True),  # null
        (4, None, False),
    ],
)
def test_size_over_counts_utf8_bytes_of_strings_and_of_compact_json(limit: int, value: Any, matches: bool) -> None:
    assert _rule(content={"size_over": limit}).matches({"content": value}) is matches


def test_size_over_of_an_object_does_not_depend_on_key_order() -> None:
    rule = _rule(content={"size_over": 13})  # {"a":1,"b":2} is thirteen bytes
    assert not rule.matches({"content": {"b": 2, "a": 1}})
    assert _rule(content={"size_over": 12}).matches({"content": {"b": 2, "a": 1}})


def test_every_listed_argument_must_match() -> None:
    rule = _rule(file_path={"prefix": "/memories/"}, content={"size_over": 3}, mode={"equals": "overwrite"})
    both = {"file_path": "/memories/a", "content": "long enough", "mode": "overwrite"}
    assert rule.matches(both)
    assert not rule.matches({**both, "file_path": "/notes/a"})
    assert not rule.matches({**both, "content": "abc"})
    assert not rule.matches({**both, "mode": "append"})


@pytest.mark.parametrize(
    "matcher", [{"equals": None}, {"equals": "x"}, {"prefix": "/"}, {"prefix": ""}, {"size_over": 0}]
)
def test_a_missing_argument_does_not_match(matcher: dict[str, Any]) -> None:
    assert not _rule(file_path=matcher).matches({"content": "x"})
    assert not _rule(file_path=matcher, content={"size_over": 0}).matches({"content": "x"})


def test_no_when_matches_every_call() -> None:
    assert InterruptRule(("approve",)).matches({})
    assert InterruptRule(("approve",), {}).matches({"anything": 1})


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("/memories/AGENTS.md", True),
        ("/memories/../memories//x", True),
        ("/memories//x", True),
        ("/memories/./x", True),
        ("/memories", True),  # the storage root itself
        ("/memories/", True),
        ("/memories/.", True),
        ("/memories/x/..", True),
        ("/notes/../memories/x", True),
        ("/memoriesx", False),
        ("/memories/../notes.txt", False),
        ("/notes.txt", False),
        ("/../memories/x", False),  # escapes /: outside every scope
        ("/memories/../../memories/x", False),
        ("memories/x", False),  # not absolute
        ("/memories/\x00x", False),
    ],
)
def test_path_prefixes_match_the_normalised_path(path: str, matches: bool) -> None:
    assert _rule(file_path={"prefix": "/memories/"}).matches({"file_path": path}) is matches
    assert _rule(path={"prefix": ["/skills/", "/memories/"]}).matches({"path": path}) is matches


def test_a_prefix_matches_only_strings() -> None:
    rule = _rule(file_path={"prefix": "/memories/"})
    assert not rule.matches({"file_path": ["/memories/x"]})
    assert not rule.matches({"file_path": None})


def test_a_non_path_argument_is_a_plain_string_prefix() -> None:
    rule = _rule(command={"prefix": ["rm ", "sudo "]})
    assert rule.matches({"command": "rm -rf /"})
    assert not rule.matches({"command": "  rm -rf /"})
    assert not rule.matches({"command": "echo rm "})


def test_the_default_rules_protect_memories_and_skills_in_every_spelling() -> None:
    rules = compile_rules(None)
    for tool in ("write_file", "edit_file"):
        assert rules[tool].matches({"file_path": "/memories/AGENTS.md", "content": "x"})
        assert rules[tool].matches({"file_path": "/skills/./", "content": "x"})
        assert rules[tool].matches({"file_path": "/memories", "content": "x"})
        assert not rules[tool].matches({"file_path": "/notes.txt", "content": "x"})
    assert "write_file" not in compile_rules({"write_file": False})


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"ttl": "soon"}, "interrupt_on.t.ttl"),
        ({"ttl": 60}, "interrupt_on.t.ttl"),
        ({"ttl": "0s"}, "interrupt_on.t.ttl"),
        ({"ttl": "31d"}, "interrupt_on.t.ttl"),
        ({"on_expiry": "ignore"}, "interrupt_on.t.on_expiry"),
        ({"on_expiry": {"escalate": {"roles": ["member"]}, "ttl": "1h"}}, "interrupt_on.t.on_expiry.escalate.roles"),
        ({"on_expiry": {"escalate": {}, "ttl": "1h"}}, "interrupt_on.t.on_expiry.escalate"),
        ({"on_expiry": {"escalate": {"roles": ["owner"]}}}, "interrupt_on.t.on_expiry.ttl"),
        ({"on_expiry": {"escalate": {"roles": ["owner"]}, "ttl": "1h", "then": "x"}}, "interrupt_on.t.on_expiry.then"),
    ],
)
def test_a_bad_deadline_or_expiry_action_is_refused_naming_its_field(rule: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_rules({"t": rule})
    assert field in [error.field for error in refused.value.errors]


def test_deadlines_and_expiry_actions_are_kept_shown_and_compiled() -> None:
    escalate = {"escalate": {"roles": ["owner"], "users": [str(uuid.uuid4())]}, "ttl": "1h"}
    rules = {"a": {"ttl": "4h", "on_expiry": "reject"}, "b": {"on_expiry": escalate}, "c": True}
    validate_rules(rules)
    shown = effective_config(rules)
    assert (shown["a"]["ttl"], shown["a"]["on_expiry"], shown["b"]["on_expiry"]) == ("4h", "reject", escalate)
    assert "ttl" not in shown["c"]
    assert "on_expiry" not in shown["c"]
    compiled = compile_rules(rules)
    assert (compiled["a"].ttl, compiled["a"].on_expiry) == (timedelta(hours=4), "reject")
    assert (compiled["b"].ttl, compiled["b"].on_expiry, compiled["c"].on_expiry) == (None, escalate, None)
    with pytest.raises(InvalidInput):
        validate_rules({"a": {"ttl": "2h"}}, max_ttl=timedelta(hours=1))
