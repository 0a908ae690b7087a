"""Human-in-the-loop end to end: suspension, the four decisions, authorization, validation, expiry, audit."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.expiry import expire_stale
from tests.integration.conftest import TenantFixture, messages_of
from tests.integration.hitl_helpers import (
    MEMORY,
    audit_rows,
    decide,
    event_types,
    finished,
    pending,
    suspended_run,
    tool_results,
    write_memory,
)
from tests.support.tools import executions

pytestmark = pytest.mark.usefixtures("worker_process")


def test_with_no_configuration_a_memory_write_suspends_and_no_tool_of_the_batch_runs(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    script = [
        {
            "text": "Saving.",
            "tool_calls": [{"id": "c", "name": "count", "args": {"key": key}}, write_memory(call_id="w")],
        }
    ]
    run_id = suspended_run(client, tenant, script)
    run = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json
    assert run["awaiting_since"] is not None
    assert executions(key) == 0, "a sibling of the interrupting call ran"
    [approval] = pending(client, tenant.owner, run_id)
    assert (approval["tool_call_id"], approval["tool_name"], approval["state"]) == ("w", "write_file", "pending")
    assert approval["arguments"] == {"file_path": MEMORY, "content": "hi"}
    assert approval["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert approval["expires_at"] > approval["created_at"]
    assert [m["role"] for m in messages_of(client, tenant.owner, run_id)] == ["user", "assistant"]
    types = event_types(db, run_id)
    assert types[-2:] == ["approval.requested", "run.awaiting_approval"]
    assert "tool.started" not in types


def test_approve_runs_the_call_once_then_the_siblings_and_the_run_completes(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    key = uuid.uuid4().hex
    script = [
        {"tool_calls": [{"id": "c", "name": "count", "args": {"key": key}}, write_memory("remember", "w")]},
        {"tool_calls": [{"id": "r", "name": "read_file", "args": {"file_path": MEMORY}}]},
        {"text": "Done."},
    ]
    run_id = suspended_run(client, tenant, script)
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"})
    assert response.status_code == 200, response.json
    assert response.json["run"]["state"] == "queued"
    assert [a["decision"] for a in response.json["approvals"]] == ["approve"]
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert executions(key) == 1
    assert not results["w"]["is_error"]
    assert results["w"]["content"] != "tool call interrupted"
    assert "remember" in results["r"]["content"]
    types = event_types(db, run_id)
    assert types.index("approval.decided") < types.index("run.resumed")


def test_edit_runs_the_human_arguments_and_keeps_the_model_input(client: FlaskClient, tenant: TenantFixture) -> None:
    script = [
        {"tool_calls": [write_memory("from the model", "w")]},
        {"tool_calls": [{"id": "r", "name": "read_file", "args": {"file_path": MEMORY}}]},
    ]
    run_id = suspended_run(client, tenant, script)
    edited = {"file_path": MEMORY, "content": "from the human"}
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "edit", "args": edited})
    assert response.status_code == 200, response.json
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert "from the human" in results["r"]["content"]
    assert "from the model" not in results["r"]["content"]
    tool_use = messages_of(client, tenant.owner, run_id)[1]["content"][0]
    assert tool_use["input"]["content"] == "from the model"
    [approval] = pending(client, tenant.owner, run_id, "decided")
    assert approval["arguments"]["content"] == "from the model"
    assert approval["decision_args"] == edited


def test_reject_returns_an_error_result_with_the_message_and_the_model_goes_on(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    script = [
        {"tool_calls": [write_memory("x", "w")]},
        {"tool_calls": [{"id": "r", "name": "read_file", "args": {"file_path": MEMORY}}]},
        {"text": "Understood."},
    ]
    run_id = suspended_run(client, tenant, script)
    message = "not this file, <please> \u00e9crire ailleurs"
    assert (
        decide(
            client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "reject", "message": message}
        ).status_code
        == 200
    )
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    results = tool_results(client, tenant.owner, run_id)
    assert results["w"]["is_error"] is True
    assert message in results["w"]["content"]
    assert results["r"]["is_error"] is True  # the file was never written
    assert messages_of(client, tenant.owner, run_id)[-1]["content"] == [{"type": "text", "text": "Understood."}]


def test_respond_returns_the_human_text_as_the_result_without_running_the_tool(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    key = uuid.uuid4().hex
    script = [{"tool_calls": [{"id": "q", "name": "count", "args": {"key": key}}]}, {"text": "Thanks."}]
    run_id = suspended_run(client, tenant, script, interrupt_on={"count": True})
    assert (
        decide(
            client, tenant.owner, run_id, {"tool_call_id": "q", "decision": "respond", "message": "the answer is 42"}
        ).status_code
        == 200
    )
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    result = tool_results(client, tenant.owner, run_id)["q"]
    assert (result["content"], result["is_error"]) == ("the answer is 42", False)
    assert executions(key) == 0


def test_an_approved_call_runs_exactly_once(client: FlaskClient, tenant: TenantFixture) -> None:
    key = uuid.uuid4().hex
    script = [{"tool_calls": [{"id": "q", "name": "count", "args": {"key": key}}]}, {"text": "ok"}]
    run_id = suspended_run(client, tenant, script, interrupt_on={"count": True})
    assert (
        decide(
            client,
            tenant.owner,
            run_id,
            {"approval_id": pending(client, tenant.owner, run_id)[0]["id"], "decision": "approve"},
        ).status_code
        == 200
    )
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    assert executions(key) == 1
    assert tool_results(client, tenant.owner, run_id)["q"]["content"] == f"counted {key} (1)"


def test_a_resumed_run_does_not_rerun_completed_calls(client: FlaskClient, tenant: TenantFixture) -> None:
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    script = [
        {"tool_calls": [{"id": "c1", "name": "count", "args": {"key": first}}]},
        {"tool_calls": [{"id": "c2", "name": "count", "args": {"key": second}}, write_memory(call_id="w")]},
        {"text": "Done."},
    ]
    run_id = suspended_run(client, tenant, script)
    assert executions(first) == 1
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    assert (executions(first), executions(second)) == (1, 1)
    assert [m["role"] for m in messages_of(client, tenant.owner, run_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


def test_a_partial_decision_is_a_409_listing_the_remaining_calls(client: FlaskClient, tenant: TenantFixture) -> None:
    script = [
        {
            "tool_calls": [
                write_memory(call_id="a"),
                {
                    "id": "b",
                    "name": "edit_file",
                    "args": {"file_path": "/skills/x.md", "old_string": "a", "new_string": "b"},
                },
            ]
        }
    ]
    run_id = suspended_run(client, tenant, script)
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "a", "decision": "approve"})
    assert response.status_code == 409
    assert response.json["type"] == "urn:hango:problem:partial-decision"
    [remaining] = response.json["remaining"]
    assert (remaining["tool_call_id"], remaining["tool_name"]) == ("b", "edit_file")
    assert {a["state"] for a in pending(client, tenant.owner, run_id, "all")} == {"pending"}
    assert client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"


def test_members_see_their_runs_approvals_but_never_decide(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any, db: Database
) -> None:
    creator, other = tenant.add("member"), tenant.add("member")
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}], by=creator)
    assert len(pending(client, creator, run_id)) == 1
    assert run_id in {a["run_id"] for a in client.get("/v1/approvals", headers=creator.headers).json["items"]}
    denied = decide(client, creator, run_id, {"tool_call_id": "w", "decision": "approve"})
    assert denied.status_code == 403
    assert denied.json["type"] == "urn:hango:problem:forbidden"
    assert client.get(f"/v1/runs/{run_id}/approvals", headers=other.headers).status_code == 404
    assert run_id not in {a["run_id"] for a in client.get("/v1/approvals", headers=other.headers).json["items"]}
    assert decide(client, other, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 404
    stranger = make_tenant("other").owner
    assert client.get(f"/v1/runs/{run_id}/approvals", headers=stranger.headers).status_code == 404
    assert decide(client, stranger, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 404
    # A malformed body from a member is still a 403: authorization is checked before the body.
    malformed = client.post(
        f"/v1/runs/{run_id}/approvals", data="{", content_type="application/json", headers=creator.headers
    )
    assert malformed.status_code == 403
    rows = [(r.actor_id, r.outcome, r.target_kind) for r in audit_rows(db, tenant.id, "approval.decide")]
    assert rows == [
        (creator.user_id, "denied", "pending_approval"),  # named a known approval
        (other.user_id, "error", "run"),  # the run is not visible to them: 404, no approval revealed
        (creator.user_id, "denied", "run"),  # the malformed body names nothing
    ]
    admin = tenant.add("admin")
    assert decide(client, admin, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ({"decision": "edit", "args": {"file_path": MEMORY}}, "decisions[0].args"),
        ({"decision": "edit", "args": {"file_path": MEMORY, "content": 5}}, "decisions[0].args.content"),
        ({"decision": "edit", "args": {"file_path": MEMORY, "content": "x", "mode": "a"}}, "decisions[0].args"),
        ({"decision": "edit", "args": {"file_path": "/elsewhere.md", "content": "x"}}, "decisions[0].args"),
        ({"decision": "edit", "args": {"file_path": "/memories/../etc/x", "content": "x"}}, "decisions[0].args"),
        ({"decision": "reject"}, "decisions[0].message"),
        ({"decision": "maybe"}, "decisions[0].decision"),
        ({"decision": "approve", "tool_call_id": "nope"}, "decisions[0].tool_call_id"),
    ],
)
def test_invalid_decisions_are_a_400_and_the_approval_stays_pending(
    client: FlaskClient, tenant: TenantFixture, db: Database, decision: dict[str, Any], field: str
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "w", **decision})
    assert response.status_code == 400, response.json
    assert any(error["field"].startswith(field) for error in response.json["errors"]), response.json
    [approval] = pending(client, tenant.owner, run_id)
    assert approval["state"] == "pending"
    assert client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"


def test_a_decision_not_allowed_by_the_rule_is_a_400(client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = suspended_run(
        client,
        tenant,
        [{"tool_calls": [write_memory(call_id="w")]}],
        interrupt_on={"write_file": {"allowed_decisions": ["approve", "reject"]}},
    )
    response = decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "respond", "message": "no"})
    assert response.status_code == 400
    assert response.json["errors"][0]["field"] == "decisions[0].decision"


def test_naming_a_call_twice_or_disagreeing_ids_is_a_400(client: FlaskClient, tenant: TenantFixture) -> None:
    script = [{"tool_calls": [write_memory(call_id="a"), write_memory("y", "b")]}]
    run_id = suspended_run(client, tenant, script)
    twice = decide(
        client,
        tenant.owner,
        run_id,
        {"tool_call_id": "a", "decision": "approve"},
        {"tool_call_id": "a", "decision": "approve"},
    )
    assert twice.status_code == 400
    ids = {a["tool_call_id"]: a["id"] for a in pending(client, tenant.owner, run_id)}
    mixed = decide(client, tenant.owner, run_id, {"tool_call_id": "a", "approval_id": ids["b"], "decision": "approve"})
    assert mixed.status_code == 400


def test_a_second_final_decision_is_a_409(client: FlaskClient, tenant: TenantFixture) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    again = decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"})
    assert again.status_code == 409
    assert again.json["type"] == "urn:hango:problem:not-awaiting-approval"


def test_the_when_matcher_limits_an_interrupt_to_a_path_prefix(client: FlaskClient, tenant: TenantFixture) -> None:
    script = [
        {"tool_calls": [{"id": "free", "name": "write_file", "args": {"file_path": "/notes/a.md", "content": "x"}}]},
        {
            "tool_calls": [
                {"id": "held", "name": "write_file", "args": {"file_path": "/notes/../secret/a.md", "content": "x"}}
            ]
        },
    ]
    run_id = suspended_run(
        client, tenant, script, interrupt_on={"write_file": {"when": {"file_path": {"prefix": "/secret/"}}}}
    )
    assert [a["tool_call_id"] for a in pending(client, tenant.owner, run_id)] == ["held"]
    assert not tool_results(client, tenant.owner, run_id)["free"]["is_error"]


def test_write_file_false_removes_the_default_and_is_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    from tests.integration.conftest import create_agent, start_run, wait_for_state

    agent_id = create_agent(
        client, tenant.owner, [{"tool_calls": [write_memory(call_id="w")]}], interrupt_on={"write_file": False}
    )
    agent = client.get(f"/v1/agents/{agent_id}", headers=tenant.owner.headers).json
    assert agent["effective_interrupt_on"]["write_file"] is False
    assert agent["effective_interrupt_on"]["edit_file"]["when"] == {"file_path": {"prefix": ["/memories/", "/skills/"]}}
    [row] = audit_rows(db, tenant.id, "agent.interrupt_default_overridden")
    assert (row.target_id, row.detail) == (agent_id, {"tool": "write_file"})
    run_id = start_run(client, tenant.owner, agent_id)
    assert (
        wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed", "awaiting_approval"})["state"]
        == "succeeded"
    )


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"write_file": {"allowed_decisions": ["approve", "shrug"]}}, "interrupt_on.write_file.allowed_decisions[1]"),
        (
            {"write_file": {"when": {"file_path": {"startswith": "/x"}}}},
            "interrupt_on.write_file.when.file_path.startswith",
        ),
        ({"write_file": {"when": {"file_path": {"prefix": 3}}}}, "interrupt_on.write_file.when.file_path.prefix"),
        ({"write_file": {"when": {"content": {"size_over": -1}}}}, "interrupt_on.write_file.when.content.size_over"),
        ({"write_file": "yes"}, "interrupt_on.write_file"),
        ({"write_file": {"when": {}}}, "interrupt_on.write_file.when"),
    ],
)
def test_malformed_rules_are_a_400_at_save_time(
    client: FlaskClient, tenant: TenantFixture, rules: dict[str, Any], field: str
) -> None:
    body = {"name": "x", "model": {"provider": "scripted"}, "interrupt_on": rules}
    response = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400
    assert field in [error["field"] for error in response.json["errors"]]


def test_cancelling_a_suspended_run_cancels_its_approvals(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    assert client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers).json["state"] == "cancelled"
    assert [a["state"] for a in pending(client, tenant.owner, run_id, "all")] == ["cancelled"]
    assert pending(client, tenant.owner, run_id) == []
    assert run_id not in {a["run_id"] for a in client.get("/v1/approvals", headers=tenant.owner.headers).json["items"]}
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 409
    assert event_types(db, run_id)[-1] == "run.finished"


def test_the_sweeper_fails_a_stale_run_with_approval_expired(
    client: FlaskClient, tenant: TenantFixture, db: Database, settings: Settings
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    from datetime import timedelta

    assert expire_stale(Runtime.build(settings, db=db)) == 0  # a 24h TTL leaves it alone
    assert client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json["state"] == "awaiting_approval"
    impatient = Runtime.build(settings.replace(approval_ttl=timedelta(0)), db=db)
    assert expire_stale(impatient) >= 1
    run = client.get(f"/v1/runs/{run_id}", headers=tenant.owner.headers).json
    assert (run["state"], run["error"]) == ("failed", "approval expired")
    assert [a["state"] for a in pending(client, tenant.owner, run_id, "all")] == ["expired"]
    assert event_types(db, run_id)[-1] == "run.finished"
    [row] = [
        r
        for r in audit_rows(db, tenant.id, "approval.expire")
        if r.detail["tool_call_id"] == "w" and r.target_id == pending(client, tenant.owner, run_id, "all")[0]["id"]
    ]
    assert (row.actor_kind, row.actor_id, row.target_kind, row.outcome) == (
        "system",
        None,
        "pending_approval",
        "success",
    )
    assert row.trace_id
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 409


def test_every_decision_is_audited_without_arguments_or_messages(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    script = [
        {
            "tool_calls": [
                write_memory(secret, "a"),
                write_memory(secret, "b"),
                write_memory(secret, "c"),
                write_memory(secret, "d"),
            ]
        }
    ]
    run_id = suspended_run(client, tenant, script)
    bad = decide(client, tenant.owner, run_id, {"tool_call_id": "a", "decision": "approve"})
    assert bad.status_code == 409
    response = decide(
        client,
        tenant.owner,
        run_id,
        {"tool_call_id": "a", "decision": "approve"},
        {"tool_call_id": "b", "decision": "edit", "args": {"file_path": MEMORY, "content": secret + "!"}},
        {"tool_call_id": "c", "decision": "reject", "message": secret},
        {"tool_call_id": "d", "decision": "respond", "message": secret},
    )
    assert response.status_code == 200
    rows = [r for r in audit_rows(db, tenant.id, "approval.decide") if r.detail.get("tool_call_id") in "abcd"]
    assert sum(r.outcome == "success" for r in rows) == 4, "one success row per decided approval"
    success = {r.detail["tool_call_id"]: r for r in rows if r.outcome == "success"}
    assert {k: v.detail["decision"] for k, v in success.items()} == {
        "a": "approve",
        "b": "edit",
        "c": "reject",
        "d": "respond",
    }
    assert all(r.detail["decided_by"] == str(tenant.owner.user_id) for r in success.values())
    assert success["b"].detail["args_changed"] is True
    assert all(r.target_kind == "pending_approval" and r.trace_id for r in rows)
    assert [r.outcome for r in rows if r.detail["tool_call_id"] == "a"] == ["error", "success"]
    with db.transaction() as session:
        from sqlalchemy import select

        from hango.kernel.models import AuditEvent

        everything = session.scalars(select(AuditEvent).where(AuditEvent.tenant_id == tenant.id)).all()
        dumped = json.dumps([[r.detail, r.target_id, r.action] for r in everything])
    assert secret not in dumped


def test_requests_and_decisions_are_logged_at_info_with_the_reviewer_trail(
    client: FlaskClient, tenant: TenantFixture, caplog: pytest.LogCaptureFixture
) -> None:
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory(call_id="w")]}])
    with caplog.at_level("INFO", logger="hango.services.approvals"):
        assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    [record] = [r for r in caplog.records if r.getMessage() == "approval decided"]
    assert record.levelname == "INFO"
    assert (record.run_id, record.tool, record.tool_call_id, record.decision, record.decided_by) == (  # type: ignore[attr-defined]
        run_id,
        "write_file",
        "w",
        "approve",
        str(tenant.owner.user_id),
    )
