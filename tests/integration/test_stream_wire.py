"""Live events written by the process's reader straight to a waiting stream's connection, through the real
gevent server: a client that stops reading still gets every event whole and in order once it reads again, and an
HTTP/1.0 client gets a bare body (no chunk framing) from both the stream and the reader."""

from __future__ import annotations

import re
import socket
import time
import uuid
from urllib.parse import urlsplit

import pytest
import redis
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.platform.events import Event, channel
from tests.integration.conftest import TenantFixture
from tests.integration.hitl_helpers import decide, suspended_run, write_memory
from tests.support.processes import api_server
from tests.support.sse import stream

pytestmark = pytest.mark.usefixtures("worker_process")
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}]
SSE_LINE = re.compile(r"(retry: \d+|id: \d+|event: [a-z._]+|data: .*|: keep-alive|)")


def test_a_client_that_stops_reading_gets_every_live_event_whole_and_in_order(
    settings: Settings, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    publisher = redis.Redis.from_url(settings.require_redis_url())
    with api_server(settings) as base:
        events = (item for item in stream(base, f"/v1/runs/{run_id}/events", tenant.owner.token) if item.event)
        head = next(item for item in events if item.event == "run.awaiting_approval").id
        assert head is not None
        # Far more than the socket buffers hold, published while the client reads nothing: the reader writes what
        # fits, the stream waits to write the rest, and the events behind it queue (fewer than the queue holds).
        blobs = [chr(65 + number % 26) * 100_000 for number in range(60)]
        bulk = [Event(uuid.UUID(run_id), head + 1 + n, "test.bulk", {"blob": blob}) for n, blob in enumerate(blobs)]
        for event in bulk:
            publisher.publish(channel(event.run_id), event.payload())
        time.sleep(1.0)
        heard = [next(events) for _ in bulk]
    assert [(item.id, item.event, item.data) for item in heard] == [(e.seq, e.type, e.data) for e in bulk]


def test_an_http_1_0_client_gets_a_bare_event_stream_to_the_end(
    settings: Settings, client: FlaskClient, tenant: TenantFixture
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    with api_server(settings) as base:
        parts = urlsplit(base)
        with socket.create_connection((parts.hostname, parts.port), timeout=30) as connection:
            request = (
                f"GET /v1/runs/{run_id}/events HTTP/1.0\r\nHost: {parts.netloc}\r\n"
                f"Authorization: Bearer {tenant.owner.token}\r\n\r\n"
            )
            connection.sendall(request.encode())
            received = _until(connection, b"event: run.awaiting_approval\n", b"")
            assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
            received = _until(connection, None, received)  # HTTP/1.0: the body ends when the server closes
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") or head.startswith(b"HTTP/1.1 200"), head[:100]
    assert b"transfer-encoding" not in head.lower()
    lines = body.decode().split("\n")
    assert [line for line in lines if not SSE_LINE.fullmatch(line)] == []
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    assert names.index("approval.requested") < names.index("approval.decided") < names.index("run.finished")
    assert names[-1] == "run.finished"


def _until(connection: socket.socket, marker: bytes | None, received: bytes) -> bytes:
    """Read until ``marker`` has arrived (``None``: until the server closes)."""
    deadline = time.monotonic() + 30
    while marker is None or marker not in received:
        assert time.monotonic() < deadline, f"waited in vain for {marker!r}; got {received[-300:]!r}"
        chunk = connection.recv(65536)
        if not chunk:
            assert marker is None, f"the server closed before {marker!r}"
            return received
        received += chunk
    return received
