"""Resume latency of a human decision, beside a bare Redis publish->receive and a bare Celery round trip.

Run: ``.venv/bin/python -m bench.resume_latency [--rounds 30]`` (PostgreSQL and Redis on 127.0.0.1).

Each round suspends a run on an approval, keeps an SSE client connected to a real ``hango api`` server, and
POSTs the approval over HTTP. It measures, from the moment the POST returns:

- to the approved tool executing on the worker (the tool stamps the wall clock into Redis);
- to ``approval.decided`` reaching the SSE client (it is published by the API before it answers, so this is
  usually negative: the client hears of the decision before the decider's response arrives; the figure from the
  moment the POST was *sent* is printed too).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.request
import uuid
from typing import Any
from urllib.parse import urlsplit

from bench.common import bench_settings, owner, process, scratch_database, timed
from hango.agent.messages import user_message
from hango.kernel.models import Agent
from hango.platform.queue import PING_TASK
from hango.platform.runtime import Runtime
from hango.run import service

SSE_TIMEOUT = 60


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with scratch_database() as url:
        settings = bench_settings(url).replace(tool_modules=("bench.tools",))
        runtime = Runtime.build(settings)
        principal = owner(runtime)
        token = _token(runtime, principal)
        with (
            process(["worker", "--concurrency", "1"], settings),
            process(["api", "--port", str(args.port), "--workers", "1", "--connections", "16"], settings),
        ):
            base = f"http://127.0.0.1:{args.port}"
            _wait_ready(base)
            publish = _redis_publish_latency(runtime, 200)
            celery = _celery_round_trip(runtime, settings.queue, 100)
            agent_id = _agent(runtime, principal)
            samples = [_round(runtime, principal, base, token, agent_id) for _ in range(args.rounds + 2)][2:]
    execute = [sample["execute"] for sample in samples]
    sse_returned = [sample["sse_after_return"] for sample in samples]
    sse_sent = [sample["sse_after_send"] for sample in samples]
    print(f"bare Redis publish -> receive:           {_ms(publish)}")
    print(f"bare Celery round trip (no-op task):     {_ms(celery)}")
    print(f"decision POST returned -> tool executes: {_ms(execute)}")
    print(f"decision POST returned -> SSE decided:   {_ms(sse_returned)}")
    print(f"decision POST sent -> SSE decided:       {_ms(sse_sent)}")
    print(f"ratio execute / Celery round trip:       {statistics.median(execute) / statistics.median(celery):.2f}x")
    print(f"ratio SSE (from send) / Redis publish:   {statistics.median(sse_sent) / statistics.median(publish):.2f}x")


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
    return f"median {statistics.median(ordered) * 1000:8.2f} ms   p90 {p90 * 1000:8.2f} ms   n={len(ordered)}"


def _token(runtime: Runtime, principal: Any) -> str:
    from hango.kernel.auth import hash_token, new_token
    from hango.store.tokens import create_token

    token = new_token()
    with runtime.db.transaction() as session:
        create_token(session, principal.tenant_id, principal.user_id, hash_token(token))
    return token


def _wait_ready(base: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2):  # noqa: S310 (loopback)
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("the API did not become ready")


def _redis_publish_latency(runtime: Runtime, count: int) -> list[float]:
    channel = f"hango:bench:{uuid.uuid4().hex}"
    pubsub = runtime.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(channel)
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        runtime.redis.publish(channel, "x")
        while pubsub.get_message(timeout=5) is None:
            pass
        samples.append(time.perf_counter() - started)
    pubsub.close()
    return samples


def _celery_round_trip(runtime: Runtime, queue: str, count: int) -> list[float]:
    reply = f"hango:bench:pong:{uuid.uuid4().hex}"

    def ping() -> None:
        runtime.queue._celery.send_task(PING_TASK, args=[reply], queue=queue)
        assert runtime.redis.blpop([reply], timeout=30) is not None

    timed(5, ping)
    return timed(count, ping)


def _agent(runtime: Runtime, principal: Any) -> uuid.UUID:
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=principal.tenant_id,
        name=f"bench-{uuid.uuid4().hex[:6]}",
        system_prompt="",
        model={
            "provider": "scripted",
            "script": [{"tool_calls": [{"id": "s", "name": "stamp", "args": {"key": "KEY"}}]}],
        },
        tools=["stamp"],
        interrupt_on={"stamp": True},
        subagents=[],
        max_turns=5,
        created_by=principal.user_id,
    )
    with runtime.db.transaction() as session:
        session.add(agent)
    return agent.id


def _round(runtime: Runtime, principal: Any, base: str, token: str, agent_id: uuid.UUID) -> dict[str, float]:
    key = f"hango:bench:stamp:{uuid.uuid4().hex}"
    with runtime.db.transaction() as session:
        agent = session.get(Agent, agent_id)
        assert agent is not None
        agent.model = {
            "provider": "scripted",
            "script": [{"tool_calls": [{"id": "s", "name": "stamp", "args": {"key": key}}]}],
        }
    run = service.create_run(runtime, principal, agent_id, [user_message("go")])
    seen: dict[str, float] = {}
    paused = threading.Event()
    reader = threading.Thread(target=_follow, args=(base, token, str(run.id), seen, paused), daemon=True)
    reader.start()
    assert paused.wait(SSE_TIMEOUT), "the run did not pause"
    sent = time.time()
    status = _post(base, token, str(run.id), {"decisions": [{"tool_call_id": "s", "decision": "approve"}]})
    returned = time.time()
    assert status == 200
    executed = runtime.redis.blpop([key], timeout=30)
    assert executed is not None
    reader.join(SSE_TIMEOUT)
    return {
        "execute": float(executed[1]) - returned,
        "sse_after_return": seen["approval.decided"] - returned,
        "sse_after_send": seen["approval.decided"] - sent,
    }


def _follow(base: str, token: str, run_id: str, seen: dict[str, float], paused: threading.Event) -> None:
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=SSE_TIMEOUT)
    connection.request("GET", f"/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    for raw in response:
        line = raw.decode()
        if line.startswith("event: "):
            kind = line[len("event: ") :].strip()
            seen.setdefault(kind, time.time())
            if kind == "run.awaiting_approval":
                paused.set()
            if kind == "run.finished":
                break
    connection.close()


def _post(base: str, token: str, run_id: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(  # noqa: S310 (loopback)
        f"{base}/v1/runs/{run_id}/approvals",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return int(response.status)


if __name__ == "__main__":
    main()
