"""Webhooks end to end: a real receiver on 127.0.0.1, real workers, the API; signatures, retries, SSRF, reminders."""

from __future__ import annotations

import base64
import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.api import create_app
from hango.client import types as client_types
from hango.kernel.config import Settings
from hango.kernel.models import AuditEvent, Webhook, WebhookDelivery
from hango.platform.db import Database
from hango.platform.queue import DeliveryQueue
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run import transitions
from hango.services.webhooks import delivery
from hango.services.webhooks.signing import verify
from hango.store.runs import lock_run
from tests.integration.conftest import Person, TenantFixture, create_agent, patient, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, finished, pending, suspended_run, write_memory
from tests.support.processes import log_path, wait_until, worker, worker_log_name
from tests.support.receiver import Received, Receiver, receiving

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker_process")]
SCRIPT = [{"tool_calls": [write_memory(call_id="w")]}, {"text": "Done."}]


@pytest.fixture(scope="module")
def worker_process(settings: Settings) -> Iterator[Any]:
    """The session's worker for this module's tests, its beat sweeping deliveries at the test settings' half second
    (the session's sweeps at the product's five): retries and lost enqueues are sent by the sweep."""
    sweeping = patient(settings).replace(webhook_sweep_interval=settings.webhook_sweep_interval)
    with worker(sweeping, concurrency=2, beat=True, name="webhooks") as process:
        yield process


def create_webhook(client: FlaskClient, person: Person, url: str, events: list[str]) -> dict[str, Any]:
    """POST /v1/webhooks, expecting a 201."""
    response = client.post("/v1/webhooks", json={"url": url, "events": events}, headers=person.headers)
    assert response.status_code == 201, response.json
    body: dict[str, Any] = response.json
    return body


def deliveries(client: FlaskClient, person: Person, webhook_id: str) -> list[dict[str, Any]]:
    """A webhook's delivery log, newest first."""
    response = client.get(f"/v1/webhooks/{webhook_id}/deliveries", headers=person.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


def delivery_of(client: FlaskClient, person: Person, webhook_id: str, type_: str, state: str) -> dict[str, Any]:
    """Wait for the webhook's delivery of an event type to reach ``state``."""

    def reached() -> dict[str, Any] | None:
        found = [d for d in deliveries(client, person, webhook_id) if d["event_type"] == type_]
        return found[0] if found and found[0]["state"] == state else None

    result: dict[str, Any] = wait_until(reached, timeout=30)
    return result


def arrived(receiver: Receiver, type_: str, count: int = 1) -> list[Received]:
    """Wait until the receiver got ``count`` requests of an event type."""
    found: list[Received] = wait_until(
        lambda: receiver.of_type(type_)[:count] if len(receiver.of_type(type_)) >= count else None
    )
    return found


def verified(request: Received, secret: str) -> bool:
    """Whether a request carries a valid Standard Webhooks signature made with ``secret``."""
    headers = request.headers
    return verify(
        secret, headers["webhook-id"], int(headers["webhook-timestamp"]), request.body, headers["webhook-signature"]
    )


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def client_with(settings: Settings, db: Database, **changes: Any) -> FlaskClient:
    """A test client of an API built with other settings (on the same database)."""
    return create_app(settings.replace(**changes), db=db).test_client()


# Creation, the secret, validation.


def test_the_secret_is_shown_once_stored_encrypted_and_never_audited(
    client: FlaskClient, tenant: TenantFixture, db: Database, receiver: Receiver
) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["approval.requested", "approval.requested"])
    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert created["events"] == ["approval.requested"]
    assert created["active"] is True
    shown = client.get(f"/v1/webhooks/{created['id']}", headers=tenant.owner.headers).json
    assert "secret" not in shown
    assert shown["url"] == receiver.url
    listed = client.get("/v1/webhooks", headers=tenant.owner.headers).json
    assert [item["id"] for item in listed["items"]] == [created["id"]]
    assert "secret" not in listed["items"][0]
    with db.transaction() as session:
        stored = session.scalar(select(Webhook.secret).where(Webhook.id == uuid.UUID(created["id"])))
        audits = list(session.scalars(select(AuditEvent).where(AuditEvent.tenant_id == tenant.id)))
    assert stored is not None
    assert stored.startswith("fernet:")
    assert secret.removeprefix("whsec_") not in stored
    [audit] = [row for row in audits if row.action == "webhook.create"]
    assert audit.target_id == created["id"]
    assert audit.outcome == "success"
    assert secret.removeprefix("whsec_") not in str(audit.detail)
    assert receiver.url not in str(audit.detail)


PRIVATE = "resolves to a private, loopback, link-local or reserved address"
# Any IPv4 or IPv6 address written out: what a refusal must not tell the caller.
ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b|[0-9a-f]*:[0-9a-f:.]*:[0-9a-f.]*", re.IGNORECASE)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://93.184.215.14/hook", "https"),
        ("https://127.0.0.1/hook", PRIVATE),
        ("https://localhost/hook", PRIVATE),
        ("https://10.1.2.3/hook", PRIVATE),
        ("https://192.168.0.7/hook", PRIVATE),
        ("https://169.254.169.254/latest/meta-data", PRIVATE),
        ("https://[::1]/hook", PRIVATE),
        ("https://[fd00:ec2::254]/hook", PRIVATE),
        ("https://[::ffff:127.0.0.1]/hook", PRIVATE),
        ("https://0.0.0.0/hook", PRIVATE),
        ("https://224.0.0.1/hook", PRIVATE),
        ("ftp://93.184.215.14/hook", "https"),
        ("https://user:pw@93.184.215.14/hook", "credentials"),
        ("https:///hook", "host"),
        ("https://93.184.215.14/" + "x" * 3000, "longer"),
    ],
)
def test_a_url_that_could_reach_inside_is_refused_at_creation(
    settings: Settings, db: Database, tenant: TenantFixture, url: str, why: str
) -> None:
    strict = client_with(settings, db, webhook_allow_private_urls=False)
    response = strict.post("/v1/webhooks", json={"url": url, "events": ["run.finished"]}, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert response.content_type == "application/problem+json"
    [error] = response.json["errors"]
    assert error["field"] == "url"
    assert why in error["message"]
    assert not ADDRESS.search(response.json["detail"]), response.json
    assert not ADDRESS.search(error["message"]), error


def test_a_refused_name_says_only_what_kind_of_address_it_resolves_to_and_the_log_says_which(
    settings: Settings, db: Database, tenant: TenantFixture, caplog: pytest.LogCaptureFixture
) -> None:
    strict = client_with(settings, db, webhook_allow_private_urls=False)
    body = {"url": "https://localhost:8443/hook?token=s3cret", "events": ["run.finished"]}
    with caplog.at_level(logging.WARNING, logger="hango.services.webhooks"):
        response = strict.post("/v1/webhooks", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert response.json["detail"] == f"url: {PRIVATE}"
    assert response.json["errors"] == [{"field": "url", "message": PRIVATE}]
    [line] = [record for record in caplog.records if record.getMessage() == "webhook URL refused"]
    assert line.levelno == logging.WARNING
    assert vars(line)["address"] in ("127.0.0.1", "::1")
    assert (vars(line)["host"], vars(line)["tenant_id"]) == ("localhost", str(tenant.id))
    assert "s3cret" not in str(vars(line))


def test_a_public_https_url_is_accepted_and_plain_http_only_goes_to_private_addresses(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    strict = client_with(settings, db, webhook_allow_private_urls=False)
    body = {"url": "https://93.184.215.14/hook", "events": ["run.finished"]}
    assert strict.post("/v1/webhooks", json=body, headers=tenant.owner.headers).status_code == 201
    # Allowed private addresses do not make plain http to a public one acceptable.
    lenient = client_with(settings, db, webhook_allow_private_urls=True)
    body = {"url": "http://93.184.215.14/hook", "events": ["run.finished"]}
    response = lenient.post("/v1/webhooks", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400
    assert response.json["errors"][0]["field"] == "url"


def test_the_api_document_and_the_client_offer_the_same_event_types(client: FlaskClient) -> None:
    schema = client.get("/openapi.json").json["components"]["schemas"]["WebhookCreate"]
    offered = schema["properties"]["events"]["items"]["enum"]
    assert offered == list(get_args(client_types.WebhookEventType))
    assert {"approval.cancelled", "approval.escalated"} <= set(offered)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://93.184.215.14/", "events": ["approval.granted"]}, "events[0]"),
        ({"url": "https://93.184.215.14/", "events": []}, "events"),
        ({"url": "https://93.184.215.14/"}, "events"),
        ({"events": ["run.finished"]}, "url"),
        ({"url": "https://93.184.215.14/", "events": ["run.finished"], "secret": "mine"}, "secret"),
        ({"url": 7, "events": ["run.finished"]}, "url"),
    ],
)
def test_a_malformed_body_is_a_400_naming_the_field(
    client: FlaskClient, tenant: TenantFixture, body: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/webhooks", json=body, headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert field in [error["field"] for error in response.json["errors"]]


def test_a_tenant_has_at_most_the_configured_number_of_webhooks(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    limited = client_with(settings, db, max_webhooks_per_tenant=2)
    body = {"url": "https://93.184.215.14/", "events": ["run.finished"]}
    assert [limited.post("/v1/webhooks", json=body, headers=tenant.owner.headers).status_code for _ in range(3)] == [
        201,
        201,
        409,
    ]


# Roles and tenants.


def test_members_are_refused_and_another_tenants_webhook_is_not_found(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any, db: Database
) -> None:
    created = create_webhook(client, tenant.owner, "https://93.184.215.14/", ["run.finished"])
    hook = f"/v1/webhooks/{created['id']}"
    member = tenant.add("member")
    body = {"url": "https://93.184.215.14/", "events": ["run.finished"]}
    assert client.post("/v1/webhooks", json=body, headers=member.headers).status_code == 403
    assert client.get("/v1/webhooks", headers=member.headers).status_code == 403
    assert client.get(hook, headers=member.headers).status_code == 403
    assert client.delete(hook, headers=member.headers).status_code == 403
    admin = tenant.add("admin")
    assert client.get(hook, headers=admin.headers).status_code == 200
    other = make_tenant("other")
    assert client.get("/v1/webhooks", headers=other.owner.headers).json["items"] == []
    for path in (hook, f"{hook}/deliveries"):
        assert client.get(path, headers=other.owner.headers).status_code == 404
    assert client.delete(hook, headers=other.owner.headers).status_code == 404
    assert client.post(f"{hook}/deliveries/{uuid.uuid4()}/retry", headers=other.owner.headers).status_code == 404
    assert client.delete(hook, headers=admin.headers).status_code == 204
    assert client.get(hook, headers=tenant.owner.headers).status_code == 404
    with db.transaction() as session:
        actions = session.scalars(select(AuditEvent.action).where(AuditEvent.target_id == created["id"]))
        assert {"webhook.create", "webhook.delete"} <= set(actions)


# Delivery.


def test_deliveries_are_signed_with_the_secret_and_carry_the_approval_the_run_and_links(
    client: FlaskClient, tenant: TenantFixture, receiver: Receiver
) -> None:
    events = ["approval.requested", "approval.decided", "run.finished"]
    created = create_webhook(client, tenant.owner, receiver.url, events)
    run_id = suspended_run(client, tenant, SCRIPT)
    [approval] = pending(client, tenant.owner, run_id)
    [requested] = arrived(receiver, "approval.requested")
    assert verified(requested, created["secret"])
    assert not verified(requested, "whsec_" + base64.b64encode(b"x" * 32).decode())
    assert requested.headers["content-type"] == "application/json"
    assert abs(int(requested.headers["webhook-timestamp"]) - time.time()) < 300
    body = requested.json
    assert set(body) == {"type", "timestamp", "data"}
    data = body["data"]
    assert {k: data[k] for k in ("id", "run_id", "state", "tool_name")} == {
        "id": approval["id"],
        "run_id": run_id,
        "state": "pending",
        "tool_name": "write_file",
    }
    assert data["links"] == {
        "inbox": f"https://hango.example/inbox/approvals/{approval['id']}",
        "run": f"https://hango.example/v1/runs/{run_id}",
    }
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    assert finished(client, tenant.owner, run_id)["state"] == "succeeded"
    [decided] = arrived(receiver, "approval.decided")
    assert verified(decided, created["secret"])
    assert decided.json["data"]["decision"] == "approve"
    [ended] = arrived(receiver, "run.finished")
    assert verified(ended, created["secret"])
    assert (ended.json["data"]["id"], ended.json["data"]["state"]) == (run_id, "succeeded")
    assert len({r.headers["webhook-id"] for r in (requested, decided, ended)}) == 3


def test_cancelling_a_waiting_run_sends_approval_cancelled_once_per_pending_approval(
    client: FlaskClient, tenant: TenantFixture, receiver: Receiver
) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["approval.cancelled"])
    run_id = suspended_run(client, tenant, [{"tool_calls": [write_memory("a", "w1"), write_memory("b", "w2")]}])
    approvals = {item["id"]: item for item in pending(client, tenant.owner, run_id)}
    assert len(approvals) == 2
    cancelled = client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers)
    assert cancelled.status_code == 200, cancelled.json
    received = arrived(receiver, "approval.cancelled", 2)
    assert all(verified(request, created["secret"]) for request in received)
    assert len({request.headers["webhook-id"] for request in received}) == 2
    items = {request.json["data"]["id"]: request.json["data"] for request in received}
    assert set(items) == set(approvals)
    for approval_id, item in items.items():
        assert {k: item[k] for k in ("run_id", "tool_call_id", "state")} == {
            "run_id": run_id,
            "tool_call_id": approvals[approval_id]["tool_call_id"],
            "state": "cancelled",
        }
        assert item["links"] == {
            "inbox": f"https://hango.example/inbox/approvals/{approval_id}",
            "run": f"https://hango.example/v1/runs/{run_id}",
        }
    # Once each, and nothing this webhook did not ask for (the run's run.finished, say).
    logged = deliveries(client, tenant.owner, created["id"])
    assert sorted(d["event_type"] for d in logged) == ["approval.cancelled", "approval.cancelled"]


def test_a_named_host_is_reached_at_its_checked_address_with_its_name_as_host(
    client: FlaskClient, tenant: TenantFixture, receiver: Receiver
) -> None:
    created = create_webhook(client, tenant.owner, f"http://localhost:{receiver.port}/named", ["approval.requested"])
    suspended_run(client, tenant, SCRIPT)
    [request] = arrived(receiver, "approval.requested")
    assert request.path == "/named"
    assert request.headers["host"] == f"localhost:{receiver.port}"
    assert verified(request, created["secret"])


def test_a_failed_attempt_is_retried_with_the_same_webhook_id(client: FlaskClient, tenant: TenantFixture) -> None:
    with receiving(statuses=[500, 200]) as receiver:
        created = create_webhook(client, tenant.owner, receiver.url, ["approval.requested"])
        suspended_run(client, tenant, SCRIPT)
        first, second = arrived(receiver, "approval.requested", 2)
        delivered = delivery_of(client, tenant.owner, created["id"], "approval.requested", "delivered")
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == delivered["event_id"]
    assert verified(first, created["secret"])
    assert verified(second, created["secret"])
    assert (delivered["attempts"], delivered["last_status_code"], delivered["last_error"]) == (2, 200, None)
    assert delivered["delivered_at"] is not None
    assert delivered["next_attempt_at"] is None


def test_a_delivery_whose_enqueue_was_lost_is_sent_by_beat(
    client: FlaskClient,
    settings: Settings,
    db: Database,
    tenant: TenantFixture,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["approval.decided"])
    run_id = suspended_run(client, tenant, SCRIPT)
    lost: list[uuid.UUID] = []
    # The broker drops this process's delivery messages; the worker's beat (a process of its own) still sweeps.
    monkeypatch.setattr(DeliveryQueue, "enqueue", lambda _queue, delivery_id: lost.append(delivery_id))
    forgetful = client_with(settings, db, webhook_requeue_after=timedelta(seconds=0.5))
    assert decide(forgetful, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    delivered = delivery_of(client, tenant.owner, created["id"], "approval.decided", "delivered")
    assert [str(delivery_id) for delivery_id in lost] == [delivered["id"]]
    assert delivered["attempts"] == 1


def test_a_slow_receiver_does_not_hold_up_the_decision(client: FlaskClient, tenant: TenantFixture) -> None:
    with receiving(hold={"approval.decided"}) as receiver:
        created = create_webhook(client, tenant.owner, receiver.url, ["approval.decided"])
        run_id = suspended_run(client, tenant, SCRIPT)
        response = decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"})
        # The receiver answers nothing until the decision has returned: a decision waiting on it would have
        # returned only after its attempt timed out, and that attempt would count as failed.
        assert response.status_code == 200
        assert receiver.answered == []
        arrived(receiver, "approval.decided")
        receiver.release.set()
        delivered = delivery_of(client, tenant.owner, created["id"], "approval.decided", "delivered")
    assert (delivered["attempts"], delivered["last_status_code"]) == (1, 200)


def test_the_delivery_log_and_a_manual_retry(client: FlaskClient, tenant: TenantFixture, receiver: Receiver) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["approval.requested", "approval.decided"])
    run_id = suspended_run(client, tenant, SCRIPT)
    first = delivery_of(client, tenant.owner, created["id"], "approval.requested", "delivered")
    assert decide(client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
    delivery_of(client, tenant.owner, created["id"], "approval.decided", "delivered")
    log = deliveries(client, tenant.owner, created["id"])
    assert [d["event_type"] for d in log] == ["approval.decided", "approval.requested"]  # newest first
    assert set(log[0]) == {
        "id",
        "event_id",
        "event_type",
        "attempts",
        "state",
        "last_status_code",
        "last_error",
        "next_attempt_at",
        "created_at",
        "delivered_at",
    }
    page = client.get(f"/v1/webhooks/{created['id']}/deliveries?limit=1", headers=tenant.owner.headers).json
    assert len(page["items"]) == 1
    assert page["next_cursor"] is not None
    path = f"/v1/webhooks/{created['id']}/deliveries/{first['id']}/retry"
    response = client.post(path, headers=tenant.owner.headers)
    assert response.status_code == 202, response.json
    again = arrived(receiver, "approval.requested", 2)
    assert again[0].headers["webhook-id"] == again[1].headers["webhook-id"] == first["event_id"]
    wait_until(lambda: deliveries(client, tenant.owner, created["id"])[1]["attempts"] == 2)
    assert (
        client.post(
            f"/v1/webhooks/{created['id']}/deliveries/{uuid.uuid4()}/retry", headers=tenant.owner.headers
        ).status_code
        == 404
    )
    member = tenant.add("member")
    assert client.post(path, headers=member.headers).status_code == 403


def test_a_webhook_failing_for_its_whole_window_is_deactivated(
    client: FlaskClient, settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    short = client_with(settings, db, webhook_retry_for=timedelta(seconds=1.5))
    with receiving(statuses=[503]) as receiver:
        created = create_webhook(client, tenant.owner, receiver.url, ["approval.decided"])
        run_id = suspended_run(client, tenant, SCRIPT)
        assert decide(short, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
        failed = delivery_of(client, tenant.owner, created["id"], "approval.decided", "failed")
        attempts = len(receiver.of_type("approval.decided"))
    assert failed["attempts"] >= 2
    assert failed["attempts"] == attempts
    assert (failed["last_status_code"], failed["last_error"]) == (503, "HTTP 503")
    assert client.get(f"/v1/webhooks/{created['id']}", headers=tenant.owner.headers).json["active"] is False


def test_at_delivery_a_name_resolving_to_loopback_is_refused_when_private_urls_are_not_allowed(
    client: FlaskClient, settings: Settings, db: Database, tenant: TenantFixture, receiver: Receiver
) -> None:
    # Created while private URLs were allowed; delivered by a worker where they are not.
    url = f"http://localhost:{receiver.port}/hook"
    created = create_webhook(client, tenant.owner, url, ["approval.decided"])
    run_id = suspended_run(client, tenant, SCRIPT)
    strict = settings.replace(
        webhook_allow_private_urls=False,
        webhook_retry_for=timedelta(seconds=0.1),
        queue=f"{settings.queue}-strict",
        requeue_after=timedelta(seconds=600),
        reconcile_interval=timedelta(seconds=600),
    )
    with worker(strict, concurrency=1, beat=False, name="webhooks-strict"):
        strict_client = create_app(strict, db=db).test_client()
        assert (
            decide(strict_client, tenant.owner, run_id, {"tool_call_id": "w", "decision": "approve"}).status_code == 200
        )
        failed = delivery_of(client, tenant.owner, created["id"], "approval.decided", "failed")
        wait_for_state(client, tenant.owner, run_id, {"succeeded"})
    assert failed["last_status_code"] is None
    assert failed["last_error"] == f"refused: the URL {PRIVATE}"
    assert receiver.received == []
    # The address the name resolved to is in the worker's log, with the ids to find the delivery by.
    log = log_path(worker_log_name(strict, "webhooks-strict")).read_text(errors="replace").splitlines()
    [line] = [json.loads(text) for text in log if "webhook URL refused" in text and created["id"] in text]
    assert line["address"] in ("127.0.0.1", "::1")
    assert (line["tenant_id"], line["delivery_id"], line["host"]) == (str(tenant.id), failed["id"], "localhost")


def test_a_reminder_is_sent_once_before_expiry_and_the_expiry_is_delivered(
    settings: Settings, db: Database, tenant: TenantFixture, receiver: Receiver
) -> None:
    timed = settings.replace(
        approval_ttl=timedelta(seconds=4),
        approval_remind_before=timedelta(seconds=3),
        approval_sweep_interval=timedelta(seconds=0.5),
        webhook_sweep_interval=timedelta(seconds=0.3),
        queue=f"{settings.queue}-timed",
        requeue_after=timedelta(seconds=600),
        reconcile_interval=timedelta(seconds=600),
    )
    client = create_app(timed, db=db).test_client()
    created = create_webhook(client, tenant.owner, receiver.url, ["approval.reminder", "approval.expired"])
    with worker(timed, concurrency=1, beat=True, name="webhooks-timed"):
        agent_id = create_agent(client, tenant.owner, SCRIPT)
        run_id = start_run(client, tenant.owner, agent_id)
        [reminder] = arrived(receiver, "approval.reminder")
        [expired] = arrived(receiver, "approval.expired")
        assert wait_for_state(client, tenant.owner, run_id, {"failed"})["error"] == "approval expired"
    # About ten sweeps ran between the reminder and the expiry.
    assert [r.type for r in receiver.received].count("approval.reminder") == 1
    assert verified(reminder, created["secret"])
    assert verified(expired, created["secret"])
    assert reminder.json["data"]["state"] == "pending"
    assert reminder.json["data"]["run_id"] == run_id
    assert expired.json["data"]["state"] == "expired"
    assert expired.json["data"]["id"] == reminder.json["data"]["id"]
    assert reminder.headers["webhook-id"] != expired.headers["webhook-id"]


def test_a_rolled_back_change_sends_nothing_and_a_committed_one_is_delivered(
    client: FlaskClient, settings: Settings, db: Database, tenant: TenantFixture, receiver: Receiver
) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["run.finished"])
    run_id = suspended_run(client, tenant, SCRIPT)
    runtime = Runtime.build(settings, db=db)

    def cancel_then_fail() -> None:
        with unit_of_work(runtime) as work:
            run = lock_run(work.session, uuid.UUID(run_id))
            assert run is not None
            transitions.cancel(work, run)
            work.write_events()  # the outbox rows are written: then the transaction fails
            raise RuntimeError("the commit failed")

    with pytest.raises(RuntimeError, match="the commit failed"):
        cancel_then_fail()
    assert deliveries(client, tenant.owner, created["id"]) == []
    assert client.post(f"/v1/runs/{run_id}/cancel", headers=tenant.owner.headers).status_code == 200
    [ended] = arrived(receiver, "run.finished")
    assert (ended.json["data"]["id"], ended.json["data"]["state"]) == (run_id, "cancelled")
    assert [d["event_type"] for d in deliveries(client, tenant.owner, created["id"])] == ["run.finished"]


def test_the_sweep_forgets_finished_deliveries_past_their_retention_and_keeps_the_rest(
    client: FlaskClient, settings: Settings, db: Database, tenant: TenantFixture, receiver: Receiver
) -> None:
    created = create_webhook(client, tenant.owner, receiver.url, ["run.finished"])
    now = datetime.now(UTC)
    old, recent = now - timedelta(days=31), now - timedelta(days=29)
    ages = {"old delivered": (old, "delivered"), "old failed": (old, "failed"), "old pending": (old, "pending")}
    ages |= {"recent delivered": (recent, "delivered")}
    rows = {name: uuid.uuid4() for name in ages}
    with db.transaction() as session:
        for name, (created_at, state) in ages.items():
            session.add(
                WebhookDelivery(
                    id=rows[name],
                    tenant_id=tenant.id,
                    webhook_id=uuid.UUID(created["id"]),
                    event_id=uuid.uuid4(),
                    event_type="run.finished",
                    payload={"type": "run.finished"},
                    state=state,
                    attempts=1,
                    next_attempt_at=now + timedelta(days=1),  # the pending one is not due: nothing sends it
                    retry_until=now + timedelta(days=1),
                    created_at=created_at,
                )
            )
    kept = settings.replace(webhook_deliveries_retention=timedelta(days=30))
    # The module worker's beat sweeps with the same 30-day default and may prune them first: the rows left are the
    # property, whichever sweep got there.
    assert delivery.sweep(Runtime.build(kept, db=db)).pruned <= 2
    left = {item["id"] for item in deliveries(client, tenant.owner, created["id"])}
    assert left == {str(rows["old pending"]), str(rows["recent delivered"])}
