"""The middleware chain, the pinned default stack, and the built-in middlewares."""

from __future__ import annotations

from typing import Any

from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult, text_block, tool_use_block
from hango.agent.middleware.allowlist import ToolAllowlist
from hango.agent.middleware.base import (
    Chain,
    LoopScope,
    Middleware,
    ModelCall,
    ModelHandler,
    ToolCallRequest,
    ToolHandler,
)
from hango.agent.middleware.memory import MEMORY_PATH, Memory
from hango.agent.middleware.repair import INTERRUPTED, RepairToolCalls
from hango.agent.middleware.stack import SLOTS, default_middlewares
from hango.agent.models.base import ModelRequest, ToolSpec
from hango.agent.state import LoopState
from tests.unit.fakes import MemoryPort


def test_the_default_stack_order_is_pinned() -> None:
    assert SLOTS == ("tracing", "repair_tool_calls", "memory", "human_in_the_loop", "tool_allowlist", "metrics")
    assert [type(m).__name__ for m in default_middlewares(["ls"])] == [
        "Tracing",
        "RepairToolCalls",
        "Memory",
        "HumanInTheLoop",
        "ToolAllowlist",
        "Metrics",
    ]
    assert [m.name for m in default_middlewares(["ls"])] == list(SLOTS)


def test_emptying_the_human_in_the_loop_slot_disables_interrupts() -> None:
    names = [m.name for m in default_middlewares(["ls"], None, {"human_in_the_loop": None})]
    assert names == ["tracing", "repair_tool_calls", "memory", "tool_allowlist", "metrics"]


def _scope(messages: list[Message] | None = None, suspended_batch: list[str] | None = None) -> LoopScope:
    return LoopScope(MemoryPort(), LoopState(messages or [], suspended_batch=suspended_batch or []), [])


class Recorder(Middleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        self.log.append(f"{self.name}>")
        turn = handler(call)
        self.log.append(f"<{self.name}")
        return turn

    def wrap_tool_call(self, request: ToolCallRequest, handler: ToolHandler) -> ToolResult:
        self.log.append(f"{self.name}>")
        result = handler(request)
        self.log.append(f"<{self.name}")
        return result

    def before_run(self, scope: LoopScope) -> None:
        self.log.append(f"before:{self.name}")

    def after_run(self, scope: LoopScope, outcome: Any) -> None:
        self.log.append(f"after:{self.name}")


def test_the_first_middleware_is_the_outermost() -> None:
    log: list[str] = []
    chain = Chain([Recorder("a", log), Recorder("b", log)])
    scope = _scope()
    chain.before_run(scope)
    chain.model_call(ModelCall(ModelRequest("", []), scope), lambda call: AssistantTurn(text=log.append("model") or ""))
    chain.after_run(scope, None)  # type: ignore[arg-type]
    assert log == ["before:a", "before:b", "a>", "b>", "model", "<b", "<a", "after:b", "after:a"]


def _assistant(*calls: ToolCall) -> Message:
    return Message("assistant", [text_block("t")] + [tool_use_block(call) for call in calls])


def _results(*ids: str) -> Message:
    return Message("tool", [ToolResult(i, "ok").block() for i in ids])


def test_repair_answers_only_the_dangling_calls() -> None:
    history = [
        Message("user", [text_block("go")]),
        _assistant(ToolCall("a", "ls", {})),
        _results("a"),
        _assistant(ToolCall("b", "ls", {}), ToolCall("c", "ls", {})),
    ]
    scope = _scope(history)
    RepairToolCalls().before_run(scope)
    [repair] = scope.added
    assert repair.role == "tool"
    assert repair.content == [
        {"type": "tool_result", "tool_use_id": "b", "content": INTERRUPTED, "is_error": True},
        {"type": "tool_result", "tool_use_id": "c", "content": INTERRUPTED, "is_error": True},
    ]
    assert scope.state.messages[-1] is repair


def test_repair_skips_the_calls_of_a_suspended_batch() -> None:
    history = [
        Message("user", [text_block("go")]),
        _assistant(ToolCall("b", "write_file", {}), ToolCall("c", "ls", {})),
    ]
    scope = _scope(history, ["b"])
    RepairToolCalls().before_run(scope)
    [repair] = scope.added
    assert [block["tool_use_id"] for block in repair.content] == ["c"]


def test_repair_leaves_a_complete_history_alone() -> None:
    scope = _scope([Message("user", [text_block("go")]), _assistant(ToolCall("a", "ls", {})), _results("a")])
    RepairToolCalls().before_run(scope)
    assert scope.added == []


def test_memory_is_injected_into_the_system_prompt_when_present() -> None:
    scope = _scope()
    seen: list[str] = []

    def model(call: ModelCall) -> AssistantTurn:
        seen.append(call.request.system)
        return AssistantTurn()

    Memory().wrap_model_call(ModelCall(ModelRequest("You keep notes.", []), scope), model)
    scope.services.files_view.write(MEMORY_PATH, "The user likes tea.")  # type: ignore[attr-defined]
    Memory().wrap_model_call(ModelCall(ModelRequest("You keep notes.", []), scope), model)
    assert seen[0] == "You keep notes."
    assert seen[1].startswith("You keep notes.\n\n<agent_memory")
    assert "The user likes tea." in seen[1]


def test_the_allowlist_filters_offered_tools_and_refuses_other_calls() -> None:
    allow = ToolAllowlist(["ls"])
    scope = _scope()
    offered: list[str] = []

    def model(call: ModelCall) -> AssistantTurn:
        offered.extend(tool.name for tool in call.request.tools)
        return AssistantTurn()

    tools = [ToolSpec("ls", "", {}), ToolSpec("grep", "", {})]
    allow.wrap_model_call(ModelCall(ModelRequest("", [], tools), scope), model)
    assert offered == ["ls"]
    ran: list[str] = []

    def handler(request: ToolCallRequest) -> ToolResult:
        ran.append(request.call.name)
        return ToolResult(request.call.id, "ran")

    refused = allow.wrap_tool_call(ToolCallRequest(ToolCall("x", "grep", {}), None, None, scope), handler)  # type: ignore[arg-type]
    allowed = allow.wrap_tool_call(ToolCallRequest(ToolCall("y", "ls", {}), None, None, scope), handler)  # type: ignore[arg-type]
    assert refused.is_error
    assert not allowed.is_error
    assert ran == ["ls"]
