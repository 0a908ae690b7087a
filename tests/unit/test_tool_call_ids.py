"""A tool-call id the model repeats within a loop is renamed before it is persisted, so results match their calls."""

from __future__ import annotations

from typing import Any

from hango.agent.loop import AgentLoop, LoopConfig
from hango.agent.messages import AssistantTurn, Message, ToolCall, text_block, tool_use_block, unique_call_ids
from hango.agent.middleware.stack import default_chain
from hango.agent.models.scripted import ScriptedModel
from hango.agent.state import Done, LoopState
from hango.agent.tools.base import Tool, ToolRegistry
from tests.unit.fakes import MemoryPort


def _shout(context: Any, args: dict[str, Any]) -> str:
    return str(args["text"]).upper()


SHOUT = Tool(
    "shout",
    "Upper-case text.",
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False},
    _shout,
)


def _call(call_id: str, text: str) -> dict[str, Any]:
    return {"id": call_id, "name": "shout", "args": {"text": text}}


def test_repeated_ids_are_renamed_and_every_result_answers_its_own_call() -> None:
    script = [
        {"tool_calls": [_call("toolu_1", "one"), _call("toolu_1", "two")]},
        {"tool_calls": [_call("toolu_1", "three")]},
        {"text": "finished"},
    ]
    port = MemoryPort()
    loop = AgentLoop(
        LoopConfig("sys", ("shout",), 10),
        ScriptedModel(script, "run-1"),
        default_chain(["shout"]),
        ToolRegistry([SHOUT]),
        port,
        port,
    )
    outcome = loop.run(LoopState([Message("user", [text_block("go")], seq=1)]))
    assert outcome == Done("finished")
    calls = [call for message in port.stored for call in message.tool_calls]
    assert [call.id for call in calls] == ["toolu_1", "toolu_1_2", "toolu_1_3"]
    results = {
        block["tool_use_id"]: block["content"]
        for message in port.stored
        if message.role == "tool"
        for block in message.content
    }
    assert results == {"toolu_1": "ONE", "toolu_1_2": "TWO", "toolu_1_3": "THREE"}
    assert port.started == ["toolu_1", "toolu_1_2", "toolu_1_3"]


def test_renaming_depends_on_the_history_alone_and_leaves_fresh_ids_alone() -> None:
    history = [
        Message(
            "assistant", [tool_use_block(ToolCall("a", "shout", {})), tool_use_block(ToolCall("a_2", "shout", {}))]
        ),
    ]
    turn = AssistantTurn(tool_calls=[ToolCall("a", "shout", {}), ToolCall("b", "shout", {}), ToolCall("", "shout", {})])
    renamed = unique_call_ids(turn, history)
    assert [call.id for call in renamed.tool_calls] == ["a_3", "b", "call"]
    assert unique_call_ids(turn, history) == renamed
    fresh = AssistantTurn(tool_calls=[ToolCall("c", "shout", {})])
    assert unique_call_ids(fresh, history) is fresh
