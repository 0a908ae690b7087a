"""Every mutating request leaves audit rows with the right outcome, and no row ever holds a secret."""

from __future__ import annotations

import json
import uuid
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy import select

from hango.kernel.models import AuditEvent
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture, create_agent


def _trail(client: FlaskClient, tenant: TenantFixture, **filters: str) -> list[dict[str, Any]]:
    response = client.get("/v1/audit-events", query_string=filters, headers=tenant.owner.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


def test_a_successful_create_is_audited_with_actor_target_and_trace(tenant: TenantFixture, client: FlaskClient) -> None:
    trace = uuid.uuid4().hex
    response = client.post(
        "/v1/users",
        json={"email": "carol@example.com", "role": "admin"},
        headers={**tenant.owner.headers, "traceparent": f"00-{trace}-{'1' * 16}-01"},
    )
    assert response.status_code == 201
    [row] = _trail(client, tenant, action="user.create")
    assert row["actor_kind"] == "user"
    assert row["actor_id"] == str(tenant.owner.user_id)
    assert row["target_kind"] == "user"
    assert row["target_id"] == response.json["id"]
    assert row["outcome"] == "success"
    assert row["detail"] == {"role": "admin"}
    assert row["trace_id"] == trace


def test_a_run_is_audited_in_its_own_transaction_and_a_refused_one_by_the_hook(
    tenant: TenantFixture, client: FlaskClient
) -> None:
    member = tenant.add("member")
    agent_id = create_agent(client, tenant.owner, [{"text": "hi"}])
    trace = uuid.uuid4().hex
    headers = {**member.headers, "traceparent": f"00-{trace}-{'1' * 16}-01"}
    created = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers)
    assert created.status_code == 202, created.json
    unknown = str(uuid.uuid4())
    assert client.post("/v1/runs", json={"agent_id": unknown, "input": "go"}, headers=headers).status_code == 404
    refused, row = _trail(client, tenant, action="run.create")
    assert (row["actor_id"], row["target_kind"], row["target_id"]) == (
        str(member.user_id),
        "run",
        created.json["id"],
    )
    assert (row["outcome"], row["detail"], row["trace_id"]) == ("success", {"agent_id": agent_id}, trace)
    assert (refused["outcome"], refused["target_id"], refused["detail"]) == ("error", None, {"status": 404})


def test_a_forbidden_request_is_audited_as_denied(tenant: TenantFixture, client: FlaskClient) -> None:
    member = tenant.add("member")
    assert (
        client.post("/v1/users", json={"email": "x@y.io", "role": "admin"}, headers=member.headers).status_code == 403
    )
    [row] = _trail(client, tenant, action="user.create", target_kind="user")[:1]
    assert row["outcome"] == "denied"
    assert row["actor_id"] == str(member.user_id)
    assert row["detail"] == {"status": 403}


def test_bad_input_and_conflicts_are_audited_as_errors(tenant: TenantFixture, client: FlaskClient) -> None:
    assert client.post("/v1/users", json={"email": "nope"}, headers=tenant.owner.headers).status_code == 400
    person = tenant.add("member")
    assert (
        client.post(
            "/v1/users", json={"email": person.email, "role": "member"}, headers=tenant.owner.headers
        ).status_code
        == 409
    )
    rows = _trail(client, tenant, action="user.create")
    outcomes = [(row["outcome"], row["detail"].get("status")) for row in rows]
    assert outcomes == [("error", 409), ("success", None), ("error", 400)]


def test_an_unauthenticated_mutation_is_audited_without_a_tenant_or_the_callers_trace(
    client: FlaskClient, db: Database
) -> None:
    trace, token_id = uuid.uuid4().hex, str(uuid.uuid4())
    response = client.delete(
        f"/v1/tokens/{token_id}",
        headers={"Authorization": "Bearer hango_forged", "traceparent": f"00-{trace}-{'2' * 16}-01"},
    )
    assert response.status_code == 401
    with db.transaction() as session:
        row = session.scalar(select(AuditEvent).where(AuditEvent.target_id == token_id))
    assert row is not None
    assert (row.tenant_id, row.actor_id, row.outcome, row.action) == (None, None, "denied", "token.revoke")
    # A caller without a valid token cannot attach its refusal to a trace of its choosing: the row gets a fresh id.
    assert row.trace_id is not None
    assert len(row.trace_id) == 32
    assert row.trace_id != trace


def test_targets_come_from_the_url_when_the_request_fails(make_tenant, client: FlaskClient) -> None:  # type: ignore[no-untyped-def]
    mine, theirs = make_tenant("mine"), make_tenant("theirs")
    their_token = client.post(f"/v1/users/{theirs.owner.user_id}/tokens", headers=theirs.owner.headers).json
    assert client.delete(f"/v1/tokens/{their_token['id']}", headers=mine.owner.headers).status_code == 404
    [row] = _trail(client, mine, action="token.revoke")
    assert (row["target_kind"], row["target_id"], row["outcome"]) == ("api_token", their_token["id"], "error")
    # The other tenant's trail does not show the attempt.
    assert _trail(client, theirs, action="token.revoke") == []


def test_reads_are_not_audited(tenant: TenantFixture, client: FlaskClient) -> None:
    before = len(_trail(client, tenant))
    client.get("/v1/users", headers=tenant.owner.headers)
    client.get("/v1/audit-events", headers=tenant.owner.headers)
    assert len(_trail(client, tenant)) == before


def test_unrouted_mutations_are_audited_too(tenant: TenantFixture, client: FlaskClient) -> None:
    assert client.delete("/v1/users", headers=tenant.owner.headers).status_code == 405
    [row] = _trail(client, tenant, action="http.request")
    assert (row["target_kind"], row["target_id"], row["outcome"]) == ("endpoint", "DELETE /v1/users", "error")


def test_no_audit_row_holds_a_token(tenant: TenantFixture, client: FlaskClient, db: Database) -> None:
    member = tenant.add("member")
    issued = client.post(f"/v1/users/{member.user_id}/tokens", headers=member.headers).json
    client.delete(f"/v1/tokens/{issued['id']}", headers=member.headers)
    secrets = [tenant.owner.token, member.token, issued["token"]]
    with db.transaction() as session:
        rows = session.scalars(select(AuditEvent).where(AuditEvent.tenant_id == tenant.id)).all()
    dumped = json.dumps([[row.action, row.target_id, row.detail, row.trace_id] for row in rows])
    assert len(rows) >= 3
    assert not any(secret in dumped for secret in secrets)
    assert not any(secret[len("hango_") :][:16] in dumped for secret in secrets)


def test_the_trail_is_for_owners_and_admins_newest_first(tenant: TenantFixture, client: FlaskClient) -> None:
    member = tenant.add("member")
    admin = tenant.add("admin")
    assert client.get("/v1/audit-events", headers=member.headers).status_code == 403
    assert client.get("/v1/audit-events", headers=admin.headers).status_code == 200
    rows = _trail(client, tenant, action="user.create")
    assert [row["target_id"] for row in rows] == [str(admin.user_id), str(member.user_id)]
    first = client.get("/v1/audit-events", query_string={"limit": 1}, headers=tenant.owner.headers).json
    second = client.get(
        "/v1/audit-events", query_string={"limit": 1, "cursor": first["next_cursor"]}, headers=tenant.owner.headers
    ).json
    assert first["items"][0]["id"] != second["items"][0]["id"]
    assert first["items"][0]["created_at"] >= second["items"][0]["created_at"]


def test_a_request_on_several_targets_writes_one_row_per_target(
    settings,
    db: Database,
    tenant: TenantFixture,  # type: ignore[no-untyped-def]
) -> None:
    from hango.api import create_app
    from hango.api.audit import audit_target, audited

    app = create_app(settings, db=db)
    action = f"batch.{uuid.uuid4().hex[:6]}"

    @app.post("/v1/batch-test")
    @audited(action, "thing")
    def batch() -> tuple[str, int]:
        audit_target("thing", "a", decision="approve")
        audit_target("thing", "b", decision="reject")
        return "", 204

    assert app.test_client().post("/v1/batch-test", headers=tenant.owner.headers).status_code == 204
    rows = _trail(app.test_client(), tenant, action=action)
    assert sorted((row["target_id"], row["detail"]["decision"], row["outcome"]) for row in rows) == [
        ("a", "approve", "success"),
        ("b", "reject", "success"),
    ]
