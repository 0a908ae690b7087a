"""The agent definitions in examples/: each is saved through the real API as its header says, and the ones that need
no model key run on a real worker to their pause (and, approved, to their end)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from tests.integration.conftest import TenantFixture, start_run, wait_for_state
from tests.integration.hitl_helpers import decide, finished, pending

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOOL_MODULE = "examples.tools.tickets"
STILL_INTERRUPTED = (
    "write_file to /memories/ and /skills/ is still interrupted, under the agent's own rule instead of the default"
)
# What saving each example answers besides the agent: a rule that replaces a default says so.
EXPECTED_WARNINGS: dict[str, list[dict[str, str]]] = {
    "scripted.yaml": [],
    "anthropic.yaml": [
        {
            "tool": "edit_file",
            "message": "edit_file to /memories/ and /skills/ is still interrupted, by the agent's rule on every "
            "edit_file call instead of the default",
        }
    ],
    "openai-compatible.yaml": [{"tool": "write_file", "message": STILL_INTERRUPTED}],
    "custom-tool.yaml": [],
    "quorum.yaml": [{"tool": "write_file", "message": STILL_INTERRUPTED}],
}


def definition(file_name: str) -> dict[str, Any]:
    """An example as the body of ``POST /v1/agents``."""
    body: dict[str, Any] = yaml.safe_load((EXAMPLES / file_name).read_text())
    return body


@pytest.fixture(scope="module")
def own_settings(settings: Settings) -> Settings:
    """The session's settings on a queue of this module's own, with the examples' tool module registered."""
    return settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", tool_modules=(*settings.tool_modules, TOOL_MODULE)
    )


@pytest.fixture(scope="module")
def api(own_settings: Settings, db: Database) -> FlaskClient:
    """The API, knowing the examples' tools as a server started with ``HANGO_TOOL_MODULES`` does."""
    return create_app(own_settings, db=db).test_client()


@pytest.fixture(scope="module")
def examples_worker(own_settings: Settings, db: Database) -> Iterator[None]:
    """A real worker on the module's queue, with the examples' tool module."""
    from tests.support.processes import worker, worker_answer

    with worker(own_settings, concurrency=1, beat=False, name="examples"):
        # Runs start only once the worker consumes: the session worker's reconciler moves runs left queued.
        worker_answer(Runtime.build(own_settings, db=db))
        yield


def test_the_examples_are_the_five_the_readme_points_to_each_with_its_header() -> None:
    assert sorted(path.name for path in EXAMPLES.glob("*.yaml")) == sorted(EXPECTED_WARNINGS)
    for name in EXPECTED_WARNINGS:
        text = (EXAMPLES / name).read_text()
        header = text[: text.index("\nname:")]
        assert all(line.startswith("#") for line in header.splitlines()), name
        assert "\n# What it shows: " in header, name
        assert f"hango agents apply -f examples/{name}" in header, name


@pytest.mark.parametrize("file_name", sorted(EXPECTED_WARNINGS))
def test_each_example_is_created_then_updated_through_the_api(
    api: FlaskClient, tenant: TenantFixture, file_name: str
) -> None:
    body = definition(file_name)

    created = api.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    assert created.json["warnings"] == EXPECTED_WARNINGS[file_name]
    assert created.json["name"] == body["name"]
    # Applied again, as `hango agents apply -f` does for a name that exists: a replacement, the same answer.
    updated = api.put(f"/v1/agents/{created.json['id']}", json=body, headers=tenant.owner.headers)
    assert updated.status_code == 200, updated.json
    assert updated.json["warnings"] == EXPECTED_WARNINGS[file_name]
    assert {key: updated.json[key] for key in body} == {key: created.json[key] for key in body}


@pytest.mark.usefixtures("examples_worker")
def test_the_scripted_example_pauses_on_its_memory_write_and_finishes_once_approved(
    api: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = api.post("/v1/agents", json=definition("scripted.yaml"), headers=tenant.owner.headers).json["id"]
    run_id = start_run(api, tenant.owner, agent_id, "Remember that I like green tea.")

    assert wait_for_state(api, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})["state"] == (
        "awaiting_approval"
    )
    [approval] = pending(api, tenant.owner, run_id)
    assert (approval["tool_name"], approval["arguments"]["file_path"]) == ("write_file", "/memories/preferences.md")
    assert decide(api, tenant.owner, run_id, {"approval_id": approval["id"], "decision": "approve"}).status_code == 200
    assert finished(api, tenant.owner, run_id)["state"] == "succeeded"
    saved = api.get(f"/v1/agents/{agent_id}/files/memories/preferences.md", headers=tenant.owner.headers)
    assert saved.json["content"] == "# Preferences\n- green tea\n"


@pytest.mark.usefixtures("examples_worker")
def test_the_custom_tool_example_pauses_on_its_rule_and_opens_the_ticket_once_approved(
    api: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = api.post("/v1/agents", json=definition("custom-tool.yaml"), headers=tenant.owner.headers).json["id"]
    run_id = start_run(api, tenant.owner, agent_id, "The espresso machine leaks.")

    assert wait_for_state(api, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})["state"] == (
        "awaiting_approval"
    )
    [approval] = pending(api, tenant.owner, run_id)
    assert approval["tool_name"] == "open_ticket"
    assert approval["description"] == "A ticket sends a person to work; a reviewer reads it first."
    assert approval["allowed_decisions"] == ["approve", "edit", "reject"]
    assert decide(api, tenant.owner, run_id, {"approval_id": approval["id"], "decision": "approve"}).status_code == 200
    assert finished(api, tenant.owner, run_id)["state"] == "succeeded"
    ticket = api.get(
        f"/v1/agents/{agent_id}/files/memories/tickets/espresso-machine-leaks.md", headers=tenant.owner.headers
    )
    assert ticket.status_code == 200, ticket.json
    assert ticket.json["content"].startswith("# Espresso machine leaks\n\npriority: high\n")


@pytest.mark.usefixtures("examples_worker")
def test_the_quorum_example_pauses_for_two_approvals(api: FlaskClient, tenant: TenantFixture) -> None:
    agent_id = api.post("/v1/agents", json=definition("quorum.yaml"), headers=tenant.owner.headers).json["id"]
    run_id = start_run(api, tenant.owner, agent_id, "Learn the house style.")

    assert wait_for_state(api, tenant.owner, run_id, {"awaiting_approval", "succeeded", "failed"})["state"] == (
        "awaiting_approval"
    )
    [approval] = pending(api, tenant.owner, run_id)
    assert (approval["tool_name"], approval["approvals_required"]) == ("write_file", 2)
    admin = tenant.add("admin")
    for reviewer in (tenant.owner, admin):
        vote = decide(api, reviewer, run_id, {"approval_id": approval["id"], "decision": "approve"})
        assert vote.status_code == 200, vote.json
    assert finished(api, tenant.owner, run_id)["state"] == "succeeded"
