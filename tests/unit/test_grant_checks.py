"""The checks a standing approval passes before it is stored, and the ``when`` a ``remember`` defaults to."""

from __future__ import annotations

from typing import Any

import pytest

from hango.agent.grant_terms import covers, exact_call, ttl_errors, when_errors, with_defaults
from hango.agent.tools.base import Tool
from hango.agent.tools.filesystem import EDIT_FILE
from hango.kernel.config import Settings
from hango.kernel.models import Grant

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


def _exact_grant(arguments: dict[str, Any], tool: Tool | None) -> Grant:
    return Grant(tool_name=tool.name if tool else "count", when=exact_call(arguments, tool), exact=True)


def _covered(grant: Grant, arguments: dict[str, Any], tool: Tool | None) -> bool:
    return covers(grant, arguments, with_defaults(tool, arguments))


def test_a_remembered_call_pins_every_argument_and_no_other_value() -> None:
    arguments = {"file_path": "/memories/AGENTS.md", "content": "hi", "count": 1, "flags": {"a": [1, 2]}}
    grant = _exact_grant(arguments, None)
    assert grant.when is not None
    assert when_errors(grant.when, SETTINGS) == []
    assert _covered(grant, arguments, None)
    assert _covered(grant, dict(reversed(arguments.items())), None)  # key order is not a value
    for name, other in [("content", "hi "), ("count", 1.0), ("count", True), ("flags", {"a": [2, 1]})]:
        assert not _covered(grant, {**arguments, name: other}, None)
    assert not _covered(grant, {name: value for name, value in arguments.items() if name != "content"}, None)
    assert not _covered(grant, {**arguments, "extra": None}, None)  # an argument the approved call did not give
    # Exactly as approved: another spelling of the path is another call (a rule's prefix normalises; this does not).
    assert not _covered(grant, {**arguments, "file_path": "/memories/./AGENTS.md"}, None)


def test_an_argument_left_to_its_default_is_pinned_to_that_default() -> None:
    edit = {"file_path": "/memories/AGENTS.md", "old_string": "a", "new_string": "b"}
    grant = _exact_grant(edit, EDIT_FILE)
    assert grant.when == {name: {"equals": value} for name, value in {**edit, "replace_all": False}.items()}
    assert _covered(grant, edit, EDIT_FILE)
    assert _covered(grant, {**edit, "replace_all": False}, EDIT_FILE)  # the default, said out loud
    assert not _covered(grant, {**edit, "replace_all": True}, EDIT_FILE)


def test_a_call_without_arguments_has_no_exact_when() -> None:
    assert exact_call({}, None) is None  # so remember refuses it without a when of the reviewer's own
