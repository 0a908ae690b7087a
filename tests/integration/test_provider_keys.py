"""A run whose provider has no API key in the worker's settings fails at once, naming the variable to set."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from tests.integration.conftest import TenantFixture, messages_of, start_run, wait_for_state
from tests.integration.hitl_helpers import event_types, tool_results
from tests.support.processes import logged, worker, worker_answer, worker_log_name
from tests.support.stub_provider import StubProvider

WORKER_NAME = "no-keys"


@pytest.fixture(scope="module")
def stub() -> Iterator[StubProvider]:
    with StubProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def keyless(settings: Settings, db: Database, stub: StubProvider) -> Iterator[tuple[FlaskClient, Settings]]:
    """The API and a worker of their own queue with no provider key set, both providers pointed at the stub (so
    a request that went out anyway would be seen), and retries that would show in the worker's log."""
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        anthropic_base_url=stub.anthropic_url,
        openai_base_url=stub.openai_url,
        anthropic_api_key=None,
        openai_api_key=None,
        model_retry_attempts=3,
    )
    with worker(own, concurrency=1, beat=False, name=WORKER_NAME):
        # The session worker's reconciler would move a run left queued while this worker boots onto its own queue.
        worker_answer(Runtime.build(own, db=db))
        yield create_app(own, db=db).test_client(), own


@pytest.mark.parametrize(
    ("provider", "variable"), [("anthropic", "HANGO_ANTHROPIC_API_KEY"), ("openai", "HANGO_OPENAI_API_KEY")]
)
def test_a_run_without_its_providers_key_fails_at_once_naming_the_variable(
    keyless: tuple[FlaskClient, Settings],
    make_tenant: Any,
    stub: StubProvider,
    provider: str,
    variable: str,
) -> None:
    client, own = keyless
    tenant: TenantFixture = make_tenant()
    body = {"name": f"{provider}-no-key", "model": {"provider": provider, "name": "some-model"}, "tools": ["ls"]}
    created = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    run_id = start_run(client, tenant.owner, created.json["id"])

    run = wait_for_state(client, tenant.owner, run_id, {"failed", "succeeded"})

    assert run["state"] == "failed"
    assert run["error"].startswith(f"{variable} is not set: "), run["error"]
    # Failed at the run's first model call: the input is all the run holds, and no request left the worker.
    assert [message["role"] for message in messages_of(client, tenant.owner, run_id)] == ["user"]
    assert stub.requests == []
    # Once, without the retries a transient failure gets.
    assert not logged(worker_log_name(own, WORKER_NAME), "model call failed on attempt")


def test_a_subagent_without_its_providers_key_fails_as_a_child_the_parent_reads(
    keyless: tuple[FlaskClient, Settings], make_tenant: Any, db: Database, stub: StubProvider
) -> None:
    client, _ = keyless
    tenant: TenantFixture = make_tenant()
    researcher = {
        "name": "researcher",
        "description": "looks things up",
        "model": {"provider": "anthropic", "name": "some-model"},
    }
    task = {"id": "t", "name": "task", "args": {"subagent_type": "researcher", "description": "look it up"}}
    body = {
        "name": "delegates-to-claude",
        "model": {"provider": "scripted", "script": [{"tool_calls": [task]}, {"text": "I will do it myself."}]},
        "tools": ["task"],
        "subagents": [researcher],
    }
    created = client.post("/v1/agents", json=body, headers=tenant.owner.headers)
    assert created.status_code == 201, created.json
    run_id = start_run(client, tenant.owner, created.json["id"])

    assert wait_for_state(client, tenant.owner, run_id, {"failed", "succeeded"})["state"] == "succeeded"
    result = tool_results(client, tenant.owner, run_id)["t"]
    assert result["is_error"]
    assert result["content"].startswith("subagent researcher failed: HANGO_ANTHROPIC_API_KEY is not set: ")
    # The child ended as a child does, its start and its end recorded.
    assert event_types(db, run_id).count("subagent.finished") == 1
    assert stub.requests == []
