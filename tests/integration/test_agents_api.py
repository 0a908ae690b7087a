"""The agents API: who may write, what is validated, and the shape of an agent."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.services import tenancy
from tests.integration.conftest import TenantFixture
from tests.support.processes import HANGO, ROOT, free_port, log_path, settings_env, stop, wait_until


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "notes-bot",
        "system_prompt": "You keep notes.",
        "model": {"provider": "scripted", "script": [{"text": "Done."}]},
        "tools": ["ls", "read_file", "write_file"],
        "max_turns": 10,
    }
    body.update(changes)
    return body


def test_an_owner_creates_and_everyone_reads(client: FlaskClient, tenant: TenantFixture) -> None:
    created = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers)
    assert created.status_code == 201
    # The save's answer is the agent and what its rules no longer cover (nothing here).
    agent = {key: value for key, value in created.json.items() if key != "warnings"}
    assert created.json["warnings"] == []
    assert agent["name"] == "notes-bot"
    assert agent["tools"] == ["ls", "read_file", "write_file"]
    assert agent["subagents"] == []
    member = tenant.add("member")
    assert client.get(f"/v1/agents/{agent['id']}", headers=member.headers).json == agent
    assert agent["id"] in {a["id"] for a in client.get("/v1/agents", headers=member.headers).json["items"]}


def test_members_cannot_write_agents_and_admins_can(client: FlaskClient, tenant: TenantFixture) -> None:
    member, admin = tenant.add("member"), tenant.add("admin")
    assert client.post("/v1/agents", json=_body(), headers=member.headers).status_code == 403
    created = client.post("/v1/agents", json=_body(), headers=admin.headers)
    assert created.status_code == 201
    agent_id = created.json["id"]
    assert client.put(f"/v1/agents/{agent_id}", json=_body(), headers=member.headers).status_code == 403


def test_put_replaces_the_whole_configuration(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).json["id"]
    replaced = client.put(
        f"/v1/agents/{agent_id}",
        json={"name": "renamed", "model": {"provider": "scripted"}},
        headers=tenant.owner.headers,
    )
    assert replaced.status_code == 200
    assert (
        replaced.json["name"],
        replaced.json["tools"],
        replaced.json["system_prompt"],
        replaced.json["max_turns"],
    ) == ("renamed", [], "", 50)


def test_a_duplicate_name_is_a_conflict(client: FlaskClient, tenant: TenantFixture) -> None:
    assert client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).status_code == 201
    assert client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).status_code == 409


def test_another_tenants_agent_is_not_found(client: FlaskClient, make_tenant: Any) -> None:
    mine, theirs = make_tenant("mine"), make_tenant("theirs")
    agent_id = client.post("/v1/agents", json=_body(), headers=theirs.owner.headers).json["id"]
    assert client.get(f"/v1/agents/{agent_id}", headers=mine.owner.headers).status_code == 404
    assert client.put(f"/v1/agents/{agent_id}", json=_body(), headers=mine.owner.headers).status_code == 404


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": {"provider": "gpt-magic"}}, "model.provider"),
        ({"model": {"provider": "anthropic"}}, "model.name"),
        ({"model": {"provider": "openai", "name": "gpt-x", "script": []}}, "model.script"),
        ({"model": {"provider": "scripted", "name": "x"}}, "model.name"),
        ({"tools": ["ls", "teleport"]}, "tools[1]"),
        ({"max_turns": 0}, "max_turns"),
        ({"model": {"provider": "scripted", "script": [{"text": 3}]}}, "model.script[0].text"),
        (
            {"model": {"provider": "scripted", "script": [{"tool_calls": [{"args": {}}]}]}},
            "model.script[0].tool_calls[0].name",
        ),
        (
            {
                "model": {
                    "provider": "scripted",
                    "script": [
                        {"tool_calls": [{"id": "a", "name": "ls"}]},
                        {"tool_calls": [{"id": "a", "name": "ls"}]},
                    ],
                }
            },
            "model.script[1].tool_calls[0].id",
        ),
        (
            {"subagents": [{"name": "r", "description": "d", "model": {"provider": "scripted"}, "tools": ["nope"]}]},
            "subagents[0].tools[0]",
        ),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_configuration_is_a_400_naming_the_field(
    client: FlaskClient, tenant: TenantFixture, changes: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/agents", json=_body(**changes), headers=tenant.owner.headers)
    assert response.status_code == 400, response.json
    assert field in [error["field"] for error in response.json["errors"]]
    assert client.get("/v1/agents", headers=tenant.owner.headers).json["items"] == []


def test_creating_an_agent_is_audited(client: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers).json["id"]
    rows = client.get("/v1/audit-events", query_string={"action": "agent.create"}, headers=tenant.owner.headers).json
    assert [(row["target_id"], row["outcome"]) for row in rows["items"]] == [(agent_id, "success")]


NARROWED = {"when": {"file_path": {"equals": "/memories/q.md"}}, "approvals_required": 2}


def test_saving_says_what_a_narrowed_default_no_longer_covers(client: FlaskClient, tenant: TenantFixture) -> None:
    # Issue 25: write_file narrowed to one file (with a quorum) left every other memory write unreviewed, silently.
    created = client.post("/v1/agents", json=_body(interrupt_on={"write_file": NARROWED}), headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    assert created.json["warnings"] == [
        {
            "tool": "write_file",
            "message": "write_file to /memories/ and /skills/ is no longer interrupted except where file_path equals "
            "/memories/q.md",
        }
    ]
    lifted = client.put(
        f"/v1/agents/{created.json['id']}",
        json=_body(interrupt_on={"write_file": False, "edit_file": False}),
        headers=tenant.owner.headers,
    )
    assert lifted.status_code == 200, lifted.json
    assert lifted.json["warnings"] == [
        {"tool": "edit_file", "message": "edit_file to /memories/ and /skills/ is no longer interrupted"},
        {"tool": "write_file", "message": "write_file to /memories/ and /skills/ is no longer interrupted"},
    ]
    # A warning belongs to the save; reading the agent again shows its rules, not the save's answer.
    assert "warnings" not in client.get(f"/v1/agents/{created.json['id']}", headers=tenant.owner.headers).json


def test_nothing_to_say_is_an_empty_list(client: FlaskClient, tenant: TenantFixture) -> None:
    created = client.post("/v1/agents", json=_body(), headers=tenant.owner.headers)
    assert created.json["warnings"] == []
    replaced = client.put(f"/v1/agents/{created.json['id']}", json=_body(), headers=tenant.owner.headers)
    assert replaced.json["warnings"] == []


def test_a_subagents_own_rules_are_told_with_its_name(client: FlaskClient, tenant: TenantFixture) -> None:
    subagent = {
        "name": "scribe",
        "description": "writes",
        "model": {"provider": "scripted"},
        "tools": ["write_file"],
        "interrupt_on": {"write_file": NARROWED},
    }
    created = client.post("/v1/agents", json=_body(subagents=[subagent]), headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    assert created.json["warnings"] == [
        {
            "tool": "write_file",
            "message": "in subagent scribe, write_file to /memories/ and /skills/ is no longer interrupted except "
            "where file_path equals /memories/q.md",
        }
    ]


@pytest.fixture
def writer_client(settings: Settings, db: Database) -> FlaskClient:
    """The API with a custom tool that says it writes (``open_ticket``, from examples/tools/tickets.py)."""
    own = settings.replace(tool_modules=(*settings.tool_modules, "examples.tools.tickets"))
    return create_app(own, db=db).test_client()


def test_a_writing_tool_no_rule_covers_is_told(writer_client: FlaskClient, tenant: TenantFixture) -> None:
    unreviewed = {
        "tool": "open_ticket",
        "message": "open_ticket can write, and no rule interrupts it: its calls run without review",
    }
    no_rule = writer_client.post("/v1/agents", json=_body(tools=["open_ticket", "count"]), headers=tenant.owner.headers)
    assert no_rule.status_code == 201, no_rule.json
    # count cannot write (it declares nothing): only open_ticket is told of.
    assert no_rule.json["warnings"] == [unreviewed]
    lifted = writer_client.put(
        f"/v1/agents/{no_rule.json['id']}",
        json=_body(tools=["open_ticket"], interrupt_on={"open_ticket": False}),
        headers=tenant.owner.headers,
    )
    assert lifted.json["warnings"] == [unreviewed]
    ruled = writer_client.put(
        f"/v1/agents/{no_rule.json['id']}",
        json=_body(tools=["open_ticket"], interrupt_on={"open_ticket": True}),
        headers=tenant.owner.headers,
    )
    assert ruled.json["warnings"] == []


def test_the_openapi_document_describes_the_warnings(client: FlaskClient) -> None:
    document = client.get("/openapi.json").json
    created = document["paths"]["/v1/agents"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    replaced = document["paths"]["/v1/agents/{agent_id}"]["put"]["responses"]["200"]["content"]["application/json"]
    assert created["$ref"] == replaced["schema"]["$ref"]
    saved = document["components"]["schemas"][created["$ref"].rsplit("/", 1)[-1]]
    assert "warnings" in saved["required"]
    assert "default interrupt rule" in saved["properties"]["warnings"]["description"]
    warning = document["components"]["schemas"]["RuleWarning"]
    assert sorted(warning["required"]) == ["message", "tool"]


# Installed as sitecustomize on the API process's PYTHONPATH: `import anthropic` fails there as it does on a server
# installed without hango[anthropic], however the SDK is reached.
WITHOUT_ANTHROPIC = """
import sys


class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name == "anthropic" or name.startswith("anthropic."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.fixture(scope="module")
def api_without_anthropic(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``hango api`` server whose Python cannot import the anthropic SDK; yields its base URL."""
    folder = tmp_path_factory.mktemp("without-anthropic")
    (folder / "sitecustomize.py").write_text(WITHOUT_ANTHROPIC)
    env = settings_env(settings)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env["PYTHONPATH"]])
    port = free_port()
    with open(log_path(f"hango-test-api-without-anthropic-{port}"), "wb") as log:
        process = subprocess.Popen(
            [*HANGO, "api", "--port", str(port), "--workers", "1"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: process.poll() is not None or _healthy(base))
        assert process.poll() is None, "the API server exited at start"
        yield base
    finally:
        stop(process)


def _healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _post_agent(base: str, token: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}/v1/agents", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


CLAUDE = {"provider": "anthropic", "name": "claude-sonnet-4-5"}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": CLAUDE}, "model.provider"),
        (
            {
                "subagents": [
                    {"name": "scribe", "description": "d", "model": {"provider": "scripted"}},
                    {"name": "claude", "description": "d", "model": CLAUDE},
                ]
            },
            "subagents[1].model.provider",
        ),
    ],
)
def test_a_model_whose_sdk_is_missing_is_refused_at_save_time(
    api_without_anthropic: str, db: Database, changes: dict[str, Any], field: str
) -> None:
    owner = tenancy.create_tenant(db, "no-sdk", f"owner-{uuid.uuid4().hex[:8]}@example.com")
    refused = _post_agent(api_without_anthropic, owner.token, _body(**changes))
    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["errors"] == [
        {"field": field, "message": "the anthropic provider needs `pip install 'hango[anthropic]'`"}
    ]
    listed = httpx.get(f"{api_without_anthropic}/v1/agents", headers={"Authorization": f"Bearer {owner.token}"})
    assert listed.json()["items"] == []
    # The same server takes a provider whose SDK it has.
    gpt = _post_agent(api_without_anthropic, owner.token, _body(model={"provider": "openai", "name": "gpt-4o"}))
    assert gpt.status_code == 201, gpt.text
