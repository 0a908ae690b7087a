"""How ``hango approvals decide`` reads its decision options: in order, each follower bound to its decision."""

from __future__ import annotations

import click
import pytest

from hango.processes.cli_reviewer import parse_decisions


def test_decisions_keep_their_order_and_their_own_message_or_arguments() -> None:
    tokens = ["--reject", "c1", "--message", "no", "--approve", "c2", "--edit=c3", '--args={"a": 1}']
    tokens += ["--respond", "c4", "--message", "42"]
    assert parse_decisions(tokens) == [
        {"tool_call_id": "c1", "decision": "reject", "message": "no"},
        {"tool_call_id": "c2", "decision": "approve"},
        {"tool_call_id": "c3", "decision": "edit", "args": {"a": 1}},
        {"tool_call_id": "c4", "decision": "respond", "message": "42"},
    ]


def test_a_decision_may_carry_the_digest_it_was_made_on_and_an_approve_a_remember() -> None:
    tokens = ["--approve", "c1", "--sha256", "d1", "--remember=8h", "--reject", "c2", "--message", "no"]
    tokens += ["--sha256=d2", "--edit", "c3", "--args", "{}", "--sha256", "d3"]
    assert parse_decisions(tokens) == [
        {"tool_call_id": "c1", "decision": "approve", "arguments_sha256": "d1", "remember": {"ttl": "8h"}},
        {"tool_call_id": "c2", "decision": "reject", "message": "no", "arguments_sha256": "d2"},
        {"tool_call_id": "c3", "decision": "edit", "args": {}, "arguments_sha256": "d3"},
    ]


def test_after_an_approval_id_one_decision_names_no_call() -> None:
    assert parse_decisions(["--approve"]) == [{"decision": "approve"}]
    assert parse_decisions(["--approve", "--sha256", "d1", "--remember", "1h"]) == [
        {"decision": "approve", "arguments_sha256": "d1", "remember": {"ttl": "1h"}}
    ]
    assert parse_decisions(["--reject", "--message", "no"]) == [{"decision": "reject", "message": "no"}]
    assert parse_decisions(["--edit", "--args", '{"a": 1}']) == [{"decision": "edit", "args": {"a": 1}}]
    assert parse_decisions(["--respond", "--message=42"]) == [{"decision": "respond", "message": "42"}]


@pytest.mark.parametrize(
    "tokens",
    [
        [],
        ["--approve", "--approve"],  # an approval id takes one decision
        ["--approve", "c1", "--reject", "--message", "no"],  # every decision names its call, or none does
        ["--reject", "--message", "no", "--approve", "c2"],
        ["--reject"],
        ["--edit", "--args"],
        ["--reject", "c1"],
        ["--reject", "c1", "--args", "{}"],
        ["--edit", "c1", "--args", "nope"],
        ["--edit", "c1", "--args", "[]"],
        ["--message", "m"],
        ["c1"],
        ["--approve", "c1", "--sha256"],
        ["--reject", "c1", "--message", "no", "--remember", "1h"],
        ["--sha256", "abc", "--approve", "c1"],
    ],
)
def test_malformed_decisions_are_usage_errors(tokens: list[str]) -> None:
    with pytest.raises(click.UsageError):
        parse_decisions(tokens)
