"""Live events at scale: thousands of open streams on one API process, and one decision reaching all of them.

Run: ``.venv/bin/python -m bench.streams [--streams 2000] [--rounds 3]`` (PostgreSQL and Redis on 127.0.0.1).

One ``hango api`` process (one gevent worker) and one ``hango worker``, in a scratch database. Half the streams
follow the tenant's approval stream (``GET /v1/approvals/events``), half follow one suspended run
(``GET /v1/runs/{id}/events``); the clients live in a process of their own (asyncio, raw HTTP/1.1). Each round
suspends a run, opens the run streams on it, times ``GET /v1/runs`` under that load, then sends the decision and
notes when ``approval.decided`` reached each stream (the same monotonic clock in both processes). The figures sit
beside their floors from the same run: ``GET /v1/runs`` with no stream open, and a bare Redis publish→receive.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.client import Client, redis_publish_latency, wait_ready
from bench.common import bench_settings, free_port, percentile, process, scratch_database, timed
from bench.stream_clients import Collect, Mark, Open, serve
from hango.platform.runtime import Runtime
from hango.services import tenancy

WRITE_MEMORY = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/x", "content": "remember this"}}
APPROVE = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000, help="open streams in all (half of each kind)")
    parser.add_argument("--rounds", type=int, default=3, help="decisions sent to them")
    args = parser.parse_args()
    with scratch_database() as url:
        measure(url, args.streams, args.rounds)


def measure(url: str, streams: int, rounds: int) -> None:
    """Start the processes, open the streams, send the decisions, print the figures."""
    settings = bench_settings(url).replace(max_streams_per_user=streams + 100, sse_keepalive=timedelta(seconds=15))
    runtime = Runtime.build(settings)
    created = tenancy.create_tenant(runtime.db, "bench", f"bench-{uuid.uuid4().hex[:6]}@example.com")
    port = free_port()
    connections = str(2 * streams + 256)
    with (
        process(["worker"], settings),
        process(["api", "--port", str(port), "--workers", "1", "--connections", connections], settings) as api,
    ):
        wait_ready(port)
        client = Client(port, created.token)
        worker = _child(api.pid)
        agent_id = client.post("/v1/agents", _agent())["id"]
        idle = timed(200, lambda: client.get("/v1/runs?limit=20"))
        memory_before = _rss(worker)
        publish = redis_publish_latency(runtime.redis, f"hango:bench:{uuid.uuid4().hex}", 500)
        pipe, child_end = multiprocessing.Pipe()
        clients = multiprocessing.get_context("spawn").Process(target=serve, args=(child_end, port, created.token))
        clients.start()
        try:
            result = _rounds(client, pipe, agent_id, streams, rounds, worker, memory_before)
        finally:
            pipe.close()
            clients.join(30)
            if clients.is_alive():
                clients.kill()
    _print(streams, idle, publish, result)


def _rounds(
    client: Client, pipe: Any, agent_id: str, streams: int, rounds: int, worker: int, memory_before: int
) -> dict[str, Any]:
    latencies: list[float] = []
    reached = expected = 0
    loaded: list[float] = []
    memory = 0
    for index in range(rounds):
        run_id = _suspended(client, agent_id)
        if index == 0:
            opened = _ask(pipe, Open("/v1/approvals/events", streams // 2, "approval.requested"))
            print(f"tenant streams open: {opened}", flush=True)
        opened = _ask(pipe, Open(f"/v1/runs/{run_id}/events", streams - streams // 2, "approval.requested"))
        print(f"round {index + 1}: run streams open: {opened}", flush=True)
        if index == 0:
            time.sleep(2)  # let the allocator settle
            memory = _rss(worker) - memory_before
        loaded += timed(100, lambda: client.get("/v1/runs?limit=20"))
        _ask(pipe, Mark())
        sent = time.monotonic()
        client.post(f"/v1/runs/{run_id}/approvals", APPROVE)
        arrivals, live = _ask(pipe, Collect("approval.decided", 30))
        heard = sorted(arrival - sent for arrival in arrivals if arrival is not None)
        latencies += heard
        if heard:
            spread = f"first {_ms(heard[0])}, median {_ms(statistics.median(heard))}, last {_ms(heard[-1])}"
            print(f"round {index + 1}: {spread}")
        reached += len(heard)
        expected += live
        print(f"round {index + 1}: approval.decided reached {len(heard)}/{live}", flush=True)
        _ask(pipe, Collect("run.finished", 30))  # the run streams end with their run
    return {"latencies": latencies, "reached": reached, "expected": expected, "loaded": loaded, "memory": memory}


def _print(streams: int, idle: list[float], publish: list[float], result: dict[str, Any]) -> None:
    latencies, loaded = result["latencies"], result["loaded"]
    idle_p50, loaded_p50 = statistics.median(idle), statistics.median(loaded)
    share = result["reached"] / max(1, result["expected"])
    print(f"\n{streams} open streams on one API process ({streams // 2} tenant, {streams - streams // 2} run)\n")
    print("| figure | value | floor | ratio | goal | met |")
    print("|---|---|---|---|---|---|")
    print(f"| streams reached by approval.decided | {share:.2%} | | | ≥ 99% | {'yes' if share >= 0.99 else 'no'} |")
    if latencies:
        p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        floor = statistics.median(publish)
        print(
            f"| approval.decided p50, from POST sent | {_ms(p50)} | Redis publish→receive {_ms(floor)} "
            f"| {p50 / floor:.0f}x | ≤ 50 ms | {'yes' if p50 <= 0.05 else 'no'} |"
        )
        met = "yes" if p99 <= 0.25 else "no"
        print(f"| approval.decided p99, from POST sent | {_ms(p99)} | | | ≤ 250 ms | {met} |")
    ratio = loaded_p50 / idle_p50
    print(
        f"| GET /v1/runs p50 under load | {_ms(loaded_p50)} | idle {_ms(idle_p50)} | {ratio:.2f}x | ≤ 3x "
        f"| {'yes' if ratio <= 3 else 'no'} |"
    )
    print(f"| memory per open stream (API process RSS) | {result['memory'] / streams / 1024:.1f} KiB | | | | |")


def _agent() -> dict[str, Any]:
    script = [{"tool_calls": [WRITE_MEMORY]}, {"text": "done"}]
    model = {"provider": "scripted", "script": script}
    return {"name": f"bench-{uuid.uuid4().hex[:8]}", "model": model, "tools": ["write_file"], "max_turns": 10}


def _suspended(client: Client, agent_id: str) -> str:
    run_id = str(client.post("/v1/runs", {"agent_id": agent_id, "input": "go"})["id"])
    deadline = time.monotonic() + 60
    while (run := client.get(f"/v1/runs/{run_id}"))["state"] != "awaiting_approval":
        if time.monotonic() > deadline or run["state"] in ("succeeded", "failed", "cancelled"):
            raise TimeoutError(f"run {run_id} did not pause: {run}")
        time.sleep(0.05)
    return run_id


def _ask(pipe: Any, command: object) -> Any:
    pipe.send(command)
    return pipe.recv()


def _child(pid: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise TimeoutError("the API server started no worker")


def _rss(pid: int) -> int:
    """Resident bytes of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


if __name__ == "__main__":
    main()
