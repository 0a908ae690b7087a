"""What an agent's rules no longer cover, in the words a person saving the agent reads."""

from __future__ import annotations

from typing import Any

import pytest

from hango.agent.interrupts import RuleWarning, override_message, rule_warnings
from hango.agent.spec import AgentSpec

WRITERS = {"write_file", "edit_file", "publish"}


def _agent(**config: Any) -> AgentSpec:
    return AgentSpec.of_snapshot({"name": "a", "model": {"provider": "scripted"}, **config})


def test_a_rule_narrowed_to_one_file_says_the_rest_is_no_longer_interrupted() -> None:
    narrowed = {"when": {"file_path": {"equals": "/memories/q.md"}}, "approvals_required": 2}
    assert rule_warnings(_agent(tools=["write_file"], interrupt_on={"write_file": narrowed}), WRITERS) == [
        RuleWarning(
            "write_file",
            "write_file to /memories/ and /skills/ is no longer interrupted except where file_path equals "
            "/memories/q.md",
        )
    ]


def test_a_lifted_default_is_no_longer_interrupted() -> None:
    assert override_message("write_file", False) == "write_file to /memories/ and /skills/ is no longer interrupted"
    assert override_message("edit_file", False) == "edit_file to /memories/ and /skills/ is no longer interrupted"


@pytest.mark.parametrize(
    ("when", "words"),
    [
        ({"file_path": {"prefix": "/memories/notes/"}}, "file_path is under /memories/notes/"),
        ({"file_path": {"prefix": ["/memories/a/", "/skills/b/"]}}, "file_path is under /memories/a/ or /skills/b/"),
        (
            {"file_path": {"prefix": "/memories/"}, "content": {"size_over": 100}},
            "file_path is under /memories/ and content is over 100 bytes",
        ),
        ({"content": {"prefix": "#"}}, "content starts with #"),
        ({"content": {"equals": 3}}, "content equals 3"),
        ({"file_path": {"prefix": "/memories/"}}, "file_path is under /memories/"),
    ],
)
def test_a_narrower_scope_is_said_as_the_exception_it_leaves(when: dict[str, Any], words: str) -> None:
    assert override_message("write_file", {"when": when}) == (
        f"write_file to /memories/ and /skills/ is no longer interrupted except where {words}"
    )


@pytest.mark.parametrize(
    "when",
    [
        {"file_path": {"prefix": ["/memories/", "/skills/"]}},
        {"file_path": {"prefix": "/"}},
        {"file_path": {"prefix": ["/skills/", "/memories"]}},
    ],
)
def test_a_scope_that_still_covers_both_directories_says_they_are_still_interrupted(when: dict[str, Any]) -> None:
    rule = {"when": when, "approvals_required": 2}
    assert override_message("write_file", rule) == (
        "write_file to /memories/ and /skills/ is still interrupted, under the agent's own rule instead of the default"
    )


@pytest.mark.parametrize("rule", [True, {"reviewers": {"roles": ["owner"]}}])
def test_a_rule_on_every_call_says_so(rule: Any) -> None:
    assert override_message("edit_file", rule) == (
        "edit_file to /memories/ and /skills/ is still interrupted, by the agent's rule on every edit_file call "
        "instead of the default"
    )


def test_nothing_to_say_is_an_empty_list() -> None:
    default_again = {"when": {"file_path": {"prefix": ["/memories/", "/skills/"]}}}
    agent = _agent(
        tools=["read_file", "write_file", "edit_file", "publish"],
        interrupt_on={"write_file": default_again, "publish": {"allowed_decisions": ["approve", "reject"]}},
    )
    assert rule_warnings(agent, WRITERS) == []


def test_a_writing_tool_no_rule_covers_is_named_and_one_that_cannot_write_is_not() -> None:
    message = "publish can write, and no rule interrupts it: its calls run without review"
    assert rule_warnings(_agent(tools=["publish", "lookup"]), WRITERS) == [RuleWarning("publish", message)]
    lifted = _agent(tools=["publish"], interrupt_on={"publish": False, "lookup": False})
    assert rule_warnings(lifted, WRITERS) == [RuleWarning("publish", message)]


def test_a_subagent_is_judged_by_the_rules_its_loop_applies() -> None:
    agent = _agent(
        tools=["task"],
        interrupt_on={"publish": True},
        subagents=[
            # Inherits the parent's rules: publish is covered.
            {"name": "inherits", "tools": ["publish"]},
            # Its own rules replace the parent's: publish is not covered, and write_file's default is lifted.
            {"name": "own", "tools": ["publish", "write_file"], "interrupt_on": {"write_file": False}},
        ],
    )
    assert rule_warnings(agent, WRITERS) == [
        RuleWarning("write_file", "in subagent own, write_file to /memories/ and /skills/ is no longer interrupted"),
        RuleWarning(
            "publish", "in subagent own, publish can write, and no rule interrupts it: its calls run without review"
        ),
    ]


def test_a_lifted_default_is_told_once_even_when_the_agent_names_the_tool() -> None:
    agent = _agent(tools=["write_file", "edit_file"], interrupt_on={"write_file": False})
    assert rule_warnings(agent, WRITERS) == [
        RuleWarning("write_file", "write_file to /memories/ and /skills/ is no longer interrupted")
    ]
