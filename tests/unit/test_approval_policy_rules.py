"""Reviewers and quorum in interrupt rules: validated at save naming the field, shown merged, carried compiled."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hango.agent.interrupts import compile_rules, effective_config, validate_rules
from hango.kernel.errors import InvalidInput

USER = str(uuid.uuid4())


def _fields(rules: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidInput) as refused:
        validate_rules(rules)
    return [error.field for error in refused.value.errors]


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"approvals_required": 1}, "interrupt_on.write_file.approvals_required"),
        ({"approvals_required": 6}, "interrupt_on.write_file.approvals_required"),
        ({"approvals_required": True}, "interrupt_on.write_file.approvals_required"),
        ({"approvals_required": "2"}, "interrupt_on.write_file.approvals_required"),
        ({"approvals_required": 2.0}, "interrupt_on.write_file.approvals_required"),
        (
            {"approvals_required": 2, "allowed_decisions": ["approve", "edit"]},
            "interrupt_on.write_file.allowed_decisions",
        ),
        (
            {"approvals_required": 3, "allowed_decisions": ["respond"]},
            "interrupt_on.write_file.allowed_decisions",
        ),
        ({"reviewers": {}}, "interrupt_on.write_file.reviewers"),
        ({"reviewers": {"roles": [], "users": []}}, "interrupt_on.write_file.reviewers"),
        ({"reviewers": ["owner"]}, "interrupt_on.write_file.reviewers"),
        ({"reviewers": {"roles": ["member"]}}, "interrupt_on.write_file.reviewers.roles"),
        ({"reviewers": {"roles": "owner"}}, "interrupt_on.write_file.reviewers.roles"),
        ({"reviewers": {"users": ["not-a-uuid"]}}, "interrupt_on.write_file.reviewers.users"),
        ({"reviewers": {"users": [7]}}, "interrupt_on.write_file.reviewers.users"),
        ({"reviewers": {"roles": ["owner"], "teams": ["x"]}}, "interrupt_on.write_file.reviewers.teams"),
    ],
)
def test_a_malformed_policy_is_refused_naming_its_field(rule: dict[str, Any], field: str) -> None:
    assert _fields({"write_file": rule}) == [field]


def test_a_subagents_rules_are_named_under_its_own_field() -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_rules({"edit_file": {"approvals_required": 9}}, "subagents[0].interrupt_on")
    assert [error.field for error in refused.value.errors] == ["subagents[0].interrupt_on.edit_file.approvals_required"]


@pytest.mark.parametrize(
    "rule",
    [
        {"reviewers": {"roles": ["owner"]}},
        {"reviewers": {"users": [USER]}},
        {"reviewers": {"roles": ["owner", "admin"], "users": [USER]}},
        {"approvals_required": 2},
        {"approvals_required": 5, "allowed_decisions": ["approve"]},
        {"approvals_required": 2, "allowed_decisions": ["approve", "reject"], "reviewers": {"roles": ["admin"]}},
    ],
)
def test_a_well_formed_policy_is_accepted(rule: dict[str, Any]) -> None:
    validate_rules({"write_file": rule})


def test_a_quorum_rule_defaults_to_approve_and_reject_and_shows_its_policy() -> None:
    rule = {"approvals_required": 2, "reviewers": {"users": [USER]}, "when": {"file_path": {"prefix": "/x/"}}}
    shown = effective_config({"write_file": rule})["write_file"]
    assert shown == {
        "allowed_decisions": ["approve", "reject"],
        "when": {"file_path": {"prefix": "/x/"}},
        "reviewers": {"users": [USER]},
        "approvals_required": 2,
    }
    compiled = compile_rules({"write_file": rule})["write_file"]
    assert compiled.allowed_decisions == ("approve", "reject")
    assert compiled.reviewers == {"users": [USER]}
    assert compiled.approvals_required == 2


def test_a_rule_without_policy_is_shown_and_compiled_as_before() -> None:
    assert effective_config({"ls": True})["ls"] == {"allowed_decisions": ["approve", "edit", "reject", "respond"]}
    compiled = compile_rules({"ls": {"allowed_decisions": ["approve"]}})["ls"]
    assert (compiled.reviewers, compiled.approvals_required) == (None, 1)
