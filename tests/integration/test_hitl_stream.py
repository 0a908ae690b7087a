"""One SSE connection through a whole suspension: the request, the human's decision (published by the API while
no worker holds the run), and the resumed run to its end."""

from __future__ import annotations

import queue
import threading
import time
import uuid

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import write_memory
from tests.support.processes import api_server, worker
from tests.support.sse import SseEvent, stream


@pytest.fixture
def own_settings(settings: Settings) -> Settings:
    return settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}")


def _reader(base: str, path: str, token: str, sink: queue.Queue[SseEvent | None]) -> threading.Thread:
    def read() -> None:
        try:
            for item in stream(base, path, token, timeout=60):
                sink.put(item)
        finally:
            sink.put(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _until(sink: queue.Queue[SseEvent | None], event_type: str, seen: list[SseEvent], timeout: float = 30) -> SseEvent:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        item = sink.get(timeout=max(0.01, deadline - time.monotonic()))
        if item is None:
            raise AssertionError(f"the stream closed before {event_type}; saw {[e.event for e in seen]}")
        if item.event:
            seen.append(item)
            if item.event == event_type:
                return item
    raise AssertionError(f"no {event_type} within {timeout}s")


def test_one_stream_sees_the_request_the_decision_at_decision_time_and_the_rest(
    own_settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    client: FlaskClient = create_app(own_settings, db=db).test_client()
    agent_id = create_agent(
        client, tenant.owner, [{"text": "Saving.", "tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}]
    )
    sink: queue.Queue[SseEvent | None] = queue.Queue()
    seen: list[SseEvent] = []
    with api_server(own_settings) as base:
        with worker(own_settings, concurrency=1, beat=False, name="stream-1"):
            run_id = start_run(client, tenant.owner, agent_id)
            reader = _reader(base, f"/v1/runs/{run_id}/events", tenant.owner.token, sink)
            requested = _until(sink, "approval.requested", seen)
            assert requested.data["tool_name"] == "write_file"
            assert requested.data["arguments"] == {"file_path": "/memories/AGENTS.md", "content": "hi"}
            assert requested.data["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
            assert requested.data["subagent_call_id"] is None
            _until(sink, "run.awaiting_approval", seen)
        # No worker exists now: whatever arrives next was published by the API itself.
        decided_at = time.monotonic()
        response = client.post(
            f"/v1/runs/{run_id}/approvals",
            json={"decisions": [{"tool_call_id": "w", "decision": "approve"}]},
            headers=tenant.owner.headers,
        )
        assert response.status_code == 200
        decided = _until(sink, "approval.decided", seen, timeout=5)
        assert decided.data["decision"] == "approve"
        assert decided.data["decided_by"] == str(tenant.owner.user_id)
        assert decided.received_at - decided_at < 5
        assert wait_for_state(client, tenant.owner, run_id, {"queued"})["state"] == "queued"
        with worker(own_settings, concurrency=1, beat=False, name="stream-2"):
            finished = _until(sink, "run.finished", seen)
            reader.join(timeout=10)
    assert finished.data == {"state": "succeeded", "error": None}
    types = [event.event for event in seen]
    assert types.index("approval.requested") < types.index("run.awaiting_approval") < types.index("approval.decided")
    assert types.index("approval.decided") < types.index("run.resumed") < types.index("tool.started")
    resumed = next(event for event in seen if event.event == "run.resumed")
    assert resumed.data["suspension_seconds"] > 0
    assert [event.id for event in seen] == sorted(event.id for event in seen)  # type: ignore[type-var]
    assert sink.get(timeout=5) is None, "the stream stays open only until run.finished"
