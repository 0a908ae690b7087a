"""The plain LangGraph graph of ``bench/peers.py``: a scripted model node and a tool node that asks a human.

One definition for two sides: ``bench.peers`` compiles it in-process with ``PostgresSaver``, and the
``langgraph-api`` server (``langgraph dev``) serves :data:`graph` from this file, loaded by path in a venv of its
own, with its in-memory checkpointer. So this module imports only LangGraph and langchain-core, never hango or
the rest of ``bench``.
"""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

# The scripted model's tool call: the same as hango's (``bench.figures.WRITE_MEMORY``; ``bench.peers`` checks it).
CALL: dict[str, Any] = {
    "name": "write_file",
    "args": {"file_path": "/memories/x", "content": "remember this"},
    "id": "w",
    "type": "tool_call",
}


class State(TypedDict):
    """The graph's state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


def build(call: dict[str, Any] = CALL) -> StateGraph[State]:
    """A scripted model node and a tool node that asks a human through ``interrupt()`` before it runs.

    The model calls ``call`` unless the last message is the tool's answer, then it answers ``done``. The tool node
    interrupts with ``{"tool_call": call}`` and writes ``written`` when resumed with ``"approve"``.
    """

    def model(state: State) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done")]}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    def tool(state: State) -> dict[str, Any]:
        decision = interrupt({"tool_call": call})
        content = "written" if decision == "approve" else "rejected"
        return {"messages": [ToolMessage(content, tool_call_id=call["id"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tool" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tool", tool)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route)
    graph.add_edge("tool", "model")
    return graph


# What langgraph-api serves (``<this file>:graph`` in langgraph.json); the server gives it its own checkpointer.
graph = build().compile()
