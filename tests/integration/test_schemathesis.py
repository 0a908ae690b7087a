"""Property-based fuzzing of every operation in ``/openapi.json`` against the real app, in process (WSGI).

Schemathesis generates valid and invalid requests from the served OpenAPI document and checks that no response is
a server error and that every response (status, content type, body) is one the document declares. The run is
bounded and reproducible: a few derandomized examples per operation, no example database on disk.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from hango import tenancy
from hango.db import Database

EXAMPLES = 6  # per operation and mode: enough to find the classic failures, small enough to stay quick
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# A valid request to these opens a stream that lasts as long as the caller's authority: they are fuzzed with bad
# input only (their valid answers are read by test_approval_stream.py and test_stream_scale.py).
ENDLESS = {"/v1/approvals/events"}


@dataclass(frozen=True)
class Realm:
    """A tenant with real resources, so that fuzzed requests reach past the 404s into the handlers."""

    token: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def realm(app: Flask, db: Database) -> Realm:
    """An owner's token, an agent, a finished run (its event stream ends) and a member whose token may be revoked."""
    created = tenancy.create_tenant(db, "fuzzed", f"owner-{uuid.uuid4().hex[:8]}@example.com")
    client, headers = app.test_client(), {"Authorization": f"Bearer {created.token}"}
    agent = {"name": "fuzzed", "model": {"provider": "scripted", "script": []}}
    agent_id = client.post("/v1/agents", json=agent, headers=headers).json["id"]
    run_id = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers).json["id"]
    assert client.post(f"/v1/runs/{run_id}/cancel", headers=headers).status_code == 200
    member = client.post("/v1/users", json={"email": "m@example.com", "role": "member"}, headers=headers).json
    token_id = client.post(f"/v1/users/{member['id']}/tokens", headers=headers).json["id"]
    ids = {"agent_id": agent_id, "run_id": run_id, "user_id": member["id"], "token_id": token_id}
    return Realm(created.token, ids)


@pytest.fixture(scope="module")
def hypothesis_home() -> Iterator[None]:
    """Keep Hypothesis' caches (it writes some even without an example database) out of the repository."""
    with tempfile.TemporaryDirectory(prefix="hango-hypothesis-") as directory:
        set_hypothesis_home_dir(directory)
        try:
            yield
        finally:
            set_hypothesis_home_dir(None)


def _fuzz(operation: APIOperation, mode: GenerationMode, realm: Realm) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Case) -> None:
        for name in case.path_parameters or {}:
            if name in realm.ids:
                case.path_parameters[name] = realm.ids[name]
        case.call_and_validate(headers={"Authorization": f"Bearer {realm.token}"}, checks=CHECKS)

    run()


def test_every_operation_answers_what_the_openapi_document_declares(
    app: Flask, realm: Realm, hypothesis_home: None
) -> None:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    failures: list[str] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    for operation in operations:
        modes = [GenerationMode.NEGATIVE] if operation.path in ENDLESS else list(GenerationMode)
        for mode in modes:
            try:
                _fuzz(operation, mode, realm)
            except (AssertionError, BaseExceptionGroup) as error:  # report every operation, not only the first
                failures.append(f"{operation.label} ({mode.value}): {error}")
    assert not failures, "\n\n".join(failures)
