"""Decisions bound to what the reviewer saw: every approval item carries ``arguments_sha256`` (RFC 8785 canonical
JSON, SHA-256), and a decision naming another digest is a 409 ``stale-approval`` that stores nothing."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.kernel.models import ApprovalEvent, RunEvent
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, wait_for_state
from tests.integration.hitl_helpers import MEMORY, audit_rows, decide, pending, suspended_run, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory("remember tea", call_id="w")]}, {"text": "Done."}]


def _run_events(db: Database, run_id: str) -> list[RunEvent]:
    with db.transaction() as session:
        return list(session.scalars(select(RunEvent).where(RunEvent.run_id == uuid.UUID(run_id))))


def _approval_events(db: Database, tenant_id: uuid.UUID) -> list[ApprovalEvent]:
    with db.transaction() as session:
        return list(session.scalars(select(ApprovalEvent).where(ApprovalEvent.tenant_id == tenant_id)))


def _canonical_digest(arguments: dict[str, str]) -> str:
    # Flat string-valued arguments: sorted keys and no whitespace are the whole of RFC 8785 here.
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_items_and_requests_carry_the_digest_of_their_arguments(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    [item] = pending(client, tenant.owner, run_id)
    assert item["arguments_sha256"] == _canonical_digest({"file_path": MEMORY, "content": "remember tea"})
    [queued] = client.get("/v1/approvals", headers=tenant.owner.headers).json["items"]
    assert queued["arguments_sha256"] == item["arguments_sha256"]
    [requested] = [event for event in _run_events(db, run_id) if event.type == "approval.requested"]
    assert requested.data["arguments_sha256"] == item["arguments_sha256"]
    [notice] = [row for row in _approval_events(db, tenant.id) if row.type == "approval.requested"]
    assert notice.data["arguments_sha256"] == item["arguments_sha256"]


def test_a_decision_bound_to_other_arguments_is_a_409_and_stores_nothing(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    [item] = pending(client, tenant.owner, run_id)
    seen = _canonical_digest({"file_path": MEMORY, "content": "remember coffee"})
    refused = decide(
        client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve", "arguments_sha256": seen}
    )
    assert refused.status_code == 409, refused.json
    assert refused.json["type"] == "urn:hango:problem:stale-approval"
    assert [row["state"] for row in pending(client, tenant.owner, run_id)] == ["pending"]
    assert client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"
    assert [row.outcome for row in audit_rows(db, tenant.id, "approval.decide")] == ["error"]
    bound = {"tool_call_id": "w", "decision": "approve", "arguments_sha256": item["arguments_sha256"]}
    assert decide(client, tenant.owner, run_id, bound).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_a_malformed_digest_is_a_400_naming_the_field(client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    refused = decide(
        client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve", "arguments_sha256": "x"}
    )
    assert refused.status_code == 400
    assert [error["field"] for error in refused.json["errors"]] == ["decisions[0].arguments_sha256"]
