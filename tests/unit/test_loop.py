"""The resumable loop against in-memory persistence: outcomes, persistence order, resume after a crash."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hango.agent.loop import AgentLoop, LoopConfig, RunStopped, SuspendBatch
from hango.agent.messages import Message, ToolCall, text_block
from hango.agent.middleware.stack import default_chain
from hango.agent.models.base import PermanentModelError
from hango.agent.models.scripted import EXHAUSTED_TEXT, ScriptedModel, generated_call_id
from hango.agent.state import (
    STATE_VERSION,
    AwaitingApproval,
    Done,
    Failed,
    LoopState,
    PendingCall,
    StandingApproval,
    StateVersionError,
    dump_state,
    load_state,
)
from hango.agent.tools.base import Tool, ToolRegistry
from tests.unit.fakes import MemoryPort

CALLS: list[str] = []


def _echo(context: Any, args: dict[str, Any]) -> str:
    CALLS.append(args["text"])
    return args["text"].upper()


ECHO = Tool(
    "echo",
    "Echo text.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
    _echo,
)


def _loop(script: list[dict[str, Any]], port: MemoryPort, max_turns: int = 10) -> AgentLoop:
    registry = ToolRegistry([ECHO])
    config = LoopConfig(system_prompt="sys", tool_names=("echo",), max_turns=max_turns)
    return AgentLoop(config, ScriptedModel(script, "run-1"), default_chain(["echo"]), registry, port, port)


def _start() -> LoopState:
    return LoopState([Message("user", [text_block("go")], seq=1)])


def test_a_loop_persists_each_turn_and_each_batch_then_is_done() -> None:
    CALLS.clear()
    port = MemoryPort()
    script = [
        {"text": "a", "tool_calls": [{"name": "echo", "args": {"text": "x"}}, {"name": "echo", "args": {"text": "y"}}]},
        {"text": "b"},
    ]
    outcome = _loop(script, port).run(_start())
    assert outcome == Done("b")
    # The final answer is handed back for the caller's finishing transaction, not stored by the loop.
    assert [m.role for m in port.stored] == ["assistant", "tool"]
    assert isinstance(outcome, Done)
    assert [(m.role, m.content, m.seq) for m in outcome.unsaved] == [("assistant", [text_block("b")], None)]
    assert [block["content"] for block in port.stored[1].content] == ["X", "Y"]
    assert CALLS == ["x", "y"]
    assert port.started == [generated_call_id("run-1", 0, 0), generated_call_id("run-1", 0, 1)]


def test_invalid_arguments_become_an_error_result_without_running_the_tool() -> None:
    CALLS.clear()
    port = MemoryPort()
    _loop([{"tool_calls": [{"name": "echo", "args": {"text": 5}}]}], port).run(_start())
    [result] = port.stored[1].content
    assert result["is_error"]
    assert "invalid arguments for echo" in result["content"]
    assert CALLS == []


def test_max_turns_is_enforced() -> None:
    port = MemoryPort()
    outcome = _loop([{"tool_calls": [{"name": "echo", "args": {"text": "x"}}]}] * 9, port, max_turns=3).run(_start())
    assert outcome == Failed("the run reached its limit of 3 turns")
    assert sum(m.role == "assistant" for m in port.stored) == 3


def test_a_stopped_run_ends_without_further_writes() -> None:
    port = MemoryPort(stop_after=1)
    with pytest.raises(RunStopped, match="stopped by the test"):
        _loop([{"tool_calls": [{"name": "echo", "args": {"text": "x"}}]}, {"text": "b"}], port).run(_start())
    assert [m.role for m in port.stored] == ["assistant"]


def test_resuming_after_a_crash_repairs_then_continues_without_rerunning_completed_calls() -> None:
    CALLS.clear()
    script = [
        {"tool_calls": [{"id": "done-call", "name": "echo", "args": {"text": "first"}}]},
        {"tool_calls": [{"id": "lost-call", "name": "echo", "args": {"text": "second"}}]},
        {"text": "finished"},
    ]
    history = [
        Message("user", [text_block("go")], seq=1),
        Message(
            "assistant", [{"type": "tool_use", "id": "done-call", "name": "echo", "input": {"text": "first"}}], seq=2
        ),
        Message(
            "tool", [{"type": "tool_result", "tool_use_id": "done-call", "content": "FIRST", "is_error": False}], seq=3
        ),
        Message(
            "assistant", [{"type": "tool_use", "id": "lost-call", "name": "echo", "input": {"text": "second"}}], seq=4
        ),
    ]
    port = MemoryPort()
    outcome = _loop(script, port).run(LoopState(history))
    assert outcome == Done("finished")
    assert isinstance(outcome, Done)
    assert CALLS == []
    [repair] = port.stored
    [final] = outcome.unsaved
    assert repair.content[0]["tool_use_id"] == "lost-call"
    assert repair.content[0]["content"] == "tool call interrupted"
    assert final.role == "assistant"


def test_a_permanent_model_error_fails_the_run_with_its_message() -> None:
    class Broken:
        def complete(self, request: Any) -> Any:
            raise PermanentModelError("anthropic: 401 invalid x-api-key")

    port = MemoryPort()
    loop = AgentLoop(LoopConfig("", (), 5), Broken(), default_chain([]), ToolRegistry(), port, port)
    assert loop.run(_start()) == Failed("anthropic: 401 invalid x-api-key")


def test_the_scripted_model_plays_by_persisted_turn_and_then_says_done() -> None:
    model = ScriptedModel(
        [{"text": "one"}, {"text": "two", "tool_calls": [{"id": "given", "name": "echo", "args": {}}]}], "s"
    )
    from hango.agent.models.base import ModelRequest

    history: list[Message] = [Message("user", [text_block("go")])]
    assert model.complete(ModelRequest("", history)).text == "one"
    history.append(Message("assistant", [text_block("one")]))
    second = model.complete(ModelRequest("", history))
    assert (second.text, [c.id for c in second.tool_calls]) == ("two", ["given"])
    history.append(Message("assistant", [text_block("two")]))
    assert model.complete(ModelRequest("", history)).text == EXHAUSTED_TEXT


def test_persisted_state_has_a_schema_version_and_newer_ones_are_refused() -> None:
    stored = {"version": STATE_VERSION, "private": {"suspended_batch": ["a", "b"], "approval_decisions": {}}}
    assert load_state(stored, []).suspended_batch == ["a", "b"]
    assert load_state(dump_state(load_state(stored, [])), []).suspended_batch == ["a", "b"]
    assert load_state({}, []) == LoopState([])
    with pytest.raises(StateVersionError, match="schema version 99"):
        load_state({"version": 99, "private": {}}, [])


def test_a_batch_whose_held_calls_a_grant_covers_runs_at_once_as_a_held_batch_decided_by_the_grant() -> None:
    CALLS.clear()
    port = MemoryPort(grants={"echo": StandingApproval(uuid.uuid4(), uuid.uuid4())})
    script = [{"tool_calls": [{"id": "e", "name": "echo", "args": {"text": "x"}}]}, {"text": "b"}]
    registry = ToolRegistry([ECHO])
    config = LoopConfig(system_prompt="sys", tool_names=("echo",), max_turns=10)
    chain = default_chain(["echo"], {"echo": True})
    state = _start()
    outcome = AgentLoop(config, ScriptedModel(script, "run-1"), chain, registry, port, port).run(state)

    assert outcome == Done("b")
    assert CALLS == ["x"]
    assert port.granted == ["e"]
    # The call ran as an approved one: marked before it ran, done with its result; the batch held until then.
    [approval_id] = port.executing
    assert port.executions == {approval_id: "done"}
    assert state.suspended_batch == []
    assert state.decisions == {}


def test_a_batch_with_one_call_no_grant_covers_suspends_whole() -> None:
    CALLS.clear()
    port = MemoryPort(grants={"echo": StandingApproval(uuid.uuid4(), uuid.uuid4())})
    calls = [{"id": "e", "name": "echo", "args": {"text": "x"}}, {"id": "w", "name": "write_file", "args": {}}]
    registry = ToolRegistry([ECHO, Tool("write_file", "w", {"type": "object"}, _echo)])
    config = LoopConfig(system_prompt="sys", tool_names=("echo", "write_file"), max_turns=10)
    chain = default_chain(["echo", "write_file"], {"echo": True, "write_file": True})
    outcome = AgentLoop(config, ScriptedModel([{"tool_calls": calls}], "run-1"), chain, registry, port, port).run(
        _start()
    )

    assert isinstance(outcome, AwaitingApproval)
    assert [(p.call.id, p.granted is not None) for p in outcome.pending] == [("e", True), ("w", False)]
    assert CALLS == []
    assert port.granted == []


def test_a_grant_revoked_before_its_call_is_recorded_sends_the_call_back_to_a_human() -> None:
    CALLS.clear()
    port = MemoryPort(grants={"echo": StandingApproval(uuid.uuid4(), uuid.uuid4())}, revoke_on_record=True)
    script = [{"tool_calls": [{"id": "e", "name": "echo", "args": {"text": "x"}}]}]
    registry = ToolRegistry([ECHO])
    config = LoopConfig(system_prompt="sys", tool_names=("echo",), max_turns=10)
    chain = default_chain(["echo"], {"echo": True})
    outcome = AgentLoop(config, ScriptedModel(script, "run-1"), chain, registry, port, port).run(_start())

    assert isinstance(outcome, AwaitingApproval)
    assert [(p.call.id, p.granted) for p in outcome.pending] == [("e", None)]
    assert CALLS == []
    assert port.executing == []


def test_announced_calls_are_persisted_and_a_state_stored_before_them_loads_with_none() -> None:
    state = LoopState([], suspended_batch=["t", "c"], announced=["t"])
    assert load_state(dump_state(state), []).announced == ["t"]
    assert "announced" not in dump_state(LoopState([]))["private"]
    # The layout of a state an earlier release stored: it resumes, with nothing announced yet.
    earlier = {"version": 1, "private": {"suspended_batch": ["t", "c"], "suspended_at": "2024-05-01T10:00:00+00:00"}}
    assert load_state(earlier, []).announced == []


TASK = "task"  # the name the repair middleware re-drives instead of repairing


def _delegating(waits: list[bool]) -> Tool:
    """A ``task`` tool whose child waits for a human as many times as ``waits`` says, then answers."""

    def handler(context: Any, args: dict[str, Any]) -> str:
        if waits.pop(0):
            raise SuspendBatch([PendingCall(ToolCall("inner", "write_file", {}), ("approve",))])
        return "child done"

    return Tool(TASK, "Delegate.", {"type": "object"}, handler, delegates=True)


def test_a_delegating_call_re_driven_after_each_suspension_of_its_child_is_announced_once() -> None:
    CALLS.clear()
    port = MemoryPort()
    registry = ToolRegistry([ECHO, _delegating([True, True, False])])
    calls = [{"id": "t", "name": TASK, "args": {}}, {"id": "e", "name": "echo", "args": {"text": "x"}}]
    config = LoopConfig(system_prompt="sys", tool_names=("echo", TASK), max_turns=10)
    script = [{"tool_calls": calls}, {"text": "b"}]
    state = _start()
    for _ in range(2):
        loop = AgentLoop(config, ScriptedModel(script, "run-1"), default_chain(["echo", TASK]), registry, port, port)
        assert isinstance(loop.run(state), AwaitingApproval)
        # What the next worker resumes from: the stored state (the history is stored as it was made).
        state = load_state(dump_state(state), state.messages)
        assert state.announced == ["t"]
    loop = AgentLoop(config, ScriptedModel(script, "run-1"), default_chain(["echo", TASK]), registry, port, port)
    assert loop.run(state) == Done("b")
    assert port.started == ["t", "e"]
    assert CALLS == ["x"]
    assert state.announced == []


def test_a_call_announced_before_a_crash_is_finished_by_its_repair_and_not_announced_again() -> None:
    CALLS.clear()
    history = [
        Message("user", [text_block("go")], seq=1),
        Message("assistant", [{"type": "tool_use", "id": "lost", "name": "echo", "input": {"text": "x"}}], seq=2),
    ]
    port = MemoryPort()
    state = LoopState(history, announced=["lost"])
    assert _loop([{"text": "unused"}, {"text": "finished"}], port).run(state) == Done("finished")
    assert (port.started, port.finished, state.announced) == ([], ["lost"], [])
    assert CALLS == []
