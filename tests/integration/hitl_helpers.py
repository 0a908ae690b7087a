"""Helpers for the human-in-the-loop tests: suspended runs, decisions, and reading back what happened."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from hango.kernel.auth import Principal
from hango.kernel.models import Agent, AuditEvent, RunEvent
from hango.platform.db import Database
from hango.services import tenancy
from tests.integration.conftest import Person, TenantFixture, create_agent, start_run, wait_for_state

MEMORY = "/memories/AGENTS.md"


def write_memory(content: str = "hi", call_id: str | None = None) -> dict[str, Any]:
    """A scripted write_file call to the agent's memory file."""
    call: dict[str, Any] = {"name": "write_file", "args": {"file_path": MEMORY, "content": content}}
    if call_id:
        call["id"] = call_id
    return call


def suspended_run(
    client: FlaskClient, tenant: TenantFixture, script: list[dict[str, Any]], *, by: Person | None = None, **config: Any
) -> str:
    """Start a run of a new agent and wait until it is awaiting approval."""
    agent_id = create_agent(client, tenant.owner, script, **config)
    run_id = start_run(client, by or tenant.owner, agent_id)
    run = wait_for_state(client, by or tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})
    assert run["state"] == "awaiting_approval", run
    return run_id


def pending(client: FlaskClient, person: Person, run_id: str, state: str = "pending") -> list[dict[str, Any]]:
    """A run's approvals as the API lists them."""
    response = client.get(f"/v1/runs/{run_id}/approvals", query_string={"state": state}, headers=person.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


def decide(client: FlaskClient, person: Person, run_id: str, *decisions: dict[str, Any]) -> Any:
    """POST decisions."""
    return client.post(f"/v1/runs/{run_id}/approvals", json={"decisions": list(decisions)}, headers=person.headers)


def finished(client: FlaskClient, person: Person, run_id: str) -> dict[str, Any]:
    """Wait for the run to end."""
    return wait_for_state(client, person, run_id, {"succeeded", "failed", "cancelled"})


def tool_results(client: FlaskClient, person: Person, run_id: str) -> dict[str, dict[str, Any]]:
    """Every tool result of a run by call id."""
    messages = client.get(f"/v1/runs/{run_id}/messages?limit=200", headers=person.headers).json["items"]
    return {b["tool_use_id"]: b for m in messages if m["role"] == "tool" for b in m["content"]}


def event_types(db: Database, run_id: str) -> list[str]:
    """A run's stored event types in order."""
    with db.transaction() as session:
        rows = session.scalars(select(RunEvent.type).where(RunEvent.run_id == uuid.UUID(run_id)).order_by(RunEvent.seq))
        return list(rows)


def audit_rows(db: Database, tenant_id: uuid.UUID, action: str) -> list[AuditEvent]:
    """A tenant's audit rows for one action, oldest first."""
    with db.transaction() as session:
        statement = (
            select(AuditEvent)
            .where(AuditEvent.tenant_id == tenant_id, AuditEvent.action == action)
            .order_by(AuditEvent.created_at)
        )
        return list(session.scalars(statement))


def replayed_events(client: FlaskClient, person: Person, run_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    """A finished run's whole event log as ``GET /v1/runs/{id}/events`` replays it: ``(id, event, data)``."""
    response = client.get(f"/v1/runs/{run_id}/events", headers={**person.headers, "Accept": "text/event-stream"})
    assert response.status_code == 200, response.data[:300]
    events = []
    for frame in response.get_data(as_text=True).split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if not line.startswith(":") and ": " in line)
        if "event" in fields:
            events.append((int(fields["id"]), fields["event"], json.loads(fields["data"])))
    assert [type_ for _, type_, _ in events[-1:]] == ["run.finished"], "the replay ends with run.finished"
    return events


def assert_paired(events: list[tuple[int, str, dict[str, Any]]], opens: str, closes: str, key: str) -> list[str]:
    """Every ``key`` in the log is opened once by ``opens`` and closed once by ``closes``, after it; the keys, in
    order of opening."""
    opened = [data[key] for _, type_, data in events if type_ == opens]
    closed = [data[key] for _, type_, data in events if type_ == closes]
    twice = {name: count for name, count in Counter(opened).items() if count > 1}
    assert not twice, f"{opens} more than once: {twice}"
    assert sorted(closed) == sorted(opened), f"{opens} {opened} but {closes} {closed}"
    position = {(type_, data[key]): index for index, (_, type_, data) in enumerate(events) if type_ in (opens, closes)}
    early = [name for name in opened if position[(closes, name)] < position[(opens, name)]]
    assert not early, f"{closes} before {opens}: {early}"
    return opened


def stored_agent(db: Database, script: list[dict[str, Any]], tools: list[str]) -> tuple[Principal, uuid.UUID]:
    """A new tenant's owner and a scripted agent of theirs, written straight to the database (no API: for tests of
    the services, and of a database the API does not serve)."""
    created = tenancy.create_tenant(db, "t", f"owner-{uuid.uuid4().hex[:8]}@example.com")
    owner = Principal(created.tenant_id, created.user_id, "owner")
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=owner.tenant_id,
        name="a",
        created_by=owner.user_id,
        interrupt_on={},
        subagents=[],
        model={"provider": "scripted", "script": script},
        tools=tools,
        system_prompt="",
        max_turns=5,
    )
    with db.transaction() as session:
        session.add(agent)
    return owner, agent.id
