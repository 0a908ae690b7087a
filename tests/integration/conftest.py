"""API fixtures: the real Flask app on the test database, and tenants populated through the public surface."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from hango.services import tenancy


@pytest.fixture(scope="session")
def app(settings: Settings, db: Database) -> Flask:
    """The API application."""
    return create_app(settings, db=db)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """A test client of the API."""
    return app.test_client()


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for a token."""
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Person:
    """A user of a tenant with one token."""

    user_id: uuid.UUID
    email: str
    role: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        """Headers authenticating as this person."""
        return bearer(self.token)


@dataclass
class TenantFixture:
    """A tenant with an owner, and helpers to add people through the API."""

    id: uuid.UUID
    owner: Person
    client: FlaskClient
    people: list[Person] = field(default_factory=list)

    def add(self, role: str, *, by: Person | None = None) -> Person:
        """Create a user with ``role`` through ``POST /v1/users``."""
        email = f"{role}-{uuid.uuid4().hex[:8]}@example.com"
        response = self.client.post(
            "/v1/users", json={"email": email, "role": role}, headers=(by or self.owner).headers
        )
        assert response.status_code == 201, response.json
        body: dict[str, Any] = response.json or {}
        person = Person(uuid.UUID(body["id"]), email, role, body["token"])
        self.people.append(person)
        return person


@pytest.fixture
def make_tenant(db: Database, client: FlaskClient) -> Any:
    """Factory of tenants bootstrapped as the CLI does it."""

    def make(name: str = "acme") -> TenantFixture:
        email = f"owner-{uuid.uuid4().hex[:8]}@example.com"
        created = tenancy.create_tenant(db, name, email)
        owner = Person(created.user_id, email, "owner", created.token)
        return TenantFixture(created.tenant_id, owner, client)

    return make


@pytest.fixture
def tenant(make_tenant: Any) -> TenantFixture:
    """One fresh tenant."""
    fixture: TenantFixture = make_tenant()
    return fixture


def patient(settings: Settings) -> Settings:
    """The settings of the session's worker: its beat practically never reconciles, and sweeps webhook deliveries
    at the product's pace.

    Tests with workers of their own share this database. This worker's reconciler would take their runs onto its
    own queue and run them with the wrong settings: re-enqueue runs left queued while their worker is still booting,
    or reclaim the lease of a worker a durability test killed before that test's own reconciler does. So the tests
    that need a reconciler start a worker with beat of their own. The webhook sweep (retries, lost enqueues,
    reminders) runs every half second in the test settings, which costs a worker a few percent of a core for the
    whole session; only the webhook tests wait on it, and they sweep with a worker of their own.
    """
    return settings.replace(
        requeue_after=timedelta(seconds=600),
        reconcile_interval=timedelta(seconds=600),
        webhook_sweep_interval=timedelta(seconds=5),
    )


@pytest.fixture(scope="session")
def worker_process(settings: Settings) -> Any:
    """A real ``hango worker --beat`` on this session's queue, for every test that runs agents."""
    from tests.support.processes import worker

    with worker(patient(settings), concurrency=2, beat=True, name="session") as process:
        yield process


@pytest.fixture(scope="session")
def api_base(settings: Settings) -> Iterator[str]:
    """A real ``hango api`` on the session's settings, shared by the modules that need a server and no settings of
    their own (each test has tenants of its own): a server costs seconds of a core to start."""
    from tests.support.processes import api_server

    with api_server(settings) as base:
        yield base


@pytest.fixture
def far_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's clock 14 hours ahead of UTC: what it stores and compares must still be UTC."""
    monkeypatch.setenv("TZ", "HANGO-14")  # POSIX spelling of UTC+14, needs no time zone database
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def create_agent(client: FlaskClient, person: Person, script: list[dict[str, Any]], **config: Any) -> str:
    """Create a scripted agent through the API and return its id."""
    body = {
        "name": config.pop("name", f"agent-{uuid.uuid4().hex[:8]}"),
        "model": {"provider": "scripted", "script": script},
        "tools": config.pop(
            "tools", ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "count", "sleep", "slow_count"]
        ),
        **config,
    }
    response = client.post("/v1/agents", json=body, headers=person.headers)
    assert response.status_code == 201, response.json
    agent_id: str = response.json["id"]
    return agent_id


def start_run(client: FlaskClient, person: Person, agent_id: str, text: str = "go") -> str:
    """Start a run through the API and return its id."""
    response = client.post("/v1/runs", json={"agent_id": agent_id, "input": text}, headers=person.headers)
    assert response.status_code == 202, response.json
    assert response.json["state"] == "queued"
    run_id: str = response.json["id"]
    return run_id


def wait_for_state(
    client: FlaskClient, person: Person, run_id: str, states: set[str], timeout: float = 30
) -> dict[str, Any]:
    """Poll the run until it is in one of ``states``."""
    from tests.support.processes import wait_until

    def reached() -> dict[str, Any] | None:
        run: dict[str, Any] = client.get(f"/v1/runs/{run_id}", headers=person.headers).json
        return run if run["state"] in states else None

    result: dict[str, Any] = wait_until(reached, timeout=timeout)
    return result


def messages_of(client: FlaskClient, person: Person, run_id: str) -> list[dict[str, Any]]:
    """Every message of a run."""
    response = client.get(f"/v1/runs/{run_id}/messages?limit=200", headers=person.headers)
    assert response.status_code == 200, response.json
    items: list[dict[str, Any]] = response.json["items"]
    return items


CHROMIUM = "/usr/bin/chromium"
LIVE = 15_000  # ms: how long the page may take to show what the stream says


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright, for one module's browser tests."""
    from playwright.sync_api import expect, sync_playwright

    # What a page shows after a request or an event may take a while on a loaded machine: every expectation waits
    # as long as the live ones do, not Playwright's default of five seconds.
    expect.set_options(timeout=LIVE)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page of its own browser context (no cookie or storage shared with another test)."""
    context = browser.new_context()
    opened = context.new_page()
    yield opened
    context.close()
