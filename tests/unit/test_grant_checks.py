"""The checks a standing approval passes before it is stored, and the ``when`` a ``remember`` defaults to."""

from __future__ import annotations

from typing import Any

import pytest

from hango.agent.interrupts import InterruptRule
from hango.config import Settings
from hango.grants import exact_call, ttl_errors, when_errors

SETTINGS = Settings()


@pytest.mark.parametrize("ttl", ["1h", "90s", "30d", "1.5h", "3600", "500ms"])
def test_a_positive_duration_up_to_the_cap_is_a_ttl(ttl: str) -> None:
    assert ttl_errors(ttl, SETTINGS) == []


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        ("0s", "longer than zero"),
        ("0", "longer than zero"),
        ("-1h", "duration"),
        ("1y", "duration"),
        ("", "duration"),
        (3600, "duration"),
        (None, "duration"),
        ("30d1s", "duration"),
        ("31d", "HANGO_GRANT_MAX_TTL"),
        ("9" * 400 + "d", "duration"),
    ],
)
def test_anything_else_is_refused_naming_the_field(ttl: Any, message: str) -> None:
    [error] = ttl_errors(ttl, SETTINGS, "decisions[2].remember.ttl")
    assert error.field == "decisions[2].remember.ttl"
    assert message in error.message


def test_the_cap_is_the_setting() -> None:
    assert ttl_errors("2h", SETTINGS.replace(grant_max_ttl="1h")) != []


def test_when_takes_exactly_the_interrupt_rules_matchers() -> None:
    assert when_errors(None, SETTINGS) == []
    assert when_errors({"file_path": {"prefix": ["/a/", "/b/"]}, "content": {"size_over": 0}}, SETTINGS) == []
    found = when_errors({"file_path": {"glob": "*"}, "content": {"equals": 1, "prefix": "x"}}, SETTINGS)
    assert [error.field for error in found] == ["when.file_path.glob", "when.content"]
    assert [error.field for error in when_errors({}, SETTINGS)] == ["when"]
    assert [error.field for error in when_errors([], SETTINGS, "x.when")] == ["x.when"]


def test_when_is_bounded_by_its_json_size() -> None:
    small = SETTINGS.replace(grant_max_when_bytes=30)
    assert when_errors({"a": {"equals": "x" * 10}}, small) == []
    [error] = when_errors({"a": {"equals": "x" * 20}}, small)
    assert "HANGO_GRANT_MAX_WHEN_BYTES" in error.message


def test_the_remembered_when_matches_the_approved_call_and_no_other_value() -> None:
    arguments = {"file_path": "/memories/AGENTS.md", "content": "hi", "count": 1, "flags": {"a": [1, 2]}}
    when = exact_call(arguments)
    assert when is not None
    assert when_errors(when, SETTINGS) == []
    rule = InterruptRule((), when)
    assert rule.matches(arguments)
    assert rule.matches({**arguments, "file_path": "/memories/./AGENTS.md"})  # the same path, normalised
    for name, other in [("content", "hi "), ("count", 1.0), ("count", True), ("flags", {"a": [2, 1]})]:
        assert not rule.matches({**arguments, name: other})
    assert not rule.matches({name: value for name, value in arguments.items() if name != "content"})


def test_a_call_without_arguments_has_no_exact_when() -> None:
    assert exact_call({}) is None  # so remember refuses it without a when of the reviewer's own
