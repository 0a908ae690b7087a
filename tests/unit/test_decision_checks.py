"""The decision service's checks (hango.services.approvals.checks) on approvals and commands built in memory: no
database, no request; each check raises its refusal, naming the field, or passes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hango.agent.interrupts import InterruptRule
from hango.agent.tools.base import Tool, ToolRegistry
from hango.kernel.auth import Principal
from hango.kernel.canonical import sha256_hex
from hango.kernel.errors import Forbidden, InvalidInput, NotAwaitingApproval, PartialDecision, StaleApproval
from hango.kernel.models import PendingApproval, Run
from hango.services import approval_policy as policy
from hango.services.approvals import checks
from hango.services.approvals.commands import CallRef, DecisionCommand, DecisionKind

TENANT = uuid.uuid4()
ADMIN = Principal(TENANT, uuid.uuid4(), "admin")
WRITE = Tool(
    "write_file",
    "Write a file.",
    {
        "type": "object",
        "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file_path", "content"],
        "additionalProperties": False,
    },
    lambda context, args: "written",
)


def _tools() -> ToolRegistry:
    tools = ToolRegistry()
    tools.add(WRITE)
    return tools


def _approval(call_id: str, **fields: Any) -> PendingApproval:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "tool_call_id": call_id,
        "tool_name": "write_file",
        "arguments": {"file_path": "/memories/a.md", "content": "x"},
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
        "state": "pending",
        "approvals_required": 1,
        "reviewers": None,
        "votes": [],
        **fields,
    }
    return PendingApproval(**values)


def _decision(row: PendingApproval, kind: DecisionKind = "approve", **fields: Any) -> DecisionCommand:
    return DecisionCommand(CallRef(approval_id=row.id), kind, **fields)


def _standing(rows: list[PendingApproval]) -> dict[uuid.UUID, policy.Standing]:
    return policy.standing(ADMIN, rows)


def _fields(error: InvalidInput) -> list[str]:
    return [item.field for item in error.errors]


def test_each_decision_resolves_to_the_approval_it_names_by_either_reference() -> None:
    first, second = _approval("a"), _approval("b")
    by_id = DecisionCommand(CallRef(approval_id=first.id), "approve")
    by_call = DecisionCommand(CallRef(tool_call_id="b"), "approve")
    assert checks.resolve((by_id, by_call), [first, second]) == [first, second]


@pytest.mark.parametrize(
    ("ref", "field"),
    [
        (CallRef(approval_id=uuid.uuid4()), "decisions[0].approval_id"),
        (CallRef(tool_call_id="nope"), "decisions[0].tool_call_id"),
    ],
)
def test_a_decision_naming_no_approval_of_the_run_is_a_400_on_its_reference(ref: CallRef, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        checks.resolve((DecisionCommand(ref, "approve"),), [_approval("a")])
    assert _fields(refused.value) == [field]


def test_two_references_to_different_calls_or_one_call_twice_are_refused() -> None:
    first, second = _approval("a"), _approval("b")
    crossed = DecisionCommand(CallRef(approval_id=first.id, tool_call_id="b"), "approve")
    with pytest.raises(InvalidInput) as refused:
        checks.resolve((crossed,), [first, second])
    assert _fields(refused.value) == ["decisions[0].approval_id"]
    twice = (_decision(first), DecisionCommand(CallRef(tool_call_id="a"), "reject", message="no"))
    with pytest.raises(InvalidInput) as refused:
        checks.resolve(twice, [first, second])
    assert _fields(refused.value) == ["decisions[1]"]


def test_a_caller_outside_an_approvals_reviewers_is_refused_only_for_the_approvals_it_names() -> None:
    owners_only = _approval("a", reviewers={"roles": ["owner"]})
    anyone = _approval("b")
    checks.check_reviewers([owners_only, anyone], _standing([owners_only, anyone]), {anyone.id})
    with pytest.raises(Forbidden, match="role owner"):
        checks.check_reviewers([owners_only, anyone], _standing([owners_only, anyone]), {owners_only.id})


def test_a_decision_its_rule_does_not_allow_and_an_edit_outside_the_schema_or_the_rule_are_400s() -> None:
    limited = _approval("a", allowed_decisions=["approve", "reject"])
    with pytest.raises(InvalidInput) as refused:
        checks.check_decisions(_tools(), {}, _standing([limited]), (_decision(limited, "edit", args={}),), [limited])
    assert _fields(refused.value) == ["decisions[0].decision"]

    quorum = _approval("q", approvals_required=2)
    with pytest.raises(InvalidInput, match="only approve or reject is a vote"):
        checks.check_decisions(
            _tools(), {}, _standing([quorum]), (_decision(quorum, "respond", message="m"),), [quorum]
        )

    row = _approval("e")
    with pytest.raises(InvalidInput) as refused:
        checks.check_decisions(
            _tools(), {}, _standing([row]), (_decision(row, "edit", args={"file_path": 3, "content": ""}),), [row]
        )
    assert _fields(refused.value) == ["decisions[0].args.file_path"]

    # The rule of the loop that held the call: an edit must stay where the rule made the call wait.
    holding = {row.id: {"write_file": InterruptRule(("edit",), when={"file_path": {"prefix": "/memories/"}})}}
    outside = _decision(row, "edit", args={"file_path": "/tmp/x", "content": ""})
    with pytest.raises(InvalidInput, match="leave the scope of the rule"):
        checks.check_decisions(_tools(), holding, _standing([row]), (outside,), [row])
    inside = _decision(row, "edit", args={"file_path": "/memories/b.md", "content": ""})
    checks.check_decisions(_tools(), holding, _standing([row]), (inside,), [row])


def test_a_decision_bound_to_other_arguments_is_stale() -> None:
    row = _approval("a")
    checks.check_seen((_decision(row, arguments_sha256=sha256_hex(row.arguments)),), [row])
    with pytest.raises(StaleApproval):
        checks.check_seen((_decision(row, arguments_sha256="0" * 64),), [row])


def test_a_request_must_find_the_run_waiting_and_cover_every_call_that_waits_on_the_caller() -> None:
    first, second = _approval("a"), _approval("b")
    others = _approval("c", reviewers={"roles": ["owner"]})
    waiting = Run(id=uuid.uuid4(), state="awaiting_approval")
    checks.check_complete(waiting, [first, others], _standing([first, others]), [first])
    with pytest.raises(PartialDecision) as partial:
        checks.check_complete(waiting, [first, second, others], _standing([first, second, others]), [first])
    assert [item["tool_call_id"] for item in partial.value.remaining] == ["b"]
    with pytest.raises(NotAwaitingApproval):
        checks.check_complete(Run(id=uuid.uuid4(), state="queued"), [first], _standing([first]), [first])
    decided = _approval("d", state="decided")
    with pytest.raises(NotAwaitingApproval, match="already decided"):
        checks.check_complete(waiting, [decided], _standing([decided]), [decided])
