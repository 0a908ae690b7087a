"""Helpers for the human-in-the-loop tests: suspended runs, decisions, and reading back what happened."""

from __future__ import annotations

import uuid
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from hango.db import Database
from hango.models import AuditEvent, RunEvent
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
