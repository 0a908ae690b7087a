"""The tenant's approval policy: ``self_approval`` (owner only to change, audited) forbids a run's creator to
decide its approvals, even as an owner; everyone else with the right role still may."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, wait_for_state
from tests.integration.hitl_helpers import audit_rows, decide, pending, suspended_run, write_memory

pytestmark = pytest.mark.usefixtures("worker_process")
SCRIPT = [{"text": "Saving.", "tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}]
APPROVE = {"tool_call_id": "w", "decision": "approve"}


def _set(client: FlaskClient, headers: dict[str, str], value: object) -> tuple[int, Any]:
    response = client.put("/v1/tenant", json={"self_approval": value}, headers=headers)
    return response.status_code, response.json


def test_everyone_reads_the_policy_only_an_owner_changes_it_and_the_change_is_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    member, admin = tenant.add("member"), tenant.add("admin")
    shown = client.get("/v1/tenant", headers=member.headers)
    assert (shown.status_code, shown.json["self_approval"], shown.json["id"]) == (200, True, str(tenant.id))
    assert _set(client, admin.headers, False)[0] == 403
    assert _set(client, member.headers, False)[0] == 403
    status, body = _set(client, tenant.owner.headers, "no")
    assert status == 400
    assert [error["field"] for error in body["errors"]] == ["self_approval"]
    assert client.get("/v1/tenant", headers=member.headers).json["self_approval"] is True
    assert _set(client, tenant.owner.headers, False) == (200, {**shown.json, "self_approval": False})
    rows = audit_rows(db, tenant.id, "tenant.update")
    assert [(row.outcome, row.detail.get("self_approval")) for row in rows if row.outcome == "success"] == [
        ("success", False)
    ]
    assert sorted(row.outcome for row in rows) == ["denied", "denied", "error", "success"]


@pytest.mark.parametrize("value", [0, 1, "false", None, 0.0])
def test_self_approval_is_json_true_or_false_only(client: FlaskClient, tenant: TenantFixture, value: object) -> None:
    status, body = _set(client, tenant.owner.headers, value)
    assert (status, [error["field"] for error in body["errors"]]) == (400, ["self_approval"])
    assert client.get("/v1/tenant", headers=tenant.owner.headers).json["self_approval"] is True


def test_with_self_approval_off_the_runs_creator_is_refused_even_as_owner_and_another_owner_decides(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    assert _set(client, tenant.owner.headers, False)[0] == 200
    run_id = suspended_run(client, tenant, SCRIPT)  # created by the owner
    refused = decide(client, tenant.owner, run_id, APPROVE)
    assert refused.status_code == 403, refused.json
    assert "self-approval" in refused.json["detail"]
    assert [item["state"] for item in pending(client, tenant.owner, run_id)] == ["pending"]
    other_owner = tenant.add("owner")
    assert decide(client, other_owner, run_id, APPROVE).status_code == 200
    assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"


def test_by_default_an_owner_decides_their_own_runs_approvals(client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = suspended_run(client, tenant, SCRIPT)
    assert decide(client, tenant.owner, run_id, APPROVE).status_code == 200
