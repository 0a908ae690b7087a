"""The tenant approval stream, ``GET /v1/approvals/events``, through a real gunicorn server and a real worker: the
four event types, each carrying the approval as the lists show it, who sees what, and replay after
``Last-Event-ID``."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_run
from tests.integration.conftest import TenantFixture, create_agent, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, write_memory
from tests.support.processes import api_server
from tests.support.sse import SseEvent, stream

pytestmark = pytest.mark.usefixtures("worker_process")
STREAM = "/v1/approvals/events"


class Reader:
    """A stream read on a thread of its own; its events (not its comments) land in ``events``."""

    def __init__(self, base: str, token: str, last_event_id: int | None = None) -> None:
        self.events: queue.Queue[SseEvent | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(base, token, last_event_id), daemon=True)
        self._thread.start()

    def _read(self, base: str, token: str, last_event_id: int | None) -> None:
        try:
            for item in stream(base, STREAM, token, last_event_id=last_event_id, timeout=60):
                if item.event:
                    self.events.put(item)
        finally:
            self.events.put(None)

    def take(self, count: int, timeout: float = 30) -> list[SseEvent]:
        """The next ``count`` events; fails if the stream ends or stays quiet first."""
        taken: list[SseEvent] = []
        deadline = time.monotonic() + timeout
        while len(taken) < count:
            item = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            assert item is not None, f"the stream ended after {[event.event for event in taken]}"
            taken.append(item)
        return taken

    def quiet(self, seconds: float) -> bool:
        """Whether nothing more arrives within ``seconds``."""
        try:
            item = self.events.get(timeout=seconds)
        except queue.Empty:
            return True
        self.events.put(item)
        return False


def _suspend(client: FlaskClient, agent_id: str, person: Any, owner: Any) -> tuple[str, dict[str, Any]]:
    run_id = start_run(client, person, agent_id)
    assert wait_for_state(client, owner, run_id, {"awaiting_approval", "failed"})["state"] == "awaiting_approval"
    return run_id, _item(client, owner, run_id)


def _item(client: FlaskClient, person: Any, run_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/runs/{run_id}/approvals", query_string={"state": "all"}, headers=person.headers)
    assert response.status_code == 200, response.json
    (item,) = response.json["items"]
    return item  # type: ignore[no-any-return]


def test_the_stream_carries_each_approval_event_to_those_who_may_see_it_and_replays_after_an_id(
    settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture
) -> None:
    member = tenant.add("member")
    agent_id = create_agent(client, tenant.owner, [{"text": "Saving.", "tool_calls": [write_memory()]}, {"text": "Ok"}])
    with api_server(settings) as base:
        owners = Reader(base, tenant.owner.token)
        members = Reader(base, member.token)

        decided_run, decided_requested = _suspend(client, agent_id, tenant.owner, tenant.owner)
        cancelled_run, cancelled_requested = _suspend(client, agent_id, member, tenant.owner)
        expired_run, expired_requested = _suspend(client, agent_id, tenant.owner, tenant.owner)
        call = decided_requested["tool_call_id"]
        approve = {"tool_call_id": call, "decision": "approve"}
        assert decide(client, tenant.owner, decided_run, approve).status_code == 200
        # The event shows the approval as its decision left it; the worker may have run the call since.
        decided = {**_item(client, tenant.owner, decided_run), "execution": "not_started"}
        assert client.post(f"/v1/runs/{cancelled_run}/cancel", headers=tenant.owner.headers).status_code == 200
        cancelled = _item(client, tenant.owner, cancelled_run)
        runtime = Runtime.build(settings, db=db)
        assert expire_run(runtime, uuid.UUID(expired_run), datetime.now(UTC) + timedelta(seconds=1), "0" * 32)
        expired = _item(client, tenant.owner, expired_run)

        seen = owners.take(6)
        assert [(event.event, event.data) for event in seen] == [
            ("approval.requested", decided_requested),
            ("approval.requested", cancelled_requested),
            ("approval.requested", expired_requested),
            ("approval.decided", decided),
            ("approval.cancelled", cancelled),
            ("approval.expired", expired),
        ]
        assert (decided["state"], cancelled["state"], expired["state"]) == ("decided", "cancelled", "expired")
        ids = [event.id for event in seen]
        assert ids == sorted(ids)
        assert len(set(ids)) == 6

        # A member sees the approvals of their own runs only, numbered as in the tenant's stream.
        mine = members.take(2)
        assert [(event.event, event.data["run_id"]) for event in mine] == [
            ("approval.requested", cancelled_run),
            ("approval.cancelled", cancelled_run),
        ]
        assert [event.id for event in mine] == [seen[1].id, seen[4].id]
        assert members.quiet(1.0)

        # Reconnecting after an id replays exactly what followed it.
        again = Reader(base, tenant.owner.token, last_event_id=seen[2].id)
        assert [(event.id, event.event, event.data) for event in again.take(3)] == [
            (event.id, event.event, event.data) for event in seen[3:]
        ]
        assert again.quiet(1.0)
        members_again = Reader(base, member.token, last_event_id=seen[1].id)
        assert [event.id for event in members_again.take(1)] == [seen[4].id]


def test_a_last_event_id_that_is_not_an_id_is_a_400_naming_it(client: FlaskClient, tenant: TenantFixture) -> None:
    response = client.get(STREAM, headers={**tenant.owner.headers, "Last-Event-ID": "0x10"})
    assert response.status_code == 400
    assert response.content_type == "application/problem+json"
    assert "Last-Event-ID" in response.get_data(as_text=True)
