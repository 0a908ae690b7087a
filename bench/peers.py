"""One scripted approval scenario played through hango, LangGraph and deepagents, in one run, on one PostgreSQL.

Run: ``.venv/bin/python -m bench.peers [--rounds 8]`` (needs the ``bench`` extra: ``pip install -e '.[bench]'``).

The scenario: a history of N messages (N = 10 and 1,000, alternating user and assistant text of about 300
characters, ending with the user), then the model calls ``write_file("/memories/x", ...)``, which needs a human's
approval; the run pauses; the human approves; the tool runs and the model answers ``done``.

What each side measures is not the same work, and the output says so:

- **hango**: through its real processes: POST /v1/runs sent → ``runs.awaiting_since`` set (pause), and decision
  POST sent → run ``succeeded`` (resume), through the HTTP API, Celery on Redis and a worker process, every step
  committed to PostgreSQL with its events and audit rows.
- **LangGraph**: in this process, a two-node ``StateGraph`` (scripted model node, tool node calling
  ``interrupt()``) with ``PostgresSaver``: ``invoke(input)`` until it returns interrupted (pause), then
  ``invoke(Command(resume=...))`` until it ends (resume).
- **deepagents**: in this process, ``create_deep_agent`` with ``interrupt_on={"write_file": True}``, a scripted
  ``GenericFakeChatModel`` and the same ``PostgresSaver``: the same two ``invoke`` calls.

Storage per run is the bytes PostgreSQL holds for that run (``pg_column_size`` of its rows): hango's run, messages,
events, approvals and audit rows; LangGraph's and deepagents' checkpoints, blobs and writes of the thread.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from sqlalchemy import Connection, text

from bench.common import scratch_database
from bench.figures import WRITE_MEMORY, Bench, Rounds, _pause_then_resume, history, system

SIZES = (10, 1000)
CALL = {"name": "write_file", "args": WRITE_MEMORY["args"], "id": "w", "type": "tool_call"}


@dataclass(frozen=True)
class Result:
    """One side's figures at one history size."""

    pauses: list[float]
    resumes: list[float]
    storage: int


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    results: dict[tuple[str, int], Result] = {}
    with scratch_database() as url, system(url, Rounds.of(quick=True)) as bench:
        for size in SIZES:
            results["hango", size] = _hango(bench, size, args.rounds)
            _print("hango", size, results["hango", size])
        with saver(url) as checkpointer:
            for size in SIZES:
                results["langgraph", size] = _peer(bench, checkpointer, _langgraph, size, args.rounds)
                _print("langgraph", size, results["langgraph", size])
                results["deepagents", size] = _peer(bench, checkpointer, _deepagents, size, args.rounds)
                _print("deepagents", size, results["deepagents", size])
    _table(results)


@contextmanager
def saver(url: str) -> Iterator[PostgresSaver]:
    """LangGraph's PostgreSQL checkpointer on the scratch database, its tables created."""
    with PostgresSaver.from_conn_string(url) as checkpointer:
        checkpointer.setup()
        yield checkpointer


def _hango(bench: Bench, size: int, rounds: int) -> Result:
    messages = history(size)
    assistant_turns = sum(1 for message in messages if message["role"] == "assistant")
    agent_id = bench.agent([{"text": "noted"}] * assistant_turns + [{"tool_calls": [WRITE_MEMORY]}], ["write_file"])
    played = [_pause_then_resume(bench, agent_id, messages) for _ in range(rounds + 1)][1:]
    last = bench.database.execute(
        text("SELECT id FROM runs WHERE agent_id = :agent ORDER BY created_at DESC LIMIT 1"), {"agent": agent_id}
    ).scalar_one()
    storage = bench.database.execute(
        text(
            "SELECT (SELECT pg_column_size(r.*) FROM runs r WHERE r.id = :run)"
            " + (SELECT coalesce(sum(pg_column_size(m.*)), 0) FROM messages m WHERE m.run_id = :run)"
            " + (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM run_events e WHERE e.run_id = :run)"
            " + (SELECT coalesce(sum(pg_column_size(p.*)), 0) FROM pending_approvals p WHERE p.run_id = :run)"
            " + (SELECT coalesce(sum(pg_column_size(a.*)), 0) FROM audit_events a WHERE a.target_id = :text)"
        ),
        {"run": last, "text": str(last)},
    ).scalar_one()
    return Result([pause for pause, _ in played], [resume for _, resume in played], int(storage))


class State(TypedDict):
    """The plain LangGraph graph's state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


def _langgraph(checkpointer: PostgresSaver) -> Any:
    """A scripted model node and a tool node that asks a human through ``interrupt()`` before it runs."""

    def model(state: State) -> dict[str, Any]:
        if isinstance(state["messages"][-1], ToolMessage):
            return {"messages": [AIMessage("done")]}
        return {"messages": [AIMessage("", tool_calls=[CALL])]}

    def tool(state: State) -> dict[str, Any]:
        decision = interrupt({"tool_call": CALL})
        content = "written" if decision == "approve" else "rejected"
        return {"messages": [ToolMessage(content, tool_call_id=CALL["id"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tool" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(State)
    graph.add_node("model", model)
    graph.add_node("tool", tool)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route)
    graph.add_edge("tool", "model")
    return graph.compile(checkpointer=checkpointer)


class ScriptedChatModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools (it plays its script whatever tools it is offered)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """The model itself: the script already holds the calls."""
        return self


def _deepagents(checkpointer: PostgresSaver) -> Any:
    """deepagents' agent with its HITL middleware on ``write_file`` and a scripted chat model."""
    from deepagents import create_deep_agent

    turns = iter([AIMessage("", tool_calls=[CALL]), AIMessage("done")])
    return create_deep_agent(
        model=ScriptedChatModel(messages=turns), interrupt_on={"write_file": True}, checkpointer=checkpointer
    )


def _peer(
    bench: Bench, checkpointer: PostgresSaver, build: Callable[[PostgresSaver], Any], size: int, rounds: int
) -> Result:
    prior = [
        HumanMessage(item["content"]) if item["role"] == "user" else AIMessage(item["content"])
        for item in history(size)
    ]
    resume = _resume_command(build)
    pauses, resumes, thread = [], [], ""
    for _ in range(rounds + 1):
        graph = build(checkpointer)  # a fresh scripted model each round; building is not timed
        thread = uuid.uuid4().hex
        config = {"configurable": {"thread_id": thread}}
        started = time.perf_counter()
        paused = graph.invoke({"messages": prior}, config)
        pauses.append(time.perf_counter() - started)
        if "__interrupt__" not in paused:
            raise RuntimeError(f"{build.__name__} did not pause")
        started = time.perf_counter()
        finished = graph.invoke(Command(resume=resume), config)
        resumes.append(time.perf_counter() - started)
        if finished["messages"][-1].content != "done":
            raise RuntimeError(f"{build.__name__} did not finish: {finished['messages'][-1]}")
    return Result(pauses[1:], resumes[1:], checkpoint_bytes(bench.database, thread))


def checkpoint_bytes(database: Connection, thread: str) -> int:
    """What ``PostgresSaver`` holds for one thread: ``pg_column_size`` of its checkpoints, blobs and writes."""
    storage = database.execute(
        text(
            "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c WHERE c.thread_id = :thread)"
            " + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM checkpoint_blobs b WHERE b.thread_id = :thread)"
            " + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM checkpoint_writes w WHERE w.thread_id = :thread)"
        ),
        {"thread": thread},
    ).scalar_one()
    return int(storage)


def _resume_command(build: Callable[[PostgresSaver], Any]) -> Any:
    # deepagents' HITL middleware takes a list of decisions; the plain graph's interrupt() returns what it is given.
    return {"decisions": [{"type": "approve"}]} if build is _deepagents else "approve"


def _print(side: str, size: int, result: Result) -> None:
    print(
        f"{side:10} at {size:5} messages: pause p50 {_ms(result.pauses)}, resume p50 {_ms(result.resumes)}, "
        f"storage {result.storage:,} bytes",
        flush=True,
    )


def _table(results: dict[tuple[str, int], Result]) -> None:
    print(
        "\n| side | what is timed | messages | pause p50 | resume p50 | storage per run | hango/peer pause | "
        "hango/peer resume |"
    )
    print("|---|---|---|---|---|---|---|---|")
    what = {
        "hango": "HTTP + Celery + worker process",
        "langgraph": "in-process invoke, PostgresSaver",
        "deepagents": "in-process invoke, PostgresSaver",
    }
    for side in ("hango", "langgraph", "deepagents"):
        for size in SIZES:
            result, ours = results[side, size], results["hango", size]
            pause = statistics.median(ours.pauses) / statistics.median(result.pauses)
            resume = statistics.median(ours.resumes) / statistics.median(result.resumes)
            ratios = ("", "") if side == "hango" else (f"{pause:.2f}x", f"{resume:.2f}x")
            print(
                f"| {side} | {what[side]} | {size:,} | {_ms(result.pauses)} | {_ms(result.resumes)} | "
                f"{result.storage:,} B | {ratios[0]} | {ratios[1]} |"
            )
    for side in ("langgraph", "deepagents"):
        growth = [statistics.median(results[side, size].resumes) for size in SIZES]
        print(f"{side}: resume at 1,000 / at 10 messages: {growth[1] / growth[0]:.2f}x")
    growth = [statistics.median(results["hango", size].resumes) for size in SIZES]
    print(f"hango: resume at 1,000 / at 10 messages: {growth[1] / growth[0]:.2f}x")


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


if __name__ == "__main__":
    main()
