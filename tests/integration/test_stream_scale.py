"""Hundreds of open event streams on one API process, through the real gevent server: they cost neither a thread
nor a Redis connection each, ordinary requests are still answered, and one decision reaches every stream."""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, write_memory
from tests.support.processes import api_process, get_status, wait_until
from tests.support.sse import stream

pytestmark = pytest.mark.usefixtures("worker_process")
RUN_STREAMS = 150
TENANT_STREAMS = 150
STREAMS = RUN_STREAMS + TENANT_STREAMS


def _follow(base: str, path: str, token: str, sink: queue.Queue[tuple[str, Any]]) -> None:
    try:
        for item in stream(base, path, token, timeout=120):
            if item.event:
                sink.put((item.event, item.data))
    except Exception as exc:
        sink.put(("error", repr(exc)))


def _worker_pid(arbiter: int) -> int:
    children = Path(f"/proc/{arbiter}/task/{arbiter}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def test_hundreds_of_streams_share_one_process_one_subscription_and_all_hear_a_decision(
    settings: Settings, client: FlaskClient, tenant: TenantFixture
) -> None:
    crowd = settings.replace(max_streams_per_user=STREAMS + 10)
    agent_id = create_agent(client, tenant.owner, [{"text": "Saving.", "tool_calls": [write_memory()]}, {"text": "Ok"}])
    run_id = start_run(client, tenant.owner, agent_id)
    assert wait_for_state(client, tenant.owner, run_id, {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    monitor = redis.Redis.from_url(settings.require_redis_url())
    pubsub_before = len(monitor.client_list(_type="pubsub"))
    sinks: list[queue.Queue[tuple[str, Any]]] = [queue.Queue() for _ in range(STREAMS)]
    with api_process(crowd, connections=2 * STREAMS) as (base, arbiter):
        paths = [f"/v1/runs/{run_id}/events"] * RUN_STREAMS + ["/v1/approvals/events"] * TENANT_STREAMS
        for path, sink in zip(paths, sinks, strict=True):
            threading.Thread(target=_follow, args=(base, path, tenant.owner.token, sink), daemon=True).start()
        # Every stream replays the request: once each has, all of them are open.
        for sink in sinks:
            assert wait_until(lambda sink=sink: _heard(sink, "approval.requested"), timeout=60)

        worker = _worker_pid(arbiter.pid)
        assert _threads(worker) < 30  # gevent's few helper threads, not one per stream
        # The process's one subscription (a little slack for other processes of the machine coming and going).
        assert len(monitor.client_list(_type="pubsub")) - pubsub_before <= 3
        assert get_status(base, "/v1/runs", tenant.owner.token) == 200

        call = client.get(f"/v1/runs/{run_id}/approvals", headers=tenant.owner.headers).json["items"][0]
        response = decide(client, tenant.owner, run_id, {"tool_call_id": call["tool_call_id"], "decision": "approve"})
        assert response.status_code == 200
        for sink in sinks:
            assert wait_until(lambda sink=sink: _heard(sink, "approval.decided"), timeout=60)


def _heard(sink: queue.Queue[tuple[str, Any]], wanted: str) -> bool:
    while True:
        try:
            event, data = sink.get_nowait()
        except queue.Empty:
            return False
        assert event != "error", data
        if event == wanted:
            return True
