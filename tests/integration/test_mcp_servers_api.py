"""``/v1/mcp-servers``: a tenant's MCP servers through the real API on the test database, and their tools listed from
a real streamable HTTP server; who may change them, what never comes back (headers), the SSRF rules, the names, the
quota, the audit trail, and the 502 of a server that does not answer."""

from __future__ import annotations

import json
import logging
import socket
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import select

from hango.agent.mcp import definition_sha256
from hango.api import create_app
from hango.api.context import Services
from hango.kernel.config import Settings
from hango.kernel.models import AuditEvent, McpServer
from hango.kernel.secret_box import SecretBox
from hango.mcp.config import ServerSpec
from hango.platform.db import Database
from hango.store import mcp_servers as store
from tests.integration.conftest import Person, TenantFixture, create_agent
from tests.support.mcp_keyed import TOOL_NAMES, KeyedServer, keyed_mcp_server

KEY = f"sk-test-{uuid.uuid4().hex}"
WRONG_KEY = f"sk-wrong-{uuid.uuid4().hex}"
OPERATOR_SECRET = f"op-secret-{uuid.uuid4().hex}"
PUBLIC_URL = "https://93.184.215.14/mcp"  # a public address: no name to resolve, nothing is sent to it here


def _app(settings: Settings, db: Database, **changes: Any) -> Flask:
    return create_app(settings.replace(**changes), db=db)


def _close(app: Flask) -> None:
    services: Services = app.extensions["hango"]
    services.runtime.mcp.close()


@pytest.fixture(scope="module")
def operator_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An operator's file with a stdio server and an HTTP one, each holding a secret (never started here)."""
    path = tmp_path_factory.mktemp("mcp") / "mcp.json"
    servers = {
        "git": {
            "command": "/bin/false",
            "args": ["--token", OPERATOR_SECRET],
            "env": {"GIT_TOKEN": OPERATOR_SECRET},
            "description": "The team's repositories.",
        },
        "search": {
            "url": f"https://search.example/mcp?key={OPERATOR_SECRET}",
            "headers": {"Authorization": f"Bearer {OPERATOR_SECRET}"},
        },
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@pytest.fixture(scope="module")
def lenient_app(settings: Settings, db: Database, operator_config: Path) -> Iterator[Flask]:
    """The API allowing private URLs (the test servers listen on 127.0.0.1), with the operator's servers."""
    app = _app(settings, db, mcp_allow_private_urls=True, mcp_config=str(operator_config))
    yield app
    _close(app)


@pytest.fixture
def api(lenient_app: Flask) -> FlaskClient:
    return lenient_app.test_client()


@pytest.fixture(scope="module")
def docs() -> Iterator[KeyedServer]:
    with keyed_mcp_server(KEY) as served:
        yield served


def _name() -> str:
    return f"docs-{uuid.uuid4().hex[:8]}"


def _add(api: FlaskClient, person: Person, **body: Any) -> dict[str, Any]:
    response = api.post("/v1/mcp-servers", json=body, headers=person.headers)
    assert response.status_code == 201, response.json
    created: dict[str, Any] = response.json
    return created


def _stored(db: Database, tenant: TenantFixture, name: str) -> McpServer | None:
    with db.transaction() as session:
        return store.find(session, tenant.id, name)


def _opened_headers(db: Database, settings: Settings, tenant: TenantFixture, name: str) -> dict[str, str]:
    row = _stored(db, tenant, name)
    assert row is not None
    return store.open_headers(SecretBox(settings.webhook_secret_keys), row.headers)


def _audit(db: Database, tenant: TenantFixture) -> list[AuditEvent]:
    with db.transaction() as session:
        statement = select(AuditEvent).where(AuditEvent.tenant_id == tenant.id, AuditEvent.action.like("mcp_server.%"))
        return list(session.scalars(statement.order_by(AuditEvent.created_at)))


def _everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every record this process logged, message and extra fields alike."""
    return "\n".join(f"{record.getMessage()} {vars(record)}" for record in caplog.records)


# Headers: written only.


def test_headers_never_come_back_in_a_response_an_audit_row_or_a_log(
    api: FlaskClient,
    tenant: TenantFixture,
    db: Database,
    settings: Settings,
    docs: KeyedServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    name = _name()
    headers = tenant.owner.headers
    answers = [
        api.post(
            "/v1/mcp-servers", json={"name": name, "url": docs.url, "headers": {"X-Api-Key": KEY}}, headers=headers
        )
    ]
    answers.append(api.get(f"/v1/mcp-servers/{name}", headers=headers))
    answers.append(api.get("/v1/mcp-servers", headers=headers))
    answers.append(api.get(f"/v1/mcp-servers/{name}/tools", headers=headers))
    answers.append(
        api.put(f"/v1/mcp-servers/{name}", json={"url": docs.url, "headers": {"X-Api-Key": WRONG_KEY}}, headers=headers)
    )
    answers.append(api.get(f"/v1/mcp-servers/{name}/tools", headers=headers))  # refused by the server: a 502
    answers.append(
        api.put(f"/v1/mcp-servers/{name}", json={"url": docs.url, "headers": {"X-Api-Key": KEY}}, headers=headers)
    )
    answers.append(api.delete(f"/v1/mcp-servers/{name}", headers=headers))
    assert [answer.status_code for answer in answers] == [201, 200, 200, 200, 200, 502, 200, 204]
    for answer in answers:
        assert KEY not in answer.get_data(as_text=True)
        assert WRONG_KEY not in answer.get_data(as_text=True)
        assert "X-Api-Key" not in answer.get_data(as_text=True)
    rows = _audit(db, tenant)
    assert [row.action for row in rows] == [
        "mcp_server.create",
        "mcp_server.update",
        "mcp_server.update",
        "mcp_server.delete",
    ]
    assert {row.target_id for row in rows} == {name}
    assert all(row.outcome == "success" and row.detail["host"] == "127.0.0.1" for row in rows)
    assert KEY not in json.dumps([row.detail for row in rows])
    assert WRONG_KEY not in json.dumps([row.detail for row in rows])
    assert KEY not in _everything_logged(caplog)
    assert WRONG_KEY not in _everything_logged(caplog)
    assert docs.keys_seen.count(KEY) > 0  # the key did travel, to the server only


def test_headers_are_sealed_at_rest_kept_by_a_put_without_them_and_replaced_by_one_with_them(
    api: FlaskClient, tenant: TenantFixture, db: Database, settings: Settings, docs: KeyedServer
) -> None:
    name = _name()
    _add(api, tenant.owner, name=name, url=docs.url, headers={"X-Api-Key": KEY})
    row = _stored(db, tenant, name)
    assert row is not None
    assert row.headers.startswith("fernet:")
    assert KEY not in row.headers
    tools = api.get(f"/v1/mcp-servers/{name}/tools", headers=tenant.owner.headers)
    assert tools.status_code == 200, tools.json

    kept = api.put(
        f"/v1/mcp-servers/{name}", json={"url": docs.url, "description": "kept"}, headers=tenant.owner.headers
    )
    assert kept.status_code == 200, kept.json
    assert kept.json["description"] == "kept"
    assert _opened_headers(db, settings, tenant, name) == {"X-Api-Key": KEY}
    assert api.get(f"/v1/mcp-servers/{name}/tools", headers=tenant.owner.headers).status_code == 200

    body = {"url": docs.url, "headers": {"X-Other": "1"}}
    replaced = api.put(f"/v1/mcp-servers/{name}", json=body, headers=tenant.owner.headers)
    assert replaced.status_code == 200, replaced.json
    assert _opened_headers(db, settings, tenant, name) == {"X-Other": "1"}
    refused = api.get(f"/v1/mcp-servers/{name}/tools", headers=tenant.owner.headers)
    assert refused.status_code == 502  # the server wants its key, which the new headers no longer give
    [update, replace] = [row for row in _audit(db, tenant) if row.action == "mcp_server.update"]
    assert (update.detail["headers_replaced"], replace.detail["headers_replaced"]) == (False, True)


# Who may do what.


def test_a_member_reads_servers_and_tools_but_cannot_add_change_or_delete_them(
    api: FlaskClient, tenant: TenantFixture, db: Database, docs: KeyedServer
) -> None:
    member, admin = tenant.add("member"), tenant.add("admin")
    name = _name()
    _add(api, admin, name=name, url=docs.url, headers={"X-Api-Key": KEY})
    body = {"name": _name(), "url": docs.url}
    assert api.post("/v1/mcp-servers", json=body, headers=member.headers).status_code == 403
    assert api.put(f"/v1/mcp-servers/{name}", json={"url": PUBLIC_URL}, headers=member.headers).status_code == 403
    assert api.delete(f"/v1/mcp-servers/{name}", headers=member.headers).status_code == 403
    assert api.get(f"/v1/mcp-servers/{name}", headers=member.headers).json["url"] == docs.url
    assert name in [item["name"] for item in api.get("/v1/mcp-servers", headers=member.headers).json["items"]]
    tools = api.get(f"/v1/mcp-servers/{name}/tools", headers=member.headers)
    assert tools.status_code == 200, tools.json
    assert _stored(db, tenant, body["name"]) is None
    denied = [row for row in _audit(db, tenant) if row.outcome == "denied"]
    assert sorted(row.action for row in denied) == ["mcp_server.create", "mcp_server.delete", "mcp_server.update"]


def test_another_tenant_sees_nothing_of_a_server_and_may_use_its_name(
    api: FlaskClient, make_tenant: Any, db: Database, docs: KeyedServer
) -> None:
    ours, theirs = make_tenant("ours"), make_tenant("theirs")
    name = _name()
    _add(api, ours.owner, name=name, url=docs.url, headers={"X-Api-Key": KEY})
    stranger = theirs.owner.headers
    assert api.get(f"/v1/mcp-servers/{name}", headers=stranger).status_code == 404
    assert api.get(f"/v1/mcp-servers/{name}/tools", headers=stranger).status_code == 404
    assert api.put(f"/v1/mcp-servers/{name}", json={"url": PUBLIC_URL}, headers=stranger).status_code == 404
    assert api.delete(f"/v1/mcp-servers/{name}", headers=stranger).status_code == 404
    listed = api.get("/v1/mcp-servers", headers=stranger).json["items"]
    assert [item["scope"] for item in listed] == ["operator", "operator"]
    row = _stored(db, ours, name)
    assert row is not None
    assert row.url == docs.url
    # Names are unique per tenant only.
    assert _add(api, theirs.owner, name=name, url=PUBLIC_URL)["url"] == PUBLIC_URL


# The SSRF rules.


def test_loopback_and_private_urls_are_refused_unless_allowed(
    settings: Settings, db: Database, api: FlaskClient, tenant: TenantFixture, docs: KeyedServer
) -> None:
    strict = _app(settings, db, mcp_allow_private_urls=False)
    try:
        client = strict.test_client()
        name = _name()
        for url in (
            docs.url,
            "https://127.0.0.1/mcp",
            "https://10.1.2.3/mcp",
            "https://[::1]/mcp",
            "http://169.254.169.254/",
        ):
            refused = client.post("/v1/mcp-servers", json={"name": name, "url": url}, headers=tenant.owner.headers)
            assert refused.status_code == 400, (url, refused.json)
            assert [error["field"] for error in refused.json["errors"]] == ["url"]
        assert _stored(db, tenant, name) is None
        _add(api, tenant.owner, name=name, url=docs.url)  # allowed where HANGO_MCP_ALLOW_PRIVATE_URLS is on
        moved = client.put(
            f"/v1/mcp-servers/{name}", json={"url": "https://10.1.2.3/mcp"}, headers=tenant.owner.headers
        )
        assert moved.status_code == 400
        row = _stored(db, tenant, name)
        assert row is not None
        assert row.url == docs.url
    finally:
        _close(strict)


# Bad bodies.

BAD_BODIES: list[tuple[dict[str, Any], str]] = [
    ({"name": "Docs"}, "name"),
    ({"name": "my_docs"}, "name"),
    ({"name": "x" * 33}, "name"),
    ({"url": None}, "url"),
    ({"url": "ftp://example.com/mcp"}, "url"),
    ({"url": "https://user:pw@93.184.215.14/mcp"}, "url"),
    ({"headers": {"X-Api-Key": 5}}, "headers.X-Api-Key"),
    ({"headers": {"X-Api-Key": "a\r\nX-Injected: 1"}}, "headers.X-Api-Key"),
    ({"headers": {"X-Api-Key": "é"}}, "headers.X-Api-Key"),
    ({"headers": {"X-Api-Key": "k" * 8193}}, "headers.X-Api-Key"),
    ({"headers": {"Bad Name": "v"}}, "headers.Bad Name"),
    ({"headers": {"Host": "internal.example"}}, "headers.Host"),
    ({"headers": {"Mcp-Session-Id": "s"}}, "headers.Mcp-Session-Id"),
    ({"headers": {"Proxy-Authorization": "p"}}, "headers.Proxy-Authorization"),
    ({"headers": {"X-Api-Key": "a", "x-api-key": "b"}}, "headers.x-api-key"),
    ({"headers": {f"X-{index}": "v" for index in range(33)}}, "headers"),
    ({"headers": ["X-Api-Key: k"]}, "headers"),
    ({"trusted": "yes"}, "trusted"),
    ({"trusted": 1}, "trusted"),
    ({"description": "d" * 1001}, "description"),
    ({"extra": True}, "extra"),
]


@pytest.mark.parametrize(("change", "field"), BAD_BODIES)
def test_a_bad_body_is_a_400_naming_the_field_and_writes_nothing(
    api: FlaskClient, tenant: TenantFixture, db: Database, change: dict[str, Any], field: str
) -> None:
    name = _name()
    body = {"name": name, "url": PUBLIC_URL, "headers": {"X-Api-Key": KEY}, **change}
    created = api.post("/v1/mcp-servers", json=body, headers=tenant.owner.headers)
    assert created.status_code == 400, created.json
    assert created.json["type"] == "urn:hango:problem:validation"
    assert field in [error["field"] for error in created.json["errors"]], created.json
    assert _stored(db, tenant, name) is None
    assert _stored(db, tenant, str(body["name"])) is None

    _add(api, tenant.owner, name=name, url=PUBLIC_URL, headers={"X-Api-Key": KEY}, description="before")
    update = {key: value for key, value in body.items() if key != "name"} | (
        {"name": change["name"]} if "name" in change else {}
    )
    replaced = api.put(f"/v1/mcp-servers/{name}", json=update, headers=tenant.owner.headers)
    assert replaced.status_code == 400, replaced.json
    assert field in [error["field"] for error in replaced.json["errors"]], replaced.json
    row = _stored(db, tenant, name)
    assert row is not None
    assert (row.url, row.description) == (PUBLIC_URL, "before")


def test_a_put_naming_another_server_is_a_400_and_one_of_an_unknown_server_a_404(
    api: FlaskClient, tenant: TenantFixture, settings: Settings, db: Database
) -> None:
    name = _name()
    _add(api, tenant.owner, name=name, url=PUBLIC_URL, headers={"X-Api-Key": KEY})
    renamed = api.put(
        f"/v1/mcp-servers/{name}", json={"name": "other", "url": PUBLIC_URL}, headers=tenant.owner.headers
    )
    assert renamed.status_code == 400
    assert [error["field"] for error in renamed.json["errors"]] == ["name"]
    same = api.put(f"/v1/mcp-servers/{name}", json={"name": name, "url": PUBLIC_URL}, headers=tenant.owner.headers)
    assert same.status_code == 200, same.json
    assert _opened_headers(db, settings, tenant, name) == {"X-Api-Key": KEY}
    assert (
        api.put(f"/v1/mcp-servers/{_name()}", json={"url": PUBLIC_URL}, headers=tenant.owner.headers).status_code == 404
    )
    for spelling in ("Docs", "a_b", "x" * 40, "%00"):
        assert api.get(f"/v1/mcp-servers/{spelling}", headers=tenant.owner.headers).status_code == 404


# Names, the operator's servers, the quota.


def test_the_operators_servers_are_listed_without_secrets_and_their_names_cannot_be_taken(
    api: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    listed = api.get("/v1/mcp-servers", headers=tenant.owner.headers)
    assert listed.status_code == 200
    assert listed.json["items"] == [
        {
            "name": "git",
            "scope": "operator",
            "transport": "stdio",
            "trusted": True,
            "description": "The team's repositories.",
        },
        {"name": "search", "scope": "operator", "transport": "streamable_http", "trusted": True, "description": ""},
    ]
    shown = api.get("/v1/mcp-servers/search", headers=tenant.owner.headers)
    assert shown.json == listed.json["items"][1]
    for name in ("git", "search"):
        taken = api.post("/v1/mcp-servers", json={"name": name, "url": PUBLIC_URL}, headers=tenant.owner.headers)
        assert taken.status_code == 409, taken.json
        assert taken.json["type"] == "urn:hango:problem:conflict"
        assert (
            api.put(f"/v1/mcp-servers/{name}", json={"url": PUBLIC_URL}, headers=tenant.owner.headers).status_code
            == 409
        )
        assert api.delete(f"/v1/mcp-servers/{name}", headers=tenant.owner.headers).status_code == 409
        assert _stored(db, tenant, name) is None
    for answer in (listed, shown):
        assert OPERATOR_SECRET not in answer.get_data(as_text=True)
        assert "search.example" not in answer.get_data(as_text=True)


def test_a_name_is_unique_in_the_tenant(api: FlaskClient, tenant: TenantFixture) -> None:
    name = _name()
    _add(api, tenant.owner, name=name, url=PUBLIC_URL)
    again = api.post("/v1/mcp-servers", json={"name": name, "url": PUBLIC_URL}, headers=tenant.owner.headers)
    assert again.status_code == 409
    assert [item["name"] for item in api.get("/v1/mcp-servers", headers=tenant.owner.headers).json["items"]][2:] == [
        name
    ]


def test_a_tenant_adds_at_most_its_quota_of_servers(settings: Settings, db: Database, tenant: TenantFixture) -> None:
    capped = _app(settings, db, max_mcp_servers_per_tenant=2)
    try:
        client = capped.test_client()
        names = [f"q{index}-{uuid.uuid4().hex[:6]}" for index in range(3)]
        for name in names[:2]:
            _add(client, tenant.owner, name=name, url=PUBLIC_URL)
        over = client.post("/v1/mcp-servers", json={"name": names[2], "url": PUBLIC_URL}, headers=tenant.owner.headers)
        assert over.status_code == 409
        assert "HANGO_MAX_MCP_SERVERS_PER_TENANT" in over.json["detail"]
        assert client.delete(f"/v1/mcp-servers/{names[0]}", headers=tenant.owner.headers).status_code == 204
        _add(client, tenant.owner, name=names[2], url=PUBLIC_URL)
    finally:
        _close(capped)


def test_concurrent_additions_never_pass_the_quota_nor_share_a_name(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    capped = _app(settings, db, max_mcp_servers_per_tenant=3)
    try:
        names = [f"race-{index % 5}-{uuid.uuid4().hex[:4]}" for index in range(5)] * 2  # each name twice
        barrier = threading.Barrier(len(names))

        def add(name: str) -> int:
            client = capped.test_client()
            barrier.wait()
            response = client.post(
                "/v1/mcp-servers", json={"name": name, "url": PUBLIC_URL}, headers=tenant.owner.headers
            )
            return response.status_code

        with ThreadPoolExecutor(len(names)) as pool:
            statuses = list(pool.map(add, names))
        assert sorted(statuses) == [201] * 3 + [409] * 7
        with db.transaction() as session:
            stored = store.list_servers(session, tenant.id)
        assert len(stored) == 3
        assert len({row.name for row in stored}) == 3
    finally:
        _close(capped)


# Deletion while agents name the server.


def test_a_server_an_agent_names_cannot_be_deleted_until_no_agent_names_it(
    api: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    name, longer = _name(), None
    _add(api, tenant.owner, name=name, url=PUBLIC_URL)
    longer = _add(api, tenant.owner, name=f"{name}-v2", url=PUBLIC_URL)["name"]
    agent_id = create_agent(api, tenant.owner, [], tools=["read_file", f"mcp__{name}__search"])
    subagent = {"name": "helper", "description": "helps", "model": {"provider": "scripted", "script": []}}
    parent_id = create_agent(
        api, tenant.owner, [], tools=["task"], subagents=[{**subagent, "tools": [f"mcp__{name}__*"]}]
    )
    create_agent(api, tenant.owner, [], tools=[f"mcp__{longer}__search"])  # another server, sharing the prefix

    refused = api.delete(f"/v1/mcp-servers/{name}", headers=tenant.owner.headers)
    assert refused.status_code == 409, refused.json
    assert agent_id in refused.json["detail"]
    assert parent_id in refused.json["detail"]
    assert _stored(db, tenant, name) is not None

    for agent, config in (
        (agent_id, {"tools": ["read_file"]}),
        (parent_id, {"tools": ["task"], "subagents": [{**subagent, "tools": []}]}),
    ):
        body = {"name": f"agent-{uuid.uuid4().hex[:8]}", "model": {"provider": "scripted", "script": []}, **config}
        assert api.put(f"/v1/agents/{agent}", json=body, headers=tenant.owner.headers).status_code == 200
    assert api.delete(f"/v1/mcp-servers/{name}", headers=tenant.owner.headers).status_code == 204
    assert _stored(db, tenant, name) is None
    assert api.delete(f"/v1/mcp-servers/{longer}", headers=tenant.owner.headers).status_code == 409


# Tools.


def test_tools_are_listed_as_the_server_gives_them_with_their_hango_names_and_digests(
    api: FlaskClient, lenient_app: Flask, tenant: TenantFixture, docs: KeyedServer
) -> None:
    name = _name()
    _add(api, tenant.owner, name=name, url=docs.url, headers={"X-Api-Key": KEY}, trusted=True)
    response = api.get(f"/v1/mcp-servers/{name}/tools", headers=tenant.owner.headers)
    assert response.status_code == 200, response.json
    tools = {tool["name"]: tool for tool in response.json}
    assert sorted(tools) == sorted(TOOL_NAMES)
    search, drop = tools["search"], tools["drop"]
    assert search["hango_name"] == f"mcp__{name}__search"
    assert search["title"] == "Search the docs"
    assert search["description"] == "Search the documentation."
    assert search["input_schema"]["properties"]["query"]["type"] == "string"
    assert search["annotations"]["readOnlyHint"] is True
    assert drop["annotations"]["destructiveHint"] is True
    assert drop["title"] is None
    # The digest is the listed definition's, as anyone can recompute it from tools/list.
    spec = ServerSpec(name, "tenant", trusted=True, url=docs.url, headers={"X-Api-Key": KEY})
    services: Services = lenient_app.extensions["hango"]
    listed = {tool["name"]: tool for tool in services.runtime.mcp.list_tools(tenant.id, spec)}
    assert {key: definition_sha256(tool) for key, tool in listed.items()} == {
        key: tool["definition_sha256"] for key, tool in tools.items()
    }


def test_a_server_that_does_not_answer_is_a_502_naming_it(
    settings: Settings, db: Database, api: FlaskClient, tenant: TenantFixture
) -> None:
    # Nobody listens on the first port; the second accepts connections (the kernel's backlog) and never answers.
    with socket.socket() as closed, socket.socket() as silent:
        closed.bind(("127.0.0.1", 0))
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        refused_url = f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"
        silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        quick = _app(settings, db, mcp_allow_private_urls=True, mcp_timeout=timedelta(seconds=1))
        try:
            client = quick.test_client()
            for url in (refused_url, silent_url):
                name = _name()
                _add(client, tenant.owner, name=name, url=url, headers={"X-Api-Key": KEY})
                response = client.get(f"/v1/mcp-servers/{name}/tools", headers=tenant.owner.headers)
                assert response.status_code == 502, (url, response.json)
                assert response.mimetype == "application/problem+json"
                assert response.json["type"] == "urn:hango:problem:mcp-unavailable"
                assert response.json["server"] == name
                assert name in response.json["detail"]
                assert KEY not in response.get_data(as_text=True)
        finally:
            _close(quick)


def test_tools_of_an_unknown_server_are_a_404(api: FlaskClient, tenant: TenantFixture) -> None:
    response = api.get(f"/v1/mcp-servers/{_name()}/tools", headers=tenant.owner.headers)
    assert response.status_code == 404
    assert response.json["type"] == "urn:hango:problem:not-found"
