"""Live events at scale: thousands of open streams on ``hango api``, and one decision reaching all of them.

Run: ``.venv/bin/python -m bench.streams [--streams 2000] [--rounds 3] [--api-workers N] [--mix run|split|tenant]``
(PostgreSQL and Redis on 127.0.0.1).

By default it measures the default deployment: ``hango api`` as it starts with no options (its default number of
gevent worker processes, its default connections) and one ``hango worker``, in a scratch database, with every
stream following one suspended run (``GET /v1/runs/{id}/events``). ``--mix split`` is the earlier mode: half the
streams follow the tenant's approval stream (``GET /v1/approvals/events``), half the run; with ``--api-workers 1``
it is the measure of issue 11. ``--mix tenant`` opens tenant streams only. The per-user stream cap is raised so
that one owner may hold them all (``HANGO_MAX_STREAMS_PER_USER``); every other setting is hango's default but the
worker's heartbeat. The clients live in a process of their own (asyncio, raw HTTP/1.1). Each round suspends a run,
opens the run streams on it, times ``GET /v1/runs`` under that load, then sends the decision and notes when
``approval.decided`` reached each stream (the same monotonic clock in every process), and the CPU each process
spent meanwhile. The figures sit beside their floors from the same run: ``GET /v1/runs`` with no stream open, and a
bare Redis publish→receive. ``--profile DIR`` records each API worker with py-spy (``-r 500 -f raw``) around
each decision.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.client import Client, redis_publish_latency, wait_ready
from bench.common import bench_settings, free_port, percentile, process, scratch_database, timed
from bench.stream_clients import Collect, Mark, Open, serve
from hango.platform.runtime import Runtime
from hango.processes.cli import api_command
from hango.services import tenancy

WRITE_MEMORY = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/x", "content": "remember this"}}
APPROVE = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
MIXES = ("run", "split", "tenant")


def default_api_workers() -> int:
    """How many worker processes ``hango api`` starts when not told."""
    default = next(option.default for option in api_command.params if option.name == "workers")
    assert isinstance(default, int)
    return default


@dataclass(frozen=True)
class Mode:
    """What is measured: how many streams of each kind, on how many API processes."""

    streams: int
    mix: str
    api_workers: int
    connections: int | None

    @property
    def tenant_streams(self) -> int:
        """Streams of the tenant's approval events."""
        return {"run": 0, "split": self.streams // 2, "tenant": self.streams}[self.mix]

    @property
    def run_streams(self) -> int:
        """Streams of the round's suspended run."""
        return self.streams - self.tenant_streams

    def describe(self) -> str:
        """One line naming the mode."""
        default = " (hango api's default)" if self.api_workers == default_api_workers() else ""
        connections = "hango's default" if self.connections is None else str(self.connections)
        return (
            f"{self.streams} open streams ({self.tenant_streams} tenant, {self.run_streams} run) on "
            f"{self.api_workers} API process{'es' if self.api_workers != 1 else ''}{default}, "
            f"connections per process: {connections}"
        )


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=2000, help="open streams in all")
    parser.add_argument("--rounds", type=int, default=3, help="decisions sent to them")
    parser.add_argument(
        "--api-workers",
        type=int,
        default=default_api_workers(),
        help="hango api --workers (default: hango api's own default, %(default)s)",
    )
    parser.add_argument(
        "--mix",
        choices=MIXES,
        default="run",
        help="run: every stream follows the run; split: half follow the tenant's approvals (the earlier mode); "
        "tenant: all do (default: %(default)s)",
    )
    parser.add_argument(
        "--connections", type=int, default=None, help="hango api --connections (default: hango api's own)"
    )
    parser.add_argument("--profile", type=Path, default=None, help="py-spy records of each decision go here")
    args = parser.parse_args()
    mode = Mode(args.streams, args.mix, args.api_workers, args.connections)
    print(f"mode: {mode.describe()}", flush=True)
    with scratch_database() as url:
        measure(url, mode, args.rounds, args.profile)


def measure(url: str, mode: Mode, rounds: int, profile: Path | None) -> None:
    """Start the processes, open the streams, send the decisions, print the figures."""
    settings = bench_settings(url).replace(max_streams_per_user=mode.streams + 100, sse_keepalive=timedelta(seconds=15))
    runtime = Runtime.build(settings)
    created = tenancy.create_tenant(runtime.db, "bench", f"bench-{uuid.uuid4().hex[:6]}@example.com")
    port = free_port()
    api_args = ["api", "--port", str(port), "--workers", str(mode.api_workers)]
    if mode.connections is not None:
        api_args += ["--connections", str(mode.connections)]
    with process(["worker"], settings) as hango_worker, process(api_args, settings) as api:
        wait_ready(port)
        client = Client(port, created.token)
        workers = _children(api.pid, mode.api_workers)
        agent_id = client.post("/v1/agents", _agent())["id"]
        idle = timed(200, lambda: client.get("/v1/runs?limit=20"))
        memory_before = sum(_rss(pid) for pid in workers)
        publish = redis_publish_latency(runtime.redis, f"hango:bench:{uuid.uuid4().hex}", 500)
        pipe, child_end = multiprocessing.Pipe()
        clients = multiprocessing.get_context("spawn").Process(target=serve, args=(child_end, port, created.token))
        clients.start()
        assert clients.pid is not None
        watched = Watched(workers, hango_worker.pid, clients.pid)
        try:
            result = _rounds(client, pipe, agent_id, mode, rounds, watched, memory_before, profile)
        finally:
            pipe.close()
            clients.join(30)
            if clients.is_alive():
                clients.kill()
    _print(mode, idle, publish, result)


@dataclass(frozen=True)
class Watched:
    """The processes whose CPU time a round notes: the API workers, the hango worker, the clients."""

    api_workers: list[int]
    hango_worker: int
    clients: int

    def cpu(self) -> dict[str, float]:
        """Seconds of CPU each has used so far (the hango worker with its pool children)."""
        times = {f"api {pid}": _cpu(pid) for pid in self.api_workers}
        times["hango worker"] = sum(_cpu(pid) for pid in [self.hango_worker, *_all_children(self.hango_worker)])
        times["clients"] = _cpu(self.clients)
        return times


def _rounds(
    client: Client,
    pipe: Any,
    agent_id: str,
    mode: Mode,
    rounds: int,
    watched: Watched,
    memory_before: int,
    profile: Path | None,
) -> dict[str, Any]:
    latencies: list[float] = []
    reached = expected = 0
    loaded: list[float] = []
    memory = 0
    for index in range(rounds):
        run_id = _suspended(client, agent_id)
        if index == 0 and mode.tenant_streams:
            opened = _ask(pipe, Open("/v1/approvals/events", mode.tenant_streams, "approval.requested"))
            print(f"tenant streams open: {opened}", flush=True)
        if mode.run_streams:
            opened = _ask(pipe, Open(f"/v1/runs/{run_id}/events", mode.run_streams, "approval.requested"))
            print(f"round {index + 1}: run streams open: {opened}", flush=True)
        print(f"round {index + 1}: sockets per API process: {_sockets(watched.api_workers)}", flush=True)
        if index == 0:
            time.sleep(2)  # let the allocator settle
            memory = sum(_rss(pid) for pid in watched.api_workers) - memory_before
        loaded += timed(100, lambda: client.get("/v1/runs?limit=20"))
        _ask(pipe, Mark())
        with _recorded(profile, watched.api_workers, index):
            before = watched.cpu()
            sent = time.monotonic()
            client.post(f"/v1/runs/{run_id}/approvals", APPROVE)
            arrivals, live = _ask(pipe, Collect("approval.decided", 30))
            spent = {name: seconds - before[name] for name, seconds in watched.cpu().items()}
        heard = sorted(arrival - sent for arrival in arrivals if arrival is not None)
        latencies += heard
        if heard:
            spread = f"first {_ms(heard[0])}, median {_ms(statistics.median(heard))}, last {_ms(heard[-1])}"
            print(f"round {index + 1}: {spread}")
        print(f"round {index + 1}: CPU until the last stream heard: {_cpu_line(spent)}")
        reached += len(heard)
        expected += live
        print(f"round {index + 1}: approval.decided reached {len(heard)}/{live}", flush=True)
        if mode.run_streams:  # the run streams end with their run
            _ask(pipe, Collect("run.finished", 30, f"/v1/runs/{run_id}/events"))
        _finished(client, run_id)
    return {"latencies": latencies, "reached": reached, "expected": expected, "loaded": loaded, "memory": memory}


def _print(mode: Mode, idle: list[float], publish: list[float], result: dict[str, Any]) -> None:
    latencies, loaded = result["latencies"], result["loaded"]
    idle_p50, loaded_p50 = statistics.median(idle), statistics.median(loaded)
    share = result["reached"] / max(1, result["expected"])
    processes = "one API process" if mode.api_workers == 1 else f"{mode.api_workers} API processes"
    print(f"\n{mode.streams} open streams on {processes} ({mode.tenant_streams} tenant, {mode.run_streams} run)\n")
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
    memory = result["memory"] / mode.streams / 1024
    print(f"| memory per open stream (API processes' RSS) | {memory:.1f} KiB | | | | |")


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


def _finished(client: Client, run_id: str) -> None:
    """Wait for the run's end, so that the next round's run is the only one running."""
    deadline = time.monotonic() + 60
    while client.get(f"/v1/runs/{run_id}")["state"] not in ("succeeded", "failed", "cancelled"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not finish")
        time.sleep(0.05)


def _ask(pipe: Any, command: object) -> Any:
    pipe.send(command)
    return pipe.recv()


@contextmanager
def _recorded(folder: Path | None, pids: list[int], index: int) -> Iterator[None]:
    """py-spy records of ``pids`` (raw folded stacks, 500 Hz) for the duration of the block, when asked for."""
    if folder is None:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    recorders = [
        subprocess.Popen(
            [
                spy,
                "record",
                "-r",
                "500",
                "-f",
                "raw",
                "-o",
                str(folder / f"round{index + 1}-{pid}.txt"),
                "-p",
                str(pid),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    ]
    time.sleep(1.5)  # py-spy attaches
    try:
        yield
    finally:
        time.sleep(0.3)  # what follows the last stream's event: the run streams' later events
        for recorder in recorders:
            recorder.send_signal(2)  # SIGINT: py-spy writes what it has
        for recorder in recorders:
            recorder.wait(30)


def _children(pid: int, count: int) -> list[int]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        if len(children) >= count:
            return children
        time.sleep(0.1)
    raise TimeoutError(f"the API server started fewer than {count} workers")


def _all_children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _cpu(pid: int) -> float:
    """Seconds on a CPU of every thread of a process (``schedstat``: nanoseconds, not clock ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def _cpu_line(spent: dict[str, float]) -> str:
    return ", ".join(f"{name} {_ms(seconds)}" for name, seconds in spent.items())


def _sockets(pids: list[int]) -> str:
    """How many sockets each process holds (its streams, and a few of its own)."""
    counts = []
    for pid in pids:
        fds = Path(f"/proc/{pid}/fd")
        counts.append(sum(1 for fd in fds.iterdir() if _is_socket(fd)))
    return ", ".join(str(count) for count in counts)


def _is_socket(fd: Path) -> bool:
    try:
        return fd.readlink().name.startswith("socket:")
    except OSError:
        return False


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
