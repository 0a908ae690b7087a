"""Bad input at every endpoint answers a problem+json 4xx, never a 500, and changes nothing."""

from __future__ import annotations

import io
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from hango.agent.messages import user_message
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.models import (
    Agent,
    ApiToken,
    File,
    Grant,
    McpServer,
    Membership,
    Message,
    PendingApproval,
    Run,
    Thread,
    User,
    Webhook,
)
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service
from hango.services import threads
from tests.integration.conftest import TenantFixture, create_agent

BAD_BODIES: list[tuple[str, str]] = [
    ("application/json", "{"),
    ("application/json", "[1, 2]"),
    ("application/json", '{"email": null, "role": null}'),
    ("application/json", '{"email": ["a"], "role": {"x": 1}}'),
    ("application/json", '{"email": "a@b.io", "role": "member", "extra": true}'),
    ("application/json", '{"email": "' + "a" * 400 + '@b.io", "role": "member"}'),
    ("application/json", '{"limit": 1e309}'),
    ("application/json", '"\\ud800"'),
    ("text/plain", "hello"),
    ("application/x-www-form-urlencoded", "email=a%40b.io&role=member"),
]
BAD_QUERIES = ["limit=-1", "limit=1000", "limit=", "cursor=%00", "cursor=eyJ4IjoxfQ", "unknown=1", "limit=1.5"]
BAD_IDS = ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00", "..", "1" * 300]


def _v1_routes(app: Flask) -> list[tuple[str, str]]:
    routes = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1/"):
            continue
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            routes.append((method, rule.rule))
    return routes


def _fill(rule: str, value: str) -> str:
    return re.sub(r"<(?:[a-z]+:)?[a-z_]+>", value, rule)


def _counts(db: Database) -> tuple[int, ...]:
    with db.transaction() as session:
        return tuple(
            session.scalar(select(func.count()).select_from(model)) or 0 for model in (User, Membership, ApiToken)
        )


def _assert_client_error(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.data[:300])
    assert response.mimetype == "application/problem+json"


def test_every_v1_route_answers_bad_input_with_a_client_error(
    app: Flask, client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    routes = _v1_routes(app)
    assert len(routes) >= 5
    before = _counts(db)
    for method, rule in routes:
        for ident in BAD_IDS if "<" in rule else []:
            _assert_client_error(client.open(_fill(rule, ident), method=method, headers=tenant.owner.headers))
        path = _fill(rule, str(tenant.owner.user_id))
        if method in ("POST", "PUT", "PATCH"):
            for content_type, body in BAD_BODIES:
                response = client.open(
                    path, method=method, data=body, content_type=content_type, headers=tenant.owner.headers
                )
                if response.status_code < 400:  # a route without a body ignores it; that is fine
                    continue
                _assert_client_error(response)
        if method == "GET":
            for query in BAD_QUERIES:
                _assert_client_error(client.open(f"{path}?{query}", method=method, headers=tenant.owner.headers))
    assert _counts(db)[:2] == before[:2], "a refused request created a user or membership"


@pytest.mark.parametrize("header", ["Bearer " + "x" * 10000, "Bearer \u00e9\u00e9", "Bearer a b c"])
def test_hostile_authorization_headers_are_401(client: FlaskClient, header: str) -> None:
    response = client.get("/v1/users", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.mimetype == "application/problem+json"


# Hostile bodies on every endpoint that reads one. Each endpoint names a body that is valid apart from one
# mistyped field, so a refusal is known to come from that field and not from something missing.
DEEP = 10_000
JSON_ENDPOINTS: dict[tuple[str, str], tuple[dict[str, Any], str, Any]] = {
    ("POST", "/v1/users"): ({"email": "deep@example.com", "role": "member"}, "role", ["member"]),
    ("POST", "/v1/agents"): (
        {"name": "deep", "model": {"provider": "scripted", "script": [{"text": "hi"}]}},
        "model.script[0].text",
        {"x": 1},
    ),
    ("PUT", "/v1/agents/{agent_id}"): (
        {"name": "deep", "model": {"provider": "scripted", "script": []}},
        "max_turns",
        "many",
    ),
    ("PUT", "/v1/agents/{agent_id}/files/{path}"): ({"content": "x"}, "content", 42),
    ("POST", "/v1/runs"): ({"agent_id": "{agent_id}", "input": "go"}, "input", ["go"]),
    ("POST", "/v1/runs/{run_id}/approvals"): (
        {"decisions": [{"tool_call_id": "call_1", "decision": "approve"}]},
        "decisions[0].decision",
        True,
    ),
    ("POST", "/v1/webhooks"): ({"url": "https://93.184.215.14/hook", "events": ["run.finished"]}, "events[0]", 7),
    ("PUT", "/v1/tenant"): ({"self_approval": True}, "self_approval", "yes"),
    ("POST", "/v1/grants"): ({"agent_id": "{agent_id}", "tool_name": "write_file", "ttl": "1h"}, "tool_name", 7),
    ("POST", "/v1/mcp-servers"): (
        {"name": "deep", "url": "https://93.184.215.14/mcp", "headers": {"X-Api-Key": "k"}},
        "headers.X-Api-Key",
        7,
    ),
    ("PUT", "/v1/mcp-servers/{name}"): ({"url": "https://93.184.215.14/mcp"}, "trusted", "yes"),
    ("POST", "/v1/threads"): ({"agent_id": "{agent_id}", "metadata": {"k": "v"}}, "metadata", ["k"]),
    ("PATCH", "/v1/threads/{thread_id}"): ({"metadata": {"k": "v"}}, "metadata", 7),
    ("POST", "/v1/threads/{thread_id}/runs"): ({"input": "go"}, "multitask_strategy", "later"),
    ("POST", "/v1/threads/{thread_id}/fork"): ({"up_to_seq": 1}, "up_to_seq", "one"),
}


@dataclass
class Targets:
    """Existing resources the endpoints name, and a snapshot of everything a refused request could change."""

    agent_id: str
    run_id: str
    thread_id: str
    tenant: TenantFixture

    def path(self, template: str) -> str:
        names = {"agent_id": self.agent_id, "run_id": self.run_id, "thread_id": self.thread_id}
        return template.format(**names, path="memories/deep.md", name="deep")

    def body(self, template: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(template).replace("{agent_id}", self.agent_id)
        loaded: dict[str, Any] = json.loads(text)
        return loaded


@pytest.fixture
def targets(client: FlaskClient, tenant: TenantFixture, settings: Settings, db: Database) -> Targets:
    agent_id = create_agent(client, tenant.owner, [])
    # Created on a queue no worker listens on: the run stays queued, so a worker the session started for other
    # tests cannot change the snapshot while a refused request is being checked.
    runtime = Runtime.build(settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}"), db=db)
    owner = Principal(tenant.id, tenant.owner.user_id, "owner")
    run = service.create_run(runtime, owner, uuid.UUID(agent_id), [user_message("go")])
    thread = threads.create_thread(runtime, owner, uuid.UUID(agent_id), {"k": "v"})
    return Targets(agent_id, str(run.id), str(thread.thread.id), tenant)


def _state(db: Database, tenant: TenantFixture) -> tuple[Any, ...]:
    """Every row a body endpoint of this tenant could write, except the audit trail (refusals are audited)."""
    with db.transaction() as session:
        counts = tuple(
            session.scalar(select(func.count()).select_from(model).where(model.tenant_id == tenant.id)) or 0
            for model in (Membership, ApiToken, Agent, Run, File, Message, Webhook, Grant, McpServer, Thread)
        )
        counts += (session.scalar(select(func.count()).select_from(User)) or 0,)
        agents = session.execute(
            select(Agent.id, Agent.updated_at, Agent.name).where(Agent.tenant_id == tenant.id).order_by(Agent.id)
        ).all()
        approvals = session.execute(
            select(PendingApproval.id, PendingApproval.state)
            .where(PendingApproval.tenant_id == tenant.id)
            .order_by(PendingApproval.id)
        )
        runs = session.execute(select(Run.id, Run.state).where(Run.tenant_id == tenant.id).order_by(Run.id)).all()
        thread_rows = session.execute(
            select(Thread.id, Thread.meta, Thread.run_seq).where(Thread.tenant_id == tenant.id).order_by(Thread.id)
        ).all()
        return counts, tuple(agents), tuple(approvals.all()), tuple(runs), tuple(thread_rows)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _hostile_bodies(valid: dict[str, Any], field: str, wrong: Any) -> list[tuple[str, bytes, str]]:
    """``(case, raw body, field the 400 must name)`` for one endpoint."""
    text = json.dumps(valid)
    inner = text[:-1] + ', "deep": ' + _deep(DEEP) + "}"
    return [
        ("deep top level", _deep(DEEP).encode(), "body"),
        ("deep object", ('{"a":' * DEEP + "1" + "}" * DEEP).encode(), "body"),
        ("deep inside a valid body", inner.encode(), "body"),
        ("unclosed deep", ("[" * DEEP).encode(), "body"),
        ("not UTF-8", text.replace('"', '"\xff', 1).encode("latin-1"), "body"),
        ("UTF-16", text.encode("utf-16"), "body"),
        ("NaN", (text[:-1] + ', "n": NaN}').encode(), "body"),
        ("out of float range", (text[:-1] + ', "n": 1e400}').encode(), "body"),
        ("integer of 5000 digits", (text[:-1] + ', "n": ' + "9" * 5000 + "}").encode(), "body"),
        ("NUL in a string", _set(valid, field, "a\u0000b"), field),
        ("lone surrogate", _set(valid, field, "\ud800"), field),
        ("mistyped", _set(valid, field, wrong), field),
    ]


def _set(body: dict[str, Any], field: str, value: Any) -> bytes:
    """``body`` with the value at a dotted, indexed path replaced (written with ``ensure_ascii``, so lone
    surrogates and NULs travel as ``\\u`` escapes, as a hostile client sends them)."""
    copy = json.loads(json.dumps(body))
    *parents, last = re.findall(r"[^.\[\]]+", field)
    node = copy
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(last) if last.isdigit() else last] = value
    return json.dumps(copy).encode()


def test_the_table_covers_every_endpoint_with_a_json_body(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").json
    with_body = {
        (method.upper(), path)
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if method != "parameters" and "application/json" in operation.get("requestBody", {}).get("content", {})
    }
    assert with_body == {(method, path) for method, path in JSON_ENDPOINTS}


@pytest.mark.parametrize(("method", "template"), list(JSON_ENDPOINTS))
def test_hostile_bodies_are_a_400_naming_the_field_and_change_nothing(
    client: FlaskClient, db: Database, targets: Targets, method: str, template: str
) -> None:
    valid, field, wrong = JSON_ENDPOINTS[(method, template)]
    path, headers = targets.path(template), targets.tenant.owner.headers
    before = _state(db, targets.tenant)
    for case, raw, named in _hostile_bodies(targets.body(valid), field, wrong):
        response = client.open(path, method=method, data=raw, content_type="application/json", headers=headers)
        assert response.status_code == 400, (case, response.status_code, response.data[:300])
        assert response.mimetype == "application/problem+json", case
        body = response.json
        assert body["type"] == "urn:hango:problem:validation", case
        assert named in [error["field"] for error in body["errors"]], (case, body)
    assert _state(db, targets.tenant) == before


@pytest.mark.parametrize(("method", "template"), list(JSON_ENDPOINTS))
def test_bodies_over_the_limit_are_a_413_with_or_without_a_length(
    client: FlaskClient, db: Database, targets: Targets, settings: Settings, method: str, template: str
) -> None:
    path, headers = targets.path(template), targets.tenant.owner.headers
    huge = b'{"pad": "' + b"x" * settings.max_body_bytes + b'"}'
    before = _state(db, targets.tenant)
    for chunked in (False, True):
        extra = {"Transfer-Encoding": "chunked"} if chunked else {}
        response = client.open(
            path,
            method=method,
            input_stream=io.BytesIO(huge) if chunked else None,
            data=None if chunked else huge,
            content_type="application/json",
            headers={**headers, **extra},
            environ_overrides={"wsgi.input_terminated": True} if chunked else None,
        )
        assert response.status_code == 413, (chunked, response.status_code, response.data[:300])
        assert response.mimetype == "application/problem+json"
        assert response.json["type"] == "urn:hango:problem:payload-too-large"
    assert _state(db, targets.tenant) == before


@pytest.mark.parametrize(("method", "template"), list(JSON_ENDPOINTS))
def test_bodies_of_another_type_are_a_415(client: FlaskClient, targets: Targets, method: str, template: str) -> None:
    valid = json.dumps(targets.body(JSON_ENDPOINTS[(method, template)][0]))
    for content_type in ("text/plain", "application/xml", "multipart/form-data; boundary=x"):
        response = client.open(
            targets.path(template),
            method=method,
            data=valid,
            content_type=content_type,
            headers=targets.tenant.owner.headers,
        )
        assert response.status_code == 415, (content_type, response.data[:300])
        assert response.mimetype == "application/problem+json"


def test_deep_values_where_configs_and_decisions_nest_are_refused(
    client: FlaskClient, db: Database, targets: Targets, settings: Settings
) -> None:
    deep = json.loads(_deep(settings.max_json_depth))  # legal on its own, one level too many inside a body
    config = {"name": "deep", "model": {"provider": "scripted", "script": []}}
    bodies = [
        {**config, "interrupt_on": {"write_file": {"when": {"content": {"equals": deep}}}}},
        {**config, "model": {"provider": "scripted", "script": [{"tool_calls": [{"name": "ls", "args": deep}]}]}},
        {**config, "subagents": [{"name": "s", "description": "d", "model": config["model"], "interrupt_on": deep}]},
    ]
    before = _state(db, targets.tenant)
    for body in bodies:
        response = client.post("/v1/agents", json=body, headers=targets.tenant.owner.headers)
        assert response.status_code == 400, response.data[:300]
        assert [error["field"] for error in response.json["errors"]] == ["body"]
    decision = {"decisions": [{"tool_call_id": "call_1", "decision": "edit", "args": {"content": deep}}]}
    response = client.post(f"/v1/runs/{targets.run_id}/approvals", json=decision, headers=targets.tenant.owner.headers)
    assert response.status_code == 400, response.data[:300]
    assert _state(db, targets.tenant) == before


@pytest.mark.parametrize("header", ["9" * 5000, "9223372036854775808", "\u00b2", "\u0661", "-1", "1e3", "x"])
def test_hostile_last_event_ids_are_a_400(client: FlaskClient, targets: Targets, header: str) -> None:
    headers = {**targets.tenant.owner.headers, "Last-Event-ID": header}
    response = client.get(f"/v1/runs/{targets.run_id}/events", headers=headers)
    assert response.status_code == 400, response.data[:300]
    assert [error["field"] for error in response.json["errors"]] == ["Last-Event-ID"]
    query = client.get(f"/v1/runs/{targets.run_id}/events", query_string={"after": header}, headers=headers)
    assert query.status_code == 400, query.data[:300]


ZERO_ID = "0" * 32


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("action=%00", "action"),
        ("target_kind=run%00", "target_kind"),
        ("target_id=%00", "target_id"),
        ("cursor=" + "[" * DEEP, "cursor"),
        ("cursor=" + "9" * 18 + "_" + ZERO_ID, "cursor"),  # microseconds past the year 9999
        ("cursor=%00_" + ZERO_ID, "cursor"),
        ("cursor=1_" + ZERO_ID + "_1", "cursor"),
        ("cursor=%FF%FE", "cursor"),
        ("cursor=%D9%A1_" + ZERO_ID, "cursor"),  # an Arabic-Indic digit: a digit to Python, not to the pattern
    ],
)
def test_hostile_query_values_are_a_400_naming_the_argument(
    client: FlaskClient, tenant: TenantFixture, query: str, field: str
) -> None:
    response = client.get(f"/v1/audit-events?{query}", headers=tenant.owner.headers)
    assert response.status_code == 400, response.data[:300]
    assert response.mimetype == "application/problem+json"
    assert [error["field"] for error in response.json["errors"]] == [field]


def test_a_cursor_naming_a_path_with_a_nul_is_a_400(client: FlaskClient, targets: Targets) -> None:
    cursor = "/memories/%00"  # a file list's cursor is the last path, and no path holds a NUL
    response = client.get(f"/v1/agents/{targets.agent_id}/files?cursor={cursor}", headers=targets.tenant.owner.headers)
    assert response.status_code == 400, response.data[:300]
    assert [error["field"] for error in response.json["errors"]] == ["cursor"]
