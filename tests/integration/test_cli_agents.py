"""``hango agents …``: agent definitions kept as files and applied to a real gunicorn server, listed and shown, with
their exit statuses, as a user runs them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from hango.kernel.config import Settings
from tests.integration.conftest import Person, TenantFixture
from tests.support.processes import remote_cli

DEFINITION = """\
name: {name}
system_prompt: |
  You keep notes.
  Keep them short.
model:
  provider: scripted
  script:
    - text: Noted.
tools: [read_file, write_file]
interrupt_on:
  write_file:
    when: {{file_path: {{prefix: /memories/}}}}
    description: Memories need a reviewer.
"""


@pytest.fixture(scope="module")
def base(api_base: str) -> str:
    """The session's API server (tests/integration/conftest.py): each test has tenants of its own."""
    return api_base


@pytest.fixture
def hango(settings: Settings, base: str) -> Any:
    """Runs ``hango ARGS`` as ``person`` (HANGO_URL and HANGO_TOKEN in its environment), ``stdin`` on its input."""
    return remote_cli(settings, base)


def _agents(client: FlaskClient, person: Person) -> list[dict[str, Any]]:
    response = client.get("/v1/agents?limit=200", headers=person.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


def test_apply_creates_the_agent_then_replaces_the_one_of_that_name(
    hango: Any, client: FlaskClient, tenant: TenantFixture, tmp_path: Path
) -> None:
    name = f"notes-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "agent.yaml"
    path.write_text(DEFINITION.format(name=name))

    created = hango(tenant.owner, "agents", "apply", "-f", str(path))
    assert created.returncode == 0, created.stderr
    [agent] = _agents(client, tenant.owner)
    assert created.stdout == f"created agent {name} ({agent['id']})\n"
    assert agent["system_prompt"] == "You keep notes.\nKeep them short.\n"
    assert agent["interrupt_on"]["write_file"]["description"] == "Memories need a reviewer."

    path.write_text(DEFINITION.format(name=name).replace("Keep them short.", "Keep them shorter."))
    updated = hango(tenant.owner, "agents", "apply", "-f", str(path))
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout == f"updated agent {name} ({agent['id']})\n"
    [replaced] = _agents(client, tenant.owner)
    assert replaced["id"] == agent["id"]
    assert replaced["system_prompt"] == "You keep notes.\nKeep them shorter.\n"


def test_apply_reads_json_from_stdin_and_prints_the_servers_answer_with_json(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    body = {"name": "from-stdin", "model": {"provider": "scripted", "script": [{"text": "Hi."}]}, "tools": []}
    applied = hango(tenant.owner, "agents", "apply", "-f", "-", "--json", stdin=json.dumps(body))
    assert applied.returncode == 0, applied.stderr
    answer = json.loads(applied.stdout)
    assert answer["name"] == "from-stdin"
    shown = client.get(f"/v1/agents/{answer['id']}", headers=tenant.owner.headers).json
    assert {key: shown[key] for key in ("name", "tools", "model")} == {
        key: answer[key] for key in ("name", "tools", "model")
    }


@pytest.mark.parametrize(
    ("file_name", "content", "reason"),
    [
        ("missing.yaml", None, "cannot read it"),
        ("broken.yaml", "name: [unclosed\nmodel: 1\n", "not valid YAML"),
        ("broken.json", '{"name": ', "not valid JSON"),
        ("list.yaml", "- name: a\n- name: b\n", "holds a list"),
        ("empty.yaml", "", "holds nothing"),
        ("binary.yaml", b"\xff\xfe\x00", "not UTF-8"),
    ],
)
def test_a_bad_file_is_exit_2_with_one_line_naming_it_and_nothing_sent(
    hango: Any,
    client: FlaskClient,
    tenant: TenantFixture,
    tmp_path: Path,
    file_name: str,
    content: str | bytes | None,
    reason: str,
) -> None:
    path = tmp_path / file_name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    result = hango(tenant.owner, "agents", "apply", "-f", str(path))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {path}: {reason}")
    assert _agents(client, tenant.owner) == []


def test_a_refused_definition_prints_the_problem_and_each_field_error_once(
    hango: Any, client: FlaskClient, tenant: TenantFixture
) -> None:
    body = {"name": "bad", "model": {"provider": "nope"}, "max_turns": 0}
    refused = hango(tenant.owner, "agents", "apply", "-f", "-", stdin=json.dumps(body))
    assert refused.returncode == 1
    assert refused.stdout == ""
    lines = refused.stderr.splitlines()
    assert lines[0].startswith("error: 400 ")
    fields = [line.strip().split(":")[0] for line in lines[1:]]
    assert sorted(fields) == ["max_turns", "model.provider"]
    assert refused.stderr.count("model.provider") == 1
    assert refused.stderr.count("max_turns") == 1
    assert _agents(client, tenant.owner) == []


def test_a_member_may_not_apply(hango: Any, client: FlaskClient, tenant: TenantFixture, tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(DEFINITION.format(name="members"))
    refused = hango(tenant.add("member"), "agents", "apply", "-f", str(path))
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: 403 ")
    assert _agents(client, tenant.owner) == []


def test_list_and_show_by_id_or_name_and_show_applies_back_unchanged(
    hango: Any, client: FlaskClient, tenant: TenantFixture, tmp_path: Path
) -> None:
    for name in ("first", "second"):
        (tmp_path / f"{name}.yaml").write_text(DEFINITION.format(name=name))
        assert hango(tenant.owner, "agents", "apply", "-f", str(tmp_path / f"{name}.yaml")).returncode == 0
    agents = _agents(client, tenant.owner)

    listed = hango(tenant.owner, "agents", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == agents  # JSON Lines, every agent
    table = hango(tenant.owner, "agents", "list").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "MODEL", "UPDATED", "TOOLS"]
    assert [line.split()[:3] for line in table[1:]] == [[a["id"], a["name"], "scripted"] for a in agents]

    second = next(agent for agent in agents if agent["name"] == "second")
    by_name = hango(tenant.owner, "agents", "show", "second", "--json")
    by_id = hango(tenant.owner, "agents", "show", second["id"].upper(), "--json")
    assert json.loads(by_name.stdout) == json.loads(by_id.stdout) == second

    shown = hango(tenant.owner, "agents", "show", "second")
    assert shown.returncode == 0, shown.stderr
    definition = yaml.safe_load(shown.stdout)
    assert next(iter(definition)) == "name"
    assert "id" not in definition
    assert "effective_interrupt_on" not in definition
    assert "system_prompt: |" in shown.stdout  # a prompt of several lines reads as a block
    again = hango(tenant.owner, "agents", "apply", "-f", "-", stdin=shown.stdout)
    assert again.stdout == f"updated agent second ({second['id']})\n"
    after = client.get(f"/v1/agents/{second['id']}", headers=tenant.owner.headers).json
    assert {k: v for k, v in after.items() if k != "updated_at"} == {
        k: v for k, v in second.items() if k != "updated_at"
    }

    unknown = hango(tenant.owner, "agents", "show", "nobody")
    assert unknown.returncode == 1
    assert unknown.stderr == "error: 404 Not found: no agent you can see has the id or name nobody\n"


def test_apply_prints_what_the_rules_no_longer_cover_on_stderr(
    hango: Any, tenant: TenantFixture, tmp_path: Path
) -> None:
    # One file of /memories/ needs two reviewers; the rest of /memories/ and /skills/ is no longer reviewed.
    narrowed = {
        "name": f"solo-{uuid.uuid4().hex[:6]}",
        "model": {"provider": "scripted", "script": [{"text": "Noted."}]},
        "tools": ["write_file"],
        "interrupt_on": {"write_file": {"when": {"file_path": {"equals": "/memories/q.md"}}, "approvals_required": 2}},
    }
    path = tmp_path / "narrowed.json"
    path.write_text(json.dumps(narrowed))
    applied = hango(tenant.owner, "agents", "apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    assert applied.stderr.splitlines() == [
        "warning: write_file: write_file to /memories/ and /skills/ is no longer interrupted except where file_path "
        "equals /memories/q.md"
    ]


def test_a_run_is_started_by_the_agents_name_as_well_as_its_id(
    hango: Any, client: FlaskClient, tenant: TenantFixture, tmp_path: Path
) -> None:
    name = f"named-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "agent.yaml"
    path.write_text(DEFINITION.format(name=name))
    assert hango(tenant.owner, "agents", "apply", "-f", str(path)).returncode == 0
    [agent] = _agents(client, tenant.owner)

    by_name = hango(tenant.owner, "runs", "create", "--agent", name, "--input", "hi", "--json")
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["agent_id"] == agent["id"]
    by_id = hango(tenant.owner, "runs", "create", "--agent", agent["id"].upper(), "--input", "hi", "--json")
    assert json.loads(by_id.stdout)["agent_id"] == agent["id"]

    unknown = hango(tenant.owner, "runs", "create", "--agent", "nobody", "--input", "hi")
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "error: 404 Not found: no agent you can see has the id or name nobody\n",
    )
