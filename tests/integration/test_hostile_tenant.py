"""One tenant attacks with everything at once; another tenant's work goes on.

The hostile tenant runs a script of catastrophic patterns, files that grow on every edit, writes past every
storage budget and calls past the timeout, while its users flood the API with more event streams than it has
threads. Meanwhile, through the same real gunicorn server and the same real worker, another tenant starts a run,
lists its runs and sees the run finish — before the hostile run does.
"""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.kernel.models import Run
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent
from tests.integration.test_stream_limits import SUSPENDING, Reader
from tests.integration.test_tool_budgets import HOSTILE_ERRORS, LIMITS, UNPROTECTED, _hostile_script
from tests.support.processes import api_server, wait_until, worker

pytestmark = pytest.mark.integration

HOSTILE_TOOLS = ["read_file", "write_file", "edit_file", "glob", "grep", "spin", "scribble", "sleep"]
FLOODERS = 4
STREAMS_EACH = 10  # 40 asked for: more than the server's 32 threads, and more than each user's cap of 8
TERMINAL = {"succeeded", "failed", "cancelled"}


def _request(base: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Authorization": f"Bearer {token}"}
    payload = None
    if body is not None:
        payload, headers["Content-Type"] = json.dumps(body), "application/json"
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def _start(base: str, token: str, agent_id: str) -> str:
    status, run = _request(base, "POST", "/v1/runs", token, {"agent_id": agent_id, "input": "go"})
    assert status == 202, run
    run_id: str = run["id"]
    return run_id


def _run_row(db: Database, run_id: str) -> Run:
    with db.transaction() as session:
        run = session.get(Run, uuid.UUID(run_id))
        assert run is not None
        return run


def _finished(db: Database, run_id: str) -> Run | None:
    run = _run_row(db, run_id)
    return run if run.state in TERMINAL else None


@pytest.fixture
def attack_settings(settings: Settings) -> Settings:
    """A queue of its own, the small budgets of the budget tests and a small per-user stream cap."""
    return settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        max_file_bytes=LIMITS.max_file_bytes,
        max_run_storage_bytes=LIMITS.max_run_storage_bytes,
        max_agent_storage_bytes=LIMITS.max_agent_storage_bytes,
        tool_timeout=timedelta(seconds=LIMITS.timeout),
        max_streams_per_user=8,
    )


def test_regex_file_growth_and_stream_flood_at_once_leave_another_tenant_served(
    attack_settings: Settings, client: FlaskClient, make_tenant: Any, db: Database
) -> None:
    hostile: TenantFixture = make_tenant("hostile")
    ordinary: TenantFixture = make_tenant("ordinary")
    flooders = [hostile.owner, *(hostile.add("member") for _ in range(FLOODERS - 1))]
    script_agent = create_agent(client, hostile.owner, _hostile_script(), tools=HOSTILE_TOOLS, interrupt_on=UNPROTECTED)
    # The members' runs only give their streams something to follow: they suspend at once and hold no worker.
    waiting_agent = create_agent(client, hostile.owner, SUSPENDING)
    polite = create_agent(
        client,
        ordinary.owner,
        [{"tool_calls": [{"name": "write_file", "args": {"file_path": "/n.md", "content": "hi"}}]}, {"text": "ok"}],
        tools=["write_file"],
    )
    readers: list[Reader] = []

    with api_server(attack_settings) as base, worker(attack_settings, concurrency=2, beat=True, name="hostile"):
        attack = _start(base, hostile.owner.token, script_agent)
        followed = [attack, *(_start(base, person.token, waiting_agent) for person in flooders[1:])]

        def flood(token: str, run_id: str) -> None:
            readers.append(Reader(base, run_id, token))

        # The flood: every hostile user asks for ten streams of their own run at once.
        openers = [
            threading.Thread(target=flood, args=(person.token, run_id), daemon=True)
            for person, run_id in zip(flooders, followed, strict=True)
            for _ in range(STREAMS_EACH)
        ]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join(30)
        admitted = [reader for reader in readers if reader.status == 200]
        refused = {reader.status for reader in readers if reader.status != 200}
        assert len(readers) == FLOODERS * STREAMS_EACH
        assert admitted
        assert refused <= {429, 503}
        assert 429 in refused

        # Meanwhile the other tenant works through the same server.
        run = {"id": _start(base, ordinary.owner.token, polite)}

        def ordinary_finished() -> dict[str, Any] | None:
            status, listed = _request(base, "GET", "/v1/runs", ordinary.owner.token)
            assert status == 200, listed
            [mine] = [item for item in listed["items"] if item["id"] == run["id"]]
            return mine if mine["state"] in TERMINAL else None

        done = wait_until(ordinary_finished, timeout=60)
        assert done["state"] == "succeeded", done
        # ...while the attack is still going on: the hostile run is unfinished and its streams are still open.
        assert _run_row(db, attack).state == "running"
        assert not all(reader.ended.is_set() for reader in admitted)

        final = wait_until(lambda: _finished(db, attack), timeout=120)
        for reader in readers:
            if reader.status == 200:
                reader.hang_up()

    assert final.state == "succeeded", final.error
    assert final.attempts == 0, "the hostile run lost its lease and was reclaimed"
    messages = client.get(f"/v1/runs/{attack}/messages?limit=200", headers=hostile.owner.headers).json["items"]
    results = {block["tool_use_id"]: block for m in messages if m["role"] == "tool" for block in m["content"]}
    for call_id, expected in HOSTILE_ERRORS.items():
        if expected is not None:
            assert results[call_id]["is_error"], (call_id, results[call_id])
            assert expected in results[call_id]["content"], (call_id, results[call_id])
