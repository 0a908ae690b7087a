"""The human-in-the-loop middleware on its own: which calls its review holds, and how each decision is applied
when a batch is re-driven."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import pytest

from hango.agent.interrupts import InterruptRule
from hango.agent.messages import Message, ToolCall, ToolResult, tool_use_block
from hango.agent.middleware.base import LoopScope, ToolCallRequest
from hango.agent.middleware.hitl import OUTCOME_UNKNOWN, HumanInTheLoop, rejection_text
from hango.agent.state import Decision, LoopState, PendingCall
from hango.agent.tools.base import Tool, ToolContext
from hango.kernel.models import DECISIONS
from tests.unit.fakes import MemoryFiles, MemoryPort

ORIGINAL = {"file_path": "/memories/AGENTS.md", "content": "the model's text"}
SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"],
    "additionalProperties": False,
}
WRITE = Tool("write_file", "Write a file.", SCHEMA, lambda context, args: "unused")
SCOPED = InterruptRule(tuple(DECISIONS), {"file_path": {"prefix": "/memories/"}})
MESSAGE = '  Not this file.\n  Use «notes» instead: {"x": 1} %s \\n\n'


class Innermost:
    """The rest of the chain: records every request that reaches it."""

    def __init__(self) -> None:
        self.requests: list[ToolCallRequest] = []

    def __call__(self, request: ToolCallRequest) -> ToolResult:
        self.requests.append(request)
        return ToolResult(request.call.id, f"ran with {json.dumps(request.call.input, sort_keys=True)}")


def _decision(kind: str, args: dict[str, Any] | None = None, message: str = "") -> Decision:
    return Decision(kind, str(uuid.uuid4()), args, message, "u")


def _request(decision: Decision | None) -> ToolCallRequest:
    call = ToolCall("w", "write_file", dict(ORIGINAL))
    state = LoopState([Message("assistant", [tool_use_block(call)])])
    if decision is not None:
        state.decisions = {"w": decision}
    scope = LoopScope(MemoryPort(), state, [])
    context = ToolContext(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), call.id, MemoryFiles())  # type: ignore[arg-type]
    return ToolCallRequest(call, WRITE, context, scope)


def _apply(decision: Decision | None, rule: InterruptRule = SCOPED) -> tuple[ToolResult, ToolCallRequest, Innermost]:
    request, innermost = _request(decision), Innermost()
    result = HumanInTheLoop({"write_file": rule}).wrap_tool_call(request, innermost)
    return result, request, innermost


def _model_input(request: ToolCallRequest) -> Any:
    [message] = request.scope.state.messages
    return message.content[0]["input"]


def test_approve_runs_the_original_call_once_and_consumes_the_decision() -> None:
    result, request, innermost = _apply(_decision("approve"))
    assert [r.call.input for r in innermost.requests] == [ORIGINAL]
    assert result == ToolResult("w", f"ran with {json.dumps(ORIGINAL, sort_keys=True)}")
    assert request.scope.state.decisions == {}


def test_edit_runs_the_edited_arguments_and_keeps_the_models_input() -> None:
    edited = {"file_path": "/memories/notes.md", "content": "the human's text"}
    result, request, innermost = _apply(_decision("edit", edited))
    assert [r.call.input for r in innermost.requests] == [edited]
    assert [r.call.id for r in innermost.requests] == ["w"]
    assert result.content == f"ran with {json.dumps(edited, sort_keys=True)}"
    assert not result.is_error
    assert request.call.input == ORIGINAL
    assert _model_input(request) == ORIGINAL
    assert request.scope.state.decisions == {}


@pytest.mark.parametrize(
    "path", ["/notes.txt", "/memories/../notes.txt", "/memoriesx/a", "/../memories/a", "memories/a"]
)
def test_an_edit_out_of_the_rules_scope_is_refused_by_the_worker_too(path: str) -> None:
    """The API checks this first; the middleware checks again so no path hands the tool unchecked input."""
    result, request, innermost = _apply(_decision("edit", {"file_path": path, "content": "x"}))
    assert innermost.requests == []
    assert result.is_error
    assert result.tool_use_id == "w"
    assert "scope" in result.content
    assert _model_input(request) == ORIGINAL


@pytest.mark.parametrize(
    "args",
    [
        {"file_path": "/memories/a"},
        {"file_path": "/memories/a", "content": 5},
        {"file_path": "/memories/a", "content": "x", "mode": "append"},
    ],
)
def test_an_edit_that_breaks_the_tools_schema_is_refused_by_the_worker_too(args: dict[str, Any]) -> None:
    result, _, innermost = _apply(_decision("edit", args))
    assert innermost.requests == []
    assert result.is_error
    assert "schema" in result.content


def test_an_edit_under_a_rule_without_when_needs_only_the_schema() -> None:
    edited = {"file_path": "/notes.txt", "content": "x"}
    result, _, innermost = _apply(_decision("edit", edited), InterruptRule(tuple(DECISIONS)))
    assert [r.call.input for r in innermost.requests] == [edited]
    assert not result.is_error


def test_reject_does_not_run_and_is_an_error_holding_the_message_verbatim() -> None:
    result, request, innermost = _apply(_decision("reject", message=MESSAGE))
    assert innermost.requests == []
    assert result == ToolResult("w", rejection_text(MESSAGE), is_error=True)
    assert MESSAGE in result.content
    assert request.scope.state.decisions == {}


def test_respond_does_not_run_and_the_message_is_the_result() -> None:
    result, request, innermost = _apply(_decision("respond", message=MESSAGE))
    assert innermost.requests == []
    assert result == ToolResult("w", MESSAGE, is_error=False)
    assert request.scope.state.decisions == {}


@pytest.mark.parametrize("kind", ["approve", "edit", "reject", "respond"])
def test_the_review_never_holds_a_decided_call_and_keeps_its_decision(kind: str) -> None:
    decision = _decision(kind, {"file_path": "/notes.txt", "content": "x"}, MESSAGE)
    request = _request(decision)
    assert HumanInTheLoop({"write_file": SCOPED}).review_tool_call(request) is None
    assert request.scope.state.decisions == {"w": decision}


def test_the_review_holds_an_undecided_matching_call_which_never_runs_unreviewed() -> None:
    request = _request(None)
    assert HumanInTheLoop({"write_file": SCOPED}).review_tool_call(request) == PendingCall(
        request.call, tuple(DECISIONS)
    )
    executed, request, innermost = _apply(None)
    assert innermost.requests == []
    assert executed.is_error


def test_the_review_holds_nothing_with_interrupts_off_or_for_a_call_that_could_not_run() -> None:
    assert HumanInTheLoop({"write_file": SCOPED}, interrupts=False).review_tool_call(_request(None)) is None
    request = _request(None)
    broken = ToolCallRequest(
        ToolCall("w", "write_file", {"file_path": "/memories/a"}), WRITE, request.context, request.scope
    )
    assert HumanInTheLoop({"write_file": SCOPED}).review_tool_call(broken) is None
    unknown = ToolCallRequest(request.call, None, request.context, request.scope)
    assert HumanInTheLoop({"write_file": SCOPED}).review_tool_call(unknown) is None
    outside = ToolCallRequest(
        ToolCall("w", "write_file", {"file_path": "/notes.md", "content": "x"}), WRITE, request.context, request.scope
    )
    assert HumanInTheLoop({"write_file": SCOPED}).review_tool_call(outside) is None


class MarkingInnermost(Innermost):
    """Records, when the tool runs, which approvals were already marked executing."""

    def __init__(self, port: MemoryPort) -> None:
        super().__init__()
        self.port = port
        self.marked_before: list[list[str]] = []

    def __call__(self, request: ToolCallRequest) -> ToolResult:
        self.marked_before.append(list(self.port.executing))
        return super().__call__(request)


def _apply_marked(decision: Decision, tool: Tool = WRITE) -> tuple[ToolResult, ToolCallRequest, MarkingInnermost]:
    request = dataclasses.replace(_request(decision), tool=tool)
    port = request.scope.services
    assert isinstance(port, MemoryPort)
    innermost = MarkingInnermost(port)
    result = HumanInTheLoop({"write_file": SCOPED}).wrap_tool_call(request, innermost)
    return result, request, innermost


@pytest.mark.parametrize("kind", ["approve", "edit"])
def test_an_approved_call_is_marked_executing_before_it_runs_and_done_after(kind: str) -> None:
    decision = _decision(kind, {**ORIGINAL, "content": "edited"} if kind == "edit" else None)
    _, request, innermost = _apply_marked(decision)
    assert innermost.marked_before == [[decision.approval_id]]
    assert [r.context.idempotency_key for r in innermost.requests] == [decision.approval_id]
    assert request.scope.state.executions == {decision.approval_id: "done"}


@pytest.mark.parametrize(("kind", "message"), [("reject", "no"), ("respond", "42")])
def test_an_answered_call_is_never_marked(kind: str, message: str) -> None:
    _, request, innermost = _apply_marked(_decision(kind, message=message))
    assert innermost.requests == []
    assert isinstance(request.scope.services, MemoryPort)
    assert request.scope.services.executing == []
    assert request.scope.state.executions == {}


def test_an_edit_the_worker_refuses_never_starts() -> None:
    _, request, innermost = _apply_marked(_decision("edit", {"file_path": "/elsewhere.md", "content": "x"}))
    assert innermost.requests == []
    assert request.scope.state.executions == {}


def test_a_call_left_executing_by_a_dead_worker_is_not_run_again_unless_idempotent() -> None:
    left = dataclasses.replace(_decision("approve"), execution="executing")
    result, request, innermost = _apply_marked(left)
    assert innermost.requests == []
    assert result == ToolResult("w", OUTCOME_UNKNOWN, is_error=True)
    assert request.scope.state.executions == {left.approval_id: "outcome_unknown"}

    again = dataclasses.replace(WRITE, idempotent=True)
    result, request, innermost = _apply_marked(left, again)
    assert [r.context.idempotency_key for r in innermost.requests] == [left.approval_id]
    assert innermost.marked_before == [[left.approval_id]]
    assert request.scope.state.executions == {left.approval_id: "done"}
