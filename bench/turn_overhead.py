"""Per-turn overhead of a scripted run, beside a bare Celery no-op round trip on the same broker.

Run: ``.venv/bin/python -m bench.turn_overhead [--turns 20] [--runs 5]`` (PostgreSQL and Redis on 127.0.0.1).

A scripted turn costs: one model call (scripted, no network), one tool call (``ls``), and the durable
bookkeeping around them (assistant message, tool.started event, batch transaction with results and events,
fenced writes, Redis publishes). The baseline is one Celery task round trip: publish, a worker executes a no-op
that pushes to a Redis list, the client pops it. The ratio says how many bare Celery round trips one durable turn
costs.
"""

from __future__ import annotations

import argparse
import time
import uuid

from bench.common import bench_settings, owner, process, scratch_database, summary, timed
from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.models import Agent
from hango.platform.queue import PING_TASK
from hango.platform.runtime import Runtime
from hango.run import service


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pings", type=int, default=100)
    args = parser.parse_args()
    with scratch_database() as url:
        settings = bench_settings(url)
        runtime = Runtime.build(settings)
        principal = owner(runtime)
        with process(["worker", "--concurrency", "1"], settings):
            celery = runtime.queue._celery
            reply = f"hango:bench:pong:{uuid.uuid4().hex}"

            def ping() -> None:
                celery.send_task(PING_TASK, args=[reply], queue=settings.queue)
                assert runtime.redis.blpop([reply], timeout=30) is not None

            timed(5, ping)  # warm the worker and connections
            baseline = timed(args.pings, ping)
            agent_id = _agent(runtime, principal, args.turns)
            _run(runtime, principal, agent_id)  # warm-up run
            runs = timed(args.runs, lambda: _run(runtime, principal, agent_id))
    per_turn = [seconds / args.turns for seconds in runs]
    base = sorted(baseline)[len(baseline) // 2]
    turn = sorted(per_turn)[len(per_turn) // 2]
    print(f"bare Celery round trip (no-op task):  {summary(baseline)}")
    print(f"scripted run, {args.turns} turns (whole run): {summary(runs)}")
    print(f"durable turn (model + tool + persistence): {summary(per_turn)}")
    print(f"ratio per turn / bare round trip: {turn / base:.2f}x")


def _agent(runtime: Runtime, principal: Principal, turns: int) -> uuid.UUID:
    script = [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]} for _ in range(turns - 1)] + [{"text": "done"}]
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=principal.tenant_id,
        name=f"bench-{uuid.uuid4().hex[:6]}",
        model={"provider": "scripted", "script": script},
        tools=["ls"],
        max_turns=turns + 1,
        created_by=principal.user_id,
        interrupt_on={},
        subagents=[],
        system_prompt="",
    )
    with runtime.db.transaction() as session:
        session.add(agent)
    return agent.id


def _run(runtime: Runtime, principal: object, agent_id: uuid.UUID) -> None:
    run = service.create_run(runtime, principal, agent_id, [user_message("go")])  # type: ignore[arg-type]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        current = service.get_run(runtime, principal, run.id)  # type: ignore[arg-type]
        if current.state in ("succeeded", "failed"):
            assert current.state == "succeeded", current.error
            return
        time.sleep(0.002)
    raise TimeoutError("the run did not finish")


if __name__ == "__main__":
    main()
