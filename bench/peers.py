"""One scripted approval scenario played through hango, LangGraph, deepagents, langgraph-api and DBOS, in one run.

Run: ``.venv/bin/python -m bench.peers [--rounds 8] [--only SIDE ...]`` (needs the ``bench`` extra: ``pip install
-e '.[bench]'``; langgraph-api's server gets a venv of its own on first use, see ``bench.langgraph_api_server``).

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
- **langgraph-api**: LangGraph's own server as ``langgraph dev`` runs it (langgraph-api, in-memory runtime, a
  process of its own, ``bench.langgraph_api_server``) serving the LangGraph side's graph (``bench.langgraph_graph``),
  driven over HTTP with ``langgraph-sdk``: ``runs.wait`` with the history on a new thread (created by the same
  request) until it returns interrupted (pause), then ``runs.wait`` with ``command={"resume": "approve"}`` until it
  ends (resume). Its runs go through the in-memory runtime's queue, which looks for pending runs every 0.5 s.
- **DBOS**: in this process, a durable workflow (``bench.dbos_workflow``) whose system tables are in the same
  database: ``DBOS.start_workflow`` with the history as its input → the ``awaiting_approval`` event, which the
  workflow sets just before ``DBOS.recv``, read by ``DBOS.get_event`` (pause); ``DBOS.send("approve")`` → the
  workflow's result from ``handle.get_result()`` (resume).

Storage per run is the bytes PostgreSQL holds for that run (``pg_column_size`` of its rows): hango's run, messages,
events, approvals and audit rows; LangGraph's and deepagents' checkpoints, blobs and writes of the thread; DBOS's
rows of the workflow in every table of its ``dbos`` schema that has a workflow id column. langgraph-api has no
PostgreSQL: its figure is the bytes of the thread's serialized checkpoints, channel values and writes in the
server's memory, as its own ``GET /threads/{id}/storage`` counts them (serialized bytes, no row headers).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.types import Command
from sqlalchemy import Connection, text

from bench import langgraph_api_server, langgraph_graph
from bench.common import connected, scratch_database
from bench.figures import WRITE_MEMORY, Bench, Rounds, _pause_then_resume, history, system

SIZES = (10, 1000)
SIDES = ("hango", "langgraph", "deepagents", "langgraph-api", "dbos")
CALL = {"name": "write_file", "args": WRITE_MEMORY["args"], "id": "w", "type": "tool_call"}
WHAT = {
    "hango": "HTTP + Celery + worker process",
    "langgraph": "in-process invoke, PostgresSaver",
    "deepagents": "in-process invoke, PostgresSaver",
    "langgraph-api": "HTTP, langgraph-api in-memory runtime (langgraph dev)",
    "dbos": "in-process, durable workflow on PostgreSQL",
}
NOTES = {
    "langgraph-api": "its in-memory runtime's queue looks for pending runs every 0.5 s and takes those created before "
    "the look began (langgraph_runtime_inmem.ops.Runs.next), so each runs.wait waits 0.5-1 s before its run starts",
    "dbos": "pause ends when get_event returns the event the workflow sets just before recv; DBOS pushes events "
    "through LISTEN/NOTIFY batched every 10 ms (notification_coalesce_sec, its default), and recv records its "
    "durable timeout after the event",
}


@dataclass(frozen=True)
class Result:
    """One side's figures at one history size; ``where`` says where the stored bytes are when not in PostgreSQL."""

    pauses: list[float]
    resumes: list[float]
    storage: int
    where: str = ""


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--only", action="append", choices=SIDES, help="a side to run (repeatable; all by default)")
    args = parser.parse_args()
    sides = [side for side in SIDES if side in (args.only or SIDES)]
    if langgraph_graph.CALL != CALL:
        raise RuntimeError("bench/langgraph_graph.py's CALL is not bench.figures.WRITE_MEMORY's call")
    _versions(sides)
    results: dict[tuple[str, int], Result] = {}
    with scratch_database() as url, ExitStack() as stack:
        if "hango" in sides:
            bench = stack.enter_context(system(url, Rounds.of(quick=True)))
            database = bench.database
            _record(results, "hango", [_hango(bench, size, args.rounds) for size in SIZES])
        else:
            database = stack.enter_context(connected(url))
        if "langgraph" in sides or "deepagents" in sides:
            _checkpointed(url, database, sides, args.rounds, results)
        if "langgraph-api" in sides:
            _record(results, "langgraph-api", _langgraph_api(args.rounds))
        if "dbos" in sides:
            _record(results, "dbos", _dbos(url, database, args.rounds))
            print(f"dbos: storage counts the workflow's rows in {', '.join(_dbos_tables(database))}", flush=True)
    _table(results, sides)


def _versions(sides: list[str]) -> None:
    names = {"langgraph": ["langgraph"], "deepagents": ["deepagents"], "dbos": ["dbos"]}
    found = [f"{name} {version(name)}" for side in sides for name in names.get(side, [])]
    found.append(f"langchain-core {version('langchain-core')}")
    if "langgraph-api" in sides:
        pins = langgraph_api_server.versions()
        found[-1] += "; langgraph-api's venv: " + ", ".join(f"{name} {pin}" for name, pin in pins.items())
    print(f"versions: {', '.join(found)}", flush=True)


def _record(results: dict[tuple[str, int], Result], side: str, by_size: list[Result]) -> None:
    for size, result in zip(SIZES, by_size, strict=True):
        results[side, size] = result
        _print(side, size, result)


def _checkpointed(
    url: str, database: Connection, sides: list[str], rounds: int, results: dict[tuple[str, int], Result]
) -> None:
    """The LangGraph and deepagents sides, on one ``PostgresSaver``, alternated size by size."""
    builds = {"langgraph": _langgraph, "deepagents": _deepagents}
    with saver(url) as checkpointer:
        for size in SIZES:
            for side in (side for side in sides if side in builds):
                results[side, size] = _peer(database, checkpointer, builds[side], size, rounds)
                _print(side, size, results[side, size])


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


def _langgraph(checkpointer: PostgresSaver) -> Any:
    """A scripted model node and a tool node that asks a human through ``interrupt()`` before it runs.

    The graph is ``bench.langgraph_graph``'s, the one the langgraph-api side serves.
    """
    return langgraph_graph.build(CALL).compile(checkpointer=checkpointer)


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
    database: Connection, checkpointer: PostgresSaver, build: Callable[[PostgresSaver], Any], size: int, rounds: int
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
    return Result(pauses[1:], resumes[1:], checkpoint_bytes(database, thread))


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


def _langgraph_api(rounds: int) -> list[Result]:
    """The langgraph-api side at each size, on one ``langgraph dev`` server started for it."""
    from langgraph_sdk import get_sync_client

    with langgraph_api_server.server() as url:
        client = get_sync_client(url=url, api_key=None)
        return [_served(client, size, rounds) for size in SIZES]


def _served(client: Any, size: int, rounds: int) -> Result:
    """Pause: ``runs.wait`` (thread created by the same request) → interrupted; resume: ``runs.wait`` → ended."""
    messages = history(size)  # as JSON over HTTP: role and content, which the graph's add_messages takes
    graph = langgraph_api_server.GRAPH
    pauses, resumes, thread = [], [], ""
    for _ in range(rounds + 1):
        thread = str(uuid.uuid4())
        started = time.perf_counter()
        paused = client.runs.wait(thread, graph, input={"messages": messages}, if_not_exists="create")
        pauses.append(time.perf_counter() - started)
        if [item["value"] for item in paused.get("__interrupt__", [])] != [{"tool_call": CALL}]:
            raise RuntimeError(f"langgraph-api did not pause on the tool call: {paused.get('__interrupt__')}")
        started = time.perf_counter()
        finished = client.runs.wait(thread, graph, command={"resume": "approve"})
        resumes.append(time.perf_counter() - started)
        if "__interrupt__" in finished or finished["messages"][-1]["content"] != "done":
            raise RuntimeError(f"langgraph-api did not finish: {finished['messages'][-1]}")
    storage = client.http.get(f"/threads/{thread}/storage")
    return Result(pauses[1:], resumes[1:], int(storage["total_bytes"]), "in the server's memory")


def _dbos(url: str, database: Connection, rounds: int) -> list[Result]:
    """The DBOS side at each size, DBOS launched for it with its system tables in the scratch database."""
    from bench import dbos_workflow

    with dbos_workflow.launched(url):
        return [_durable(database, size, rounds) for size in SIZES]


def _durable(database: Connection, size: int, rounds: int) -> Result:
    """The DBOS side at one size: rounds of :func:`_durable_round`, the first dropped."""
    messages = history(size)
    played, workflow = [], ""
    for _ in range(rounds + 1):
        workflow = str(uuid.uuid4())
        played.append(_durable_round(workflow, messages))
    kept = played[1:]
    return Result([pause for pause, _ in kept], [resume for _, resume in kept], dbos_bytes(database, workflow))


def _durable_round(workflow: str, messages: list[dict[str, Any]]) -> tuple[float, float]:
    """Pause: ``start_workflow`` → its ``awaiting_approval`` event read; resume: ``send`` → its result."""
    from dbos import DBOS, SetWorkflowID

    from bench.dbos_workflow import AWAITING, TOPIC, approval_run

    try:
        started = time.perf_counter()
        with SetWorkflowID(workflow):
            handle = DBOS.start_workflow(approval_run, messages, CALL)
        pending = DBOS.get_event(workflow, AWAITING, timeout_seconds=60)
        paused = time.perf_counter() - started
        if pending != CALL:
            raise RuntimeError(f"dbos did not pause on the tool call: {pending}")
        started = time.perf_counter()
        DBOS.send(workflow, "approve", TOPIC)
        answer = handle.get_result()
        resumed = time.perf_counter() - started
    except BaseException:
        with suppress(Exception):  # a workflow left waiting for a decision would hold the interpreter's exit up
            DBOS.send(workflow, "stop", TOPIC)
        raise
    if answer != "done":
        raise RuntimeError(f"dbos did not finish: {answer}")
    return paused, resumed


def _dbos_tables(database: Connection) -> dict[str, str]:
    """The tables of DBOS's ``dbos`` schema that hold rows of a workflow, with the column naming it."""
    rows = database.execute(
        text(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'dbos'"
            " AND column_name IN ('workflow_uuid', 'destination_uuid') ORDER BY table_name"
        )
    )
    return {str(row.table_name): str(row.column_name) for row in rows}


def dbos_bytes(database: Connection, workflow: str) -> int:
    """What DBOS holds for one workflow: ``pg_column_size`` of its rows in each of :func:`_dbos_tables`."""
    parts = [
        f'(SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM dbos."{table}" t WHERE t."{column}" = :workflow)'
        for table, column in _dbos_tables(database).items()
    ]
    return int(database.execute(text("SELECT " + " + ".join(parts)), {"workflow": workflow}).scalar_one())


def _print(side: str, size: int, result: Result) -> None:
    where = f" ({result.where})" if result.where else ""
    print(
        f"{side:13} at {size:5} messages: pause p50 {_ms(result.pauses)}, resume p50 {_ms(result.resumes)}, "
        f"storage {result.storage:,} bytes{where}",
        flush=True,
    )


def _table(results: dict[tuple[str, int], Result], sides: list[str]) -> None:
    print(
        "\n| side | what is timed | messages | pause p50 | resume p50 | storage per run | hango/peer pause | "
        "hango/peer resume |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for side in sides:
        for size in SIZES:
            result = results[side, size]
            pause, resume = _ratios(results, side, size)
            where = f" ({result.where})" if result.where else ""
            print(
                f"| {side} | {WHAT[side]} | {size:,} | {_ms(result.pauses)} | {_ms(result.resumes)} | "
                f"{result.storage:,} B{where} | {pause} | {resume} |"
            )
    for side in sides:
        growth = [statistics.median(results[side, size].resumes) for size in SIZES]
        print(f"{side}: resume at 1,000 / at 10 messages: {growth[1] / growth[0]:.2f}x")
    for side in (side for side in sides if side in NOTES):
        print(f"{side}: {NOTES[side]}")


def _ratios(results: dict[tuple[str, int], Result], side: str, size: int) -> tuple[str, str]:
    """hango's median over the side's, for pause and resume; blank for hango itself or when hango did not run."""
    ours = results.get(("hango", size))
    if side == "hango" or ours is None:
        return "", ""
    theirs = results[side, size]
    pause = statistics.median(ours.pauses) / statistics.median(theirs.pauses)
    resume = statistics.median(ours.resumes) / statistics.median(theirs.resumes)
    return f"{pause:.2f}x", f"{resume:.2f}x"


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms"


if __name__ == "__main__":
    main()
