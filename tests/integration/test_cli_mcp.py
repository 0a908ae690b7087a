"""``hango mcp list`` and ``hango mcp tools NAME`` as a user runs them, against a real gunicorn server reaching a real
streamable HTTP MCP server: what they print, their JSON Lines, and their exit statuses."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from hango.kernel.config import Settings
from hango.processes.cli_remote import table
from tests.integration.conftest import Person, TenantFixture
from tests.support.mcp import http_server
from tests.support.mcp_keyed import KeyedServer, keyed_mcp_server
from tests.support.processes import api_server, remote_cli

KEY = f"sk-cli-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def docs() -> Iterator[KeyedServer]:
    with keyed_mcp_server(KEY) as served:
        yield served


@pytest.fixture(scope="module")
def served_settings(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The session's settings with an operator server, and private URLs allowed (the MCP server is on 127.0.0.1)."""
    path = tmp_path_factory.mktemp("mcp-cli") / "mcp.json"
    operator = {"git": {"command": "/bin/false", "description": "The team's repositories."}}
    path.write_text(json.dumps({"mcpServers": operator}))
    return settings.replace(mcp_allow_private_urls=True, mcp_config=str(path))


@pytest.fixture(scope="module")
def base(served_settings: Settings) -> Iterator[str]:
    with api_server(served_settings) as url:
        yield url


@pytest.fixture
def hango(served_settings: Settings, base: str) -> Any:
    """Runs ``hango ARGS`` as ``person`` (HANGO_URL and HANGO_TOKEN in its environment)."""
    return remote_cli(served_settings, base)


def _add_server(hango_url: str, person: Person, name: str, url: str, headers: dict[str, str]) -> None:
    """Add a server through the API the CLI talks to (the Python client, as a script would)."""
    from hango.client import Client

    with Client(hango_url, person.token) as client:
        created = client.create_mcp_server(name, url, headers=headers, trusted=True, description="Docs")
    assert created["scope"] == "tenant"


def test_mcp_list_prints_the_operators_servers_then_the_tenants(
    hango: Any, base: str, tenant: TenantFixture, docs: KeyedServer
) -> None:
    name = f"docs-{uuid.uuid4().hex[:6]}"
    _add_server(base, tenant.owner, name, docs.url, {"X-Api-Key": KEY})
    member = tenant.add("member")

    listed = hango(member, "mcp", "list")
    assert listed.returncode == 0, listed.stderr
    rows = [
        ("git", "operator", "stdio", "yes", "-", "The team's repositories."),
        (name, "tenant", "streamable_http", "yes", docs.url, "Docs"),
    ]
    assert listed.stdout == table(("NAME", "SCOPE", "TRANSPORT", "TRUSTED", "URL", "DESCRIPTION"), rows) + "\n"

    as_json = hango(member, "mcp", "list", "--json")
    assert as_json.returncode == 0, as_json.stderr
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(line["name"], line["scope"]) for line in lines] == [("git", "operator"), (name, "tenant")]
    assert KEY not in listed.stdout + as_json.stdout


@pytest.fixture(scope="module")
def annotated() -> Iterator[str]:
    """The shared test server whose tools carry every combination of annotations the default rule reads."""
    with http_server("annotated") as url:
        yield url


def test_mcp_tools_prints_hango_names_annotations_and_titles_marking_a_destructive_tool(
    hango: Any, base: str, tenant: TenantFixture, annotated: str
) -> None:
    name = f"notes-{uuid.uuid4().hex[:6]}"
    _add_server(base, tenant.owner, name, annotated, {})

    shown = hango(tenant.add("member"), "mcp", "tools", name)
    assert shown.returncode == 0, shown.stderr
    rows = [
        (f"mcp__{name}__peek", "read-only", "-"),
        (f"mcp__{name}__poke", "DESTRUCTIVE", "-"),
        (f"mcp__{name}__plain", "-", "-"),
        (f"mcp__{name}__hinted", "idempotent, open-world", "-"),
        (f"mcp__{name}__titled", "read-only, idempotent", "Look it up"),
    ]
    warning = "DESTRUCTIVE: the server says 1 of these tools may delete or overwrite data; review their calls with care"
    assert shown.stdout == table(("TOOL", "ANNOTATIONS", "TITLE"), rows) + "\n" + warning + "\n"

    as_json = hango(tenant.owner, "mcp", "tools", name, "--json")
    assert as_json.returncode == 0, as_json.stderr
    tools = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [tool["hango_name"] for tool in tools] == [row[0] for row in rows]
    assert all(len(tool["definition_sha256"]) == 64 for tool in tools)


def test_mcp_tools_of_an_unknown_or_unreachable_server_is_exit_status_1(
    hango: Any, base: str, tenant: TenantFixture, docs: KeyedServer
) -> None:
    unknown = hango(tenant.owner, "mcp", "tools", "nothing-here")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: 404 Not found")

    name = f"locked-{uuid.uuid4().hex[:6]}"
    _add_server(base, tenant.owner, name, docs.url, {"X-Api-Key": "not-the-key"})
    refused = hango(tenant.owner, "mcp", "tools", name)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"error: 502 MCP server unavailable: MCP server {name} is unavailable")
    assert refused.stdout == ""


def test_the_clients_update_replaces_given_headers_and_keeps_them_when_left_out(
    base: str, tenant: TenantFixture, docs: KeyedServer
) -> None:
    from hango.client import Client, ProblemError

    name = f"keyed-{uuid.uuid4().hex[:6]}"
    _add_server(base, tenant.owner, name, docs.url, {"X-Api-Key": "not-the-key"})
    with Client(base, tenant.owner.token) as client:
        with pytest.raises(ProblemError):
            client.mcp_server_tools(name)
        updated = client.update_mcp_server(name, docs.url, headers={"X-Api-Key": KEY}, description="Docs, keyed")
        assert updated["description"] == "Docs, keyed"
        assert updated["trusted"] is False
        assert client.mcp_server_tools(name)
        client.update_mcp_server(name, docs.url, trusted=True)  # headers left out: kept
        assert client.mcp_server(name)["trusted"] is True
        assert [tool["name"] for tool in client.mcp_server_tools(name)]
