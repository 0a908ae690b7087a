"""How ``hango approvals decide`` reads its decision options: in order, each follower bound to its decision."""

from __future__ import annotations

import click
import pytest

from hango.cli_reviewer import parse_decisions


def test_decisions_keep_their_order_and_their_own_message_or_arguments() -> None:
    tokens = ["--reject", "c1", "--message", "no", "--approve", "c2", "--edit=c3", '--args={"a": 1}']
    tokens += ["--respond", "c4", "--message", "42"]
    assert parse_decisions(tokens) == [
        {"tool_call_id": "c1", "decision": "reject", "message": "no"},
        {"tool_call_id": "c2", "decision": "approve"},
        {"tool_call_id": "c3", "decision": "edit", "args": {"a": 1}},
        {"tool_call_id": "c4", "decision": "respond", "message": "42"},
    ]


@pytest.mark.parametrize(
    "tokens",
    [
        [],
        ["--approve"],
        ["--reject", "c1"],
        ["--reject", "c1", "--args", "{}"],
        ["--edit", "c1", "--args", "nope"],
        ["--edit", "c1", "--args", "[]"],
        ["--message", "m"],
        ["c1"],
    ],
)
def test_malformed_decisions_are_usage_errors(tokens: list[str]) -> None:
    with pytest.raises(click.UsageError):
        parse_decisions(tokens)
