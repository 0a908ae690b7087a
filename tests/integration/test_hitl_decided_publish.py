"""``approval.decided`` reaches a watching stream because the API publishes it, not because the stream re-reads.

An SSE reader re-reads the run's log at every keep-alive, so with the tests' usual 1 s keep-alive a decision would
show up within the deadline even if the API never published it. Here the keep-alive is far longer than the deadline:
only the API's own publish, at decision time and with no worker holding the run, can deliver the event in time.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.request
import uuid
from datetime import timedelta

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import write_memory
from tests.support.processes import api_server, worker
from tests.support.sse import SseEvent, stream

KEEPALIVE = timedelta(seconds=30)
DEADLINE = 5.0  # seconds; far below KEEPALIVE, so a re-read of the log cannot deliver the event in time


def _read(base: str, path: str, token: str, sink: queue.Queue[SseEvent | None]) -> None:
    def read() -> None:
        try:
            for item in stream(base, path, token, timeout=KEEPALIVE.total_seconds() * 2):
                sink.put(item)
        finally:
            sink.put(None)

    threading.Thread(target=read, daemon=True).start()


def _next_event(sink: queue.Queue[SseEvent | None], event_type: str, timeout: float) -> SseEvent:
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            item = sink.get(timeout=left)
        except queue.Empty:
            break
        if item is None:
            raise AssertionError(f"the stream closed before {event_type}; saw {seen}")
        if item.event:
            seen.append(item.event)
            if item.event == event_type:
                return item
    raise AssertionError(f"no {event_type} within {timeout}s; saw {seen}")


def _post_json(url: str, token: str, body: object) -> int:
    request = urllib.request.Request(  # noqa: S310 (loopback)
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
        return int(response.status)


def test_the_decision_reaches_an_idle_stream_before_its_next_keepalive(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    slow = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", sse_keepalive=KEEPALIVE)
    client = create_app(slow, db=db).test_client()
    agent_id = create_agent(client, tenant.owner, [{"tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}])
    with worker(slow, concurrency=1, beat=False, name="decided-publish"):
        run_id = start_run(client, tenant.owner, agent_id)
        wait_for_state(client, tenant.owner, run_id, {"awaiting_approval"})
    sink: queue.Queue[SseEvent | None] = queue.Queue()
    with api_server(slow) as base:
        _read(base, f"/v1/runs/{run_id}/events", tenant.owner.token, sink)
        # The replay ends with the suspension; after it the reader is live and idle until the next keep-alive.
        _next_event(sink, "run.awaiting_approval", timeout=30)
        body = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
        assert _post_json(f"{base}/v1/runs/{run_id}/approvals", tenant.owner.token, body) == 200
        decided = _next_event(sink, "approval.decided", timeout=DEADLINE)
        assert decided.data["tool_call_id"] == "w"
        assert decided.data["decision"] == "approve"
        assert decided.data["decided_by"] == str(tenant.owner.user_id)
        assert _next_event(sink, "run.queued", timeout=DEADLINE).data == {"reason": "approvals decided"}
