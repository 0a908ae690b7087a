"""The human-in-the-loop middleware on its own: how each decision is applied when a batch is re-driven."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from hango.agent.interrupts import InterruptRule
from hango.agent.messages import Message, ToolCall, ToolResult, tool_use_block
from hango.agent.middleware.base import LoopScope, Phase, ToolCallRequest
from hango.agent.middleware.hitl import DECISIONS_KEY, HumanInTheLoop, rejection_text
from hango.agent.state import LoopState
from hango.agent.tools.base import Tool, ToolContext
from hango.models import DECISIONS
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


def _request(decision: dict[str, Any] | None, phase: Phase = "execute") -> ToolCallRequest:
    call = ToolCall("w", "write_file", dict(ORIGINAL))
    private = {DECISIONS_KEY: {"w": decision}} if decision is not None else {}
    state = LoopState([Message("assistant", [tool_use_block(call)])], private)
    scope = LoopScope(MemoryPort(), state, [])
    context = ToolContext(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), call.id, MemoryFiles())  # type: ignore[arg-type]
    return ToolCallRequest(call, WRITE, context, scope, phase)


def _apply(
    decision: dict[str, Any] | None, rule: InterruptRule = SCOPED, phase: Phase = "execute"
) -> tuple[ToolResult, ToolCallRequest, Innermost]:
    request, innermost = _request(decision, phase), Innermost()
    result = HumanInTheLoop({"write_file": rule}).wrap_tool_call(request, innermost)
    return result, request, innermost


def _model_input(request: ToolCallRequest) -> Any:
    [message] = request.scope.state.messages
    return message.content[0]["input"]


def test_approve_runs_the_original_call_once_and_consumes_the_decision() -> None:
    result, request, innermost = _apply({"decision": "approve", "decided_by": "u"})
    assert [r.call.input for r in innermost.requests] == [ORIGINAL]
    assert result == ToolResult("w", f"ran with {json.dumps(ORIGINAL, sort_keys=True)}")
    assert DECISIONS_KEY not in request.scope.state.private
    assert request.scope.pending == []


def test_edit_runs_the_edited_arguments_and_keeps_the_models_input() -> None:
    edited = {"file_path": "/memories/notes.md", "content": "the human's text"}
    result, request, innermost = _apply({"decision": "edit", "args": edited})
    assert [r.call.input for r in innermost.requests] == [edited]
    assert [r.call.id for r in innermost.requests] == ["w"]
    assert result.content == f"ran with {json.dumps(edited, sort_keys=True)}"
    assert not result.is_error
    assert request.call.input == ORIGINAL
    assert _model_input(request) == ORIGINAL
    assert DECISIONS_KEY not in request.scope.state.private


@pytest.mark.parametrize(
    "path", ["/notes.txt", "/memories/../notes.txt", "/memoriesx/a", "/../memories/a", "memories/a"]
)
def test_an_edit_out_of_the_rules_scope_is_refused_by_the_worker_too(path: str) -> None:
    """The API checks this first; the middleware checks again so no path hands the tool unchecked input."""
    result, request, innermost = _apply({"decision": "edit", "args": {"file_path": path, "content": "x"}})
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
    result, _, innermost = _apply({"decision": "edit", "args": args})
    assert innermost.requests == []
    assert result.is_error
    assert "schema" in result.content


def test_an_edit_under_a_rule_without_when_needs_only_the_schema() -> None:
    edited = {"file_path": "/notes.txt", "content": "x"}
    result, _, innermost = _apply({"decision": "edit", "args": edited}, InterruptRule(tuple(DECISIONS)))
    assert [r.call.input for r in innermost.requests] == [edited]
    assert not result.is_error


def test_reject_does_not_run_and_is_an_error_holding_the_message_verbatim() -> None:
    result, request, innermost = _apply({"decision": "reject", "message": MESSAGE})
    assert innermost.requests == []
    assert result == ToolResult("w", rejection_text(MESSAGE), is_error=True)
    assert MESSAGE in result.content
    assert DECISIONS_KEY not in request.scope.state.private


def test_respond_does_not_run_and_the_message_is_the_result() -> None:
    result, request, innermost = _apply({"decision": "respond", "message": MESSAGE})
    assert innermost.requests == []
    assert result == ToolResult("w", MESSAGE, is_error=False)
    assert DECISIONS_KEY not in request.scope.state.private


@pytest.mark.parametrize("kind", ["approve", "edit", "reject", "respond"])
def test_planning_a_decided_call_passes_it_on_and_keeps_the_decision(kind: str) -> None:
    decision = {"decision": kind, "args": {"file_path": "/notes.txt", "content": "x"}, "message": MESSAGE}
    result, request, innermost = _apply(decision, phase="plan")
    assert [r.call.input for r in innermost.requests] == [ORIGINAL]
    assert not result.is_error
    assert request.scope.pending == []
    assert request.scope.state.private[DECISIONS_KEY] == {"w": decision}


def test_an_undecided_matching_call_registers_when_planned_and_never_runs_unplanned() -> None:
    planned, request, innermost = _apply(None, phase="plan")
    assert [p.call.id for p in request.scope.pending] == ["w"]
    assert request.scope.pending[0].allowed_decisions == tuple(DECISIONS)
    assert len(innermost.requests) == 1
    assert not planned.is_error
    executed, request, innermost = _apply(None)
    assert innermost.requests == []
    assert executed.is_error
    assert request.scope.pending == []
