"""The cost of long conversations: hango's threads at 10 and 2,000 messages, beside LangGraph and deepagents.

Run: ``.venv/bin/python -m bench.threads [--rounds 10] [--chatters 50] [--turns 5]`` (PostgreSQL and Redis on
127.0.0.1, the ``bench`` extra for the peers). ``--only latency|storage|throughput`` measures some figures;
``--peers-only`` plays only LangGraph's and deepagents' conversations, with no hango process.

hango runs as a user runs it: ``hango api`` and ``hango worker`` (its default concurrency) on a queue of this
benchmark's own, in a scratch database, with scripted agents. A run ends when its ``run.finished`` event (published
after the commit that set ``succeeded``) reaches a Redis subscriber of this process; nothing polls the database.

1. **Latency**: a new one-turn run (``POST /v1/threads/{id}/runs`` sent → ``run.finished``, succeeded) on a thread
   of 2,000 messages against one of 10, p50 over rounds, for an agent with ``history.max_messages`` 100 and for
   one without a window. Each round seeds fresh threads (runs given up to 1,000 ``messages`` each; not timed).
2. **Storage**: a chat of 200 turns against one of 100, played turn by turn (one run or one ``invoke`` per user
   message, each turn's texts the same on every side): hango's bytes (``pg_column_size``) of the thread's rows,
   its runs, their messages, events, approvals and audit rows; LangGraph's (a one-node ``StateGraph`` with
   ``PostgresSaver``) and deepagents' (``create_deep_agent``, a scripted ``GenericFakeChatModel``, the same
   ``PostgresSaver``) checkpoints, blobs and writes of the thread.
3. **Throughput**: turns per second of ``--chatters`` threads chatting at once (each sends a turn, waits for its
   end, sends the next), against as many chatters sending single runs (``POST /v1/runs``, no thread) the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from sqlalchemy import Connection, text

from bench.common import ROOT, connected, percentile, scratch_database
from bench.figures import Bench, Rounds, system
from bench.peers import ScriptedChatModel, checkpoint_bytes, saver
from hango.agent.config import MAX_TURNS_LIMIT

WINDOW = 100
SIZES = (10, 2000)
SEED_LIMIT = 1000  # the most messages one run accepts
TEXT_LENGTH = 300
SYLLABLES = [consonant + vowel for consonant in "bdfghklmnprstvwz" for vowel in "aeiouy"]


@dataclass(frozen=True)
class Figure:
    """One line of the table: hango's figure beside what it is compared with."""

    figure: str
    hango: str
    beside: str
    ratio: str
    goal: str
    met: bool | None  # None: no goal

    def markdown(self) -> str:
        """The row in the doc's table."""
        met = "" if self.met is None else "yes" if self.met else "**no**"
        return f"| {self.figure} | {self.hango} | {self.beside} | {self.ratio} | {self.goal} | {met} |"


HEADER = "| figure | hango | beside | ratio | goal | met |\n|---|---|---|---|---|---|"


@dataclass(frozen=True)
class Options:
    """How much work each figure does."""

    rounds: int
    chatters: int
    turns: int
    repeats: int
    conversation: int


def prose(seed: str, length: int = TEXT_LENGTH) -> str:
    """``length`` characters of word-like text, the same for one seed in every run and on every side.

    Pseudo-words of random syllables compress about as well as prose does, unlike a sentence repeated (which
    PostgreSQL's TOAST compression would shrink to nothing, flattering whichever side stores it most often).
    """
    generator = random.Random(seed)
    words: list[str] = []
    while sum(len(word) + 1 for word in words) <= length:
        words.append("".join(generator.choice(SYLLABLES) for _ in range(generator.randint(1, 4))))
    return " ".join(words)[:length]


def user_text(turn: int) -> str:
    """What the user says in ``turn`` (from 0)."""
    return prose(f"user {turn}")


def answer_text(turn: int) -> str:
    """What the assistant answers in ``turn`` (from 0)."""
    return prose(f"assistant {turn}")


def seed_messages(count: int, first_turn: int = 0) -> list[dict[str, str]]:
    """``count`` (odd) messages alternating user and assistant, starting and ending with the user."""
    if count % 2 == 0:
        raise ValueError("a seed starts and ends with the user: an odd count")
    messages: list[dict[str, str]] = []
    for index in range(count):
        turn = first_turn + index // 2
        role, content = ("user", user_text(turn)) if index % 2 == 0 else ("assistant", answer_text(turn))
        messages.append({"role": role, "content": content})
    return messages


# hango: agents, threads and turns over HTTP.


def agent_body(script: list[dict[str, Any]], history: int | None = None) -> dict[str, Any]:
    """A scripted agent without tools; with ``history``, the model sees at most that many messages."""
    body: dict[str, Any] = {
        "name": f"threads-{uuid.uuid4().hex[:8]}",
        "model": {"provider": "scripted", "script": script},
        "tools": [],
        # A seeding run's input holds 499 assistant turns, which a run's turn count includes.
        "max_turns": MAX_TURNS_LIMIT,
    }
    if history is not None:
        body["history"] = {"max_messages": history}
    return body


def create_agent(bench: Bench, body: dict[str, Any]) -> str:
    """POST /v1/agents; the agent's id."""
    return str(bench.owner.post("/v1/agents", body)["id"])


def create_thread(bench: Bench, agent_id: str) -> str:
    """POST /v1/threads; the thread's id."""
    return str(bench.owner.post("/v1/threads", {"agent_id": agent_id, "metadata": {"bench": "threads"}})["id"])


def send(bench: Bench, thread_id: str, body: dict[str, Any]) -> str:
    """POST /v1/threads/{id}/runs; the run's id."""
    run = bench.owner.post(f"/v1/threads/{thread_id}/runs", body)
    if run.get("thread_id") != thread_id:
        raise RuntimeError(f"the run {run['id']} is not the thread's: {run.get('thread_id')}")
    return str(run["id"])


def turn(bench: Bench, thread_id: str, body: dict[str, Any]) -> float:
    """Seconds from the thread run's POST sent to its ``run.finished`` (succeeded) received."""
    sent = time.perf_counter()
    run_id = send(bench, thread_id, body)
    return bench.succeeded(run_id) - sent


def seeded_thread(bench: Bench, agent_id: str, size: int) -> str:
    """A new thread of ``size`` (even) messages: runs given up to 1,000 messages each, each answered once."""
    thread_id = create_thread(bench, agent_id)
    stored = 0
    while stored < size:
        count = min(SEED_LIMIT, size - stored) - 1  # the run's answer makes it even
        turn(bench, thread_id, {"messages": seed_messages(count, stored // 2)})
        stored += count + 1
    found = bench.owner.get(f"/v1/threads/{thread_id}")["message_count"]
    if found != size:
        raise RuntimeError(f"thread {thread_id} holds {found} messages, not {size}")
    return thread_id


def latency(bench: Bench, options: Options) -> list[Figure]:
    """A one-turn run on a thread of 2,000 messages against one of 10, with a window of 100 and without."""
    agents = {
        f"history.max_messages {WINDOW}": (create_agent(bench, agent_body([], WINDOW)), 1.5),
        "no window": (create_agent(bench, agent_body([])), None),
    }
    figures = []
    for name, (agent_id, goal) in agents.items():
        samples: dict[int, list[float]] = {size: [] for size in SIZES}
        for _ in range(options.rounds + 1):  # the first round warms the processes
            for size in SIZES:
                thread_id = seeded_thread(bench, agent_id, size)
                samples[size].append(turn(bench, thread_id, {"input": user_text(size)}))
        small, large = (samples[size][1:] for size in SIZES)
        ratio = statistics.median(large) / statistics.median(small)
        figures.append(
            Figure(
                f"one-turn thread run at 2,000 messages vs 10, {name} (p50, p90 in brackets)",
                f"{_ms(large)}",
                f"at 10: {_ms(small)}",
                f"{ratio:.2f}x",
                "(none)" if goal is None else f"≤ {goal:g}x",
                None if goal is None else ratio <= goal,
            )
        )
        print(figures[-1].markdown(), flush=True)
    return figures


def hango_chat(bench: Bench, turns: int) -> str:
    """A thread's chat of ``turns`` turns, one run per user message; the thread's id.

    The scripted model plays the script entry numbered by the assistant turns already in the thread, and each run
    keeps a snapshot of its agent. A script of every answer would put all of them in every run's snapshot, which
    a hosted model's configuration never holds; so before each turn the agent's script is replaced by empty
    entries and that turn's answer: each snapshot then holds one answer (about 300 characters more than a hosted
    model's configuration would) and the empty entries (compressed by TOAST to almost nothing).
    """
    body = agent_body([])
    agent_id = create_agent(bench, body)
    thread_id = create_thread(bench, agent_id)
    for index in range(turns):
        body["model"]["script"] = [{}] * index + [{"text": answer_text(index)}]
        bench.owner.request("PUT", f"/v1/agents/{agent_id}", body)
        turn(bench, thread_id, {"input": user_text(index)})
    last = bench.owner.get(f"/v1/threads/{thread_id}")["last_run_id"]
    if answer_text(turns - 1) not in json.dumps(bench.owner.get(f"/v1/runs/{last}/messages")):
        raise RuntimeError(f"the last run of thread {thread_id} did not answer the script's last answer")
    return thread_id


# Every row a thread owns: each table and the condition that picks the thread's rows (``owned``: its runs' ids).
THREAD_ROWS = (
    ("threads", "x.id = CAST(:thread AS uuid)"),
    ("thread_ancestors", "x.thread_id = CAST(:thread AS uuid)"),
    ("files", "x.thread_id = CAST(:thread AS uuid)"),
    ("runs", "x.id IN (SELECT id FROM owned)"),
    ("messages", "x.run_id IN (SELECT id FROM owned)"),
    ("run_events", "x.run_id IN (SELECT id FROM owned)"),
    ("pending_approvals", "x.run_id IN (SELECT id FROM owned)"),
    ("audit_events", "x.target_id = :thread OR x.target_id IN (SELECT CAST(id AS text) FROM owned)"),
)


def thread_bytes(database: Connection, thread_id: str) -> int:
    """``pg_column_size`` of every row the thread owns: its own, its scratch files, its runs, their messages, events
    and approvals, and the audit rows of the thread and of its runs."""
    sums = " + ".join(
        f"(SELECT coalesce(sum(pg_column_size(x.*)), 0) FROM {table} x WHERE {condition})"
        for table, condition in THREAD_ROWS
    )
    query = f"WITH owned AS (SELECT id FROM runs WHERE thread_id = CAST(:thread AS uuid)) SELECT {sums}"
    return int(database.execute(text(query), {"thread": thread_id}).scalar_one())


# The peers: the same chat, one invoke per user message on one thread_id, in this process.


class ChatState(TypedDict):
    """The plain LangGraph graph's state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


def langgraph_chat(checkpointer: PostgresSaver, turns: int) -> str:
    """A one-node ``StateGraph`` (the model answers the turn's text) chatting ``turns`` turns; the thread id."""

    def model(state: ChatState) -> dict[str, Any]:
        answered = sum(1 for message in state["messages"] if isinstance(message, AIMessage))
        return {"messages": [AIMessage(answer_text(answered))]}

    graph = StateGraph(ChatState)
    graph.add_node("model", model)
    graph.add_edge(START, "model")
    return _chat(graph.compile(checkpointer=checkpointer), turns)


def deepagents_chat(checkpointer: PostgresSaver, turns: int) -> str:
    """``create_deep_agent`` with a scripted model of the chat's answers, chatting ``turns`` turns; the thread id."""
    from deepagents import create_deep_agent

    answers = iter([AIMessage(answer_text(index)) for index in range(turns)])
    agent = create_deep_agent(model=ScriptedChatModel(messages=answers), checkpointer=checkpointer)
    return _chat(agent, turns)


def _chat(graph: Any, turns: int) -> str:
    """One ``invoke`` per user message on one thread, as a chat application calls it; the thread id."""
    thread = uuid.uuid4().hex
    config = {"configurable": {"thread_id": thread}}
    for index in range(turns):
        state = graph.invoke({"messages": [HumanMessage(user_text(index))]}, config)
        if state["messages"][-1].content != answer_text(index):
            raise RuntimeError(f"turn {index} answered {state['messages'][-1].content[:40]!r}")
    if len(state["messages"]) != 2 * turns:
        raise RuntimeError(f"the thread holds {len(state['messages'])} messages, not {2 * turns}")
    return thread


PEERS: dict[str, Callable[[PostgresSaver, int], str]] = {"LangGraph": langgraph_chat, "deepagents": deepagents_chat}


def peer_storage(database: Connection, url: str, lengths: tuple[int, int]) -> dict[tuple[str, int], int]:
    """Each peer's bytes of a chat of each length."""
    stored = {}
    with saver(url) as checkpointer:
        for name, chat in PEERS.items():
            for length in lengths:
                began = time.monotonic()
                stored[name, length] = checkpoint_bytes(database, chat(checkpointer, length))
                print(
                    f"storage: {name} at {length} turns: {stored[name, length]:,} B "
                    f"({time.monotonic() - began:.1f} s to play)",
                    flush=True,
                )
    return stored


def storage(bench: Bench, options: Options) -> list[Figure]:
    """hango's bytes at 200 turns against 100, and against each peer's at 200."""
    lengths = (options.conversation // 2, options.conversation)
    ours = {}
    for length in lengths:
        began = time.monotonic()
        ours[length] = thread_bytes(bench.database, hango_chat(bench, length))
        print(f"storage: hango at {length} turns: {ours[length]:,} B ({time.monotonic() - began:.1f} s)", flush=True)
    peers = peer_storage(bench.database, bench.url, lengths)
    short, long = lengths
    growth = ours[long] / ours[short]
    figures = [
        Figure(
            f"bytes of a {long}-turn thread vs a {short}-turn one",
            f"{ours[long]:,} B",
            f"at {short}: {ours[short]:,} B",
            f"{growth:.2f}x",
            "≤ 2.1x",
            growth <= 2.1,
        )
    ]
    for name in PEERS:
        ratio = ours[long] / peers[name, long]
        goal = 0.25 if name == "LangGraph" else None
        figures.append(
            Figure(
                f"bytes of a {long}-turn thread vs {name}, the same chat ({name} at {short} turns: "
                f"{peers[name, short]:,} B, {peers[name, long] / peers[name, short]:.2f}x)",
                f"{ours[long]:,} B",
                f"{name}: {peers[name, long]:,} B",
                f"{ratio:.3f}x",
                "(none)" if goal is None else f"≤ {goal:g}x",
                None if goal is None else ratio <= goal,
            )
        )
    for figure in figures:
        print(figure.markdown(), flush=True)
    return figures


def throughput(bench: Bench, options: Options) -> list[Figure]:
    """Turns per second of chatters on threads against as many chatters of single runs, alternated."""
    agent_id = create_agent(bench, agent_body([{"text": answer_text(index)} for index in range(options.turns)]))

    def single(_: int, index: int) -> str:
        body = {"agent_id": agent_id, "input": user_text(index)}
        return str(bench.owner.post("/v1/runs", body)["id"])

    chat_once(bench, options.chatters, 2, single)  # warms the processes and the connections
    threaded: list[float] = []
    singles: list[float] = []
    for _ in range(options.repeats):
        threads = [create_thread(bench, agent_id) for _ in range(options.chatters)]
        threaded.append(chat_once(bench, options.chatters, options.turns, on_threads(bench, threads)))
        singles.append(chat_once(bench, options.chatters, options.turns, single))
        print(f"throughput: threads {threaded[-1]:.1f} turns/s, single runs {singles[-1]:.1f} runs/s", flush=True)
    rate, floor = statistics.median(threaded), statistics.median(singles)
    figure = Figure(
        f"turns/s, {options.chatters} threads chatting at once ({options.turns} turns each, median of "
        f"{options.repeats})",
        f"{rate:.1f}/s",
        f"single runs driven the same way: {floor:.1f}/s",
        f"{rate / floor:.2f}x",
        "≥ 0.9x",
        rate / floor >= 0.9,
    )
    print(figure.markdown(), flush=True)
    return [figure]


def on_threads(bench: Bench, threads: list[str]) -> Callable[[int, int], str]:
    """A chatter's turn on its own thread: chatter ``who`` sends turn ``index`` to ``threads[who]``."""
    return lambda who, index: send(bench, threads[who], {"input": user_text(index)})


def chat_once(bench: Bench, chatters: int, turns: int, start: Callable[[int, int], str]) -> float:
    """Turns per second of ``chatters`` at once, each starting a turn with ``start(chatter, turn)`` and waiting for
    its end before the next."""

    def chatter(who: int) -> None:
        for index in range(turns):
            bench.succeeded(start(who, index))

    began = time.perf_counter()
    with ThreadPoolExecutor(chatters) as pool:
        list(pool.map(chatter, range(chatters)))
    return chatters * turns / (time.perf_counter() - began)


FIGURES: dict[str, Callable[[Bench, Options], list[Figure]]] = {
    "latency": latency,
    "storage": storage,
    "throughput": throughput,
}


def machine() -> str:
    """The CPU, the commit and the peers' versions, for the figures' record."""
    with open("/proc/cpuinfo") as cpus:
        model = next((line.split(":", 1)[1].strip() for line in cpus if line.startswith("model name")), "unknown")
    commit = _git("rev-parse", "--short", "HEAD")
    if _git("status", "--porcelain"):
        commit += " with uncommitted changes"
    packages = ("langgraph", "langgraph-checkpoint-postgres", "deepagents")
    peers = ", ".join(f"{name} {version(name)}" for name in packages)
    return f"machine: {os.cpu_count()} CPUs, {model}; commit {commit}; {peers}"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.1f} ms ({percentile(samples, 0.9) * 1000:.1f} ms)"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="latency rounds per thread size and agent")
    parser.add_argument("--chatters", type=int, default=50, help="threads (and single-run chatters) at once")
    parser.add_argument("--turns", type=int, default=5, help="turns of each chatter")
    parser.add_argument("--repeats", type=int, default=3, help="throughput measurements of each side, alternated")
    parser.add_argument("--conversation", type=int, default=200, help="turns of the long chat (the short: half)")
    parser.add_argument("--only", choices=sorted(FIGURES), action="append", help="measure only these figures")
    parser.add_argument("--peers-only", action="store_true", help="only the peers' storage, no hango process")
    args = parser.parse_args()
    options = Options(args.rounds, args.chatters, args.turns, args.repeats, args.conversation)
    print(machine(), flush=True)
    started = time.monotonic()
    if args.peers_only:
        with scratch_database() as url, connected(url) as database:
            peer_storage(database, url, (options.conversation // 2, options.conversation))
        return
    figures: list[Figure] = []
    with scratch_database() as url, system(url, Rounds.of(quick=True), connections=2 * options.chatters) as bench:
        print(HEADER, flush=True)
        for name, measure in FIGURES.items():
            if not args.only or name in args.only:
                figures += measure(bench, options)
    print(f"\nAll figures ({time.monotonic() - started:.0f} s):\n\n{HEADER}")
    for figure in figures:
        print(figure.markdown())


if __name__ == "__main__":
    main()
