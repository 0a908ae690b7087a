"""A schemathesis run over ``/openapi.json``: every phase of its command line (coverage, fuzzing, stateful) and every
check, against the real app served over HTTP by a thread of this process. The test fails on any finding.

The checks: ``not_a_server_error``, ``status_code_conformance``, ``content_type_conformance``,
``response_headers_conformance``, ``response_schema_conformance``, ``positive_data_acceptance`` (a request the
document allows is not refused with a 400), ``negative_data_rejection`` (a request it forbids is refused),
``missing_required_header``, ``unsupported_method``, ``allow_header_conformance``, ``use_after_free``,
``ensure_resource_availability``, ``ignored_auth`` and ``object_level_authorization`` (another tenant's owner reads
nothing of this one's). One operation is not fuzzed, deleting a thread (``UNFUZZED`` says why), and
``max_response_time`` is the one check left off: it asserts a wall-clock limit, which the suite
never does (speed is measured in ``bench/``), and the test timeout already bounds a request that hangs.

The app is served over HTTP rather than called as WSGI because schemathesis' WSGI transport breaks on the probes of
``ignored_auth`` and ``object_level_authorization`` (they keep ``max_redirects``, which werkzeug's test client
refuses). ``HANGO_SCHEMATHESIS_EXAMPLES`` sets the examples per operation: a few in the suite, hundreds or more
for a search (README.md, "Tests and benchmarks").
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from flask import Flask
from hypothesis.errors import FailedHealthCheck
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events, from_schema
from schemathesis.openapi.checks import RejectedPositiveData
from werkzeug.serving import WSGIRequestHandler, make_server

from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import PendingApproval
from hango.platform.db import Database
from hango.services import tenancy
from tests.support.processes import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("worker_process")]

EXAMPLES = int(os.environ.get("HANGO_SCHEMATHESIS_EXAMPLES", "4"))
# A 413 refuses a body for its size in bytes, which no JSON Schema keyword states: it is how the server refuses both
# a schema-violating body and a valid one past HANGO_MAX_BODY_BYTES (documented on every operation with a body).
NEGATIVE_REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
POSITIVE_ANSWERS = ["2xx", "3xx", "401", "403", "404", "409", "413", "429", "5xx"]
# A run's event stream is read up to its first event: the realm's run has ended, and a run the fuzzer starts has its
# run.queued; so is a thread's, whose first run has ended in the realm. The tenant's approval stream never ends and
# the realm has no approvals: a valid request to it is read until the stream has been silent for STREAM_SILENCE, so
# it gets invalid ones only, but from the stateful phase (its parameters' patterns are tested in
# tests/unit/test_openapi_rules.py; test_approval_stream.py reads its answers). The server's keep-alives come more
# rarely than that silence, and the first bytes have that long to arrive.
STREAM_SILENCE = timedelta(seconds=2)
STREAMS = [
    {"include-path": "/v1/approvals/events", "generation": {"mode": "negative"}},
    {"include-path-regex": "/events$", "max-stream-events": 1, "request-timeout": STREAM_SILENCE.total_seconds()},
]
# Left out: deleting a thread. Every thread route is given the realm's thread (its id is pinned, and, as its
# failures showed, the stateful phase uses it too), so a DELETE that succeeds turns every later thread request into
# a 404, which the stateful phase reports as a resource it just created going missing. Deleting is tested in
# test_thread_rules.py (what goes with a thread, 409 while a run is active), test_bad_input.py and the tenancy suite.
UNFUZZED = [{"include-path": "/v1/threads/{thread_id}", "include-method": "DELETE", "enabled": False}]
# Webhook targets that need no name resolution: whether a name resolves is the network's answer, not the document's.
WEBHOOK_URLS = ["https://203.0.113.10/hook", "https://10.1.2.3:8443/hango?x=1", "http://192.168.7.7/hook"]


@dataclass(frozen=True)
class Unstated:
    """A rule JSON Schema cannot state, which the document says in words: a schema-valid request breaking it is a
    400 naming ``field`` (a regular expression) with a ``message`` matching ``message``."""

    operations: tuple[str, ...]
    field: str
    message: str

    def covers(self, operation: str, error: dict[str, Any]) -> bool:
        """Whether this rule explains one field error of a refused request."""
        return (
            operation in self.operations
            and re.fullmatch(self.field, str(error.get("field")), re.DOTALL) is not None
            and re.search(self.message, str(error.get("message")), re.DOTALL) is not None
        )


AGENTS = ("POST /v1/agents", "PUT /v1/agents/{agent_id}")
DECIDE = ("POST /v1/runs/{run_id}/approvals",)
MCP_SERVERS = ("POST /v1/mcp-servers", "PUT /v1/mcp-servers/{name}")
DECISION = r"decisions\[\d+\]"
UNSTATED = [
    # Keywords constrain every item of an array alike, or whole items: not its last one, nor one property of each.
    Unstated(("POST /v1/runs", "POST /v1/threads/{thread_id}/runs"), "messages", "must end with a user message"),
    # What exists: the thread's agent, its conversation's numbers.
    Unstated(("POST /v1/runs",), "agent_id", "belongs to agent"),
    Unstated(
        ("POST /v1/threads/{thread_id}/fork",),
        "up_to_seq",
        "no messages yet|must be between|is not the seq|followed by the results",
    ),
    # Sizes in bytes of compact JSON.
    Unstated(("POST /v1/threads", "PATCH /v1/threads/{thread_id}"), "metadata", "bytes as JSON"),
    Unstated(AGENTS, "subagents", "subagent names must be unique"),
    Unstated(AGENTS, r"(subagents\[\d+\]\.)?model\.script\[\d+\]\.tool_calls\[\d+\]\.id", "is used twice"),
    # Whether a path climbs above / counts its `..` against its depth: not a regular language.
    Unstated(("GET /v1/agents/{agent_id}/files",), "prefix", "escapes /"),
    # JSON Schema's integers include 5.0, which the rules' whole numbers (read as JSON numbers with no fraction) do not.
    Unstated(AGENTS, r"(subagents\[\d+\]\.)?interrupt_on\..*\.(approvals_required|size_over)", "whole number"),
    Unstated(("POST /v1/grants",), r"when\..*\.size_over", "must be a whole number"),
    Unstated(DECIDE, rf"{DECISION}\.remember\.when\..*\.size_over", "must be a whole number"),
    # Sizes in bytes of compact JSON.
    Unstated(("POST /v1/grants",), "when", "bytes of JSON, over"),
    Unstated(DECIDE, rf"{DECISION}\.remember\.when", "bytes of JSON, over"),
    # What exists: the run's calls, an agent's runs, what a name resolves to.
    Unstated(("POST /v1/grants",), "run_id", "is a run of another agent|is your own run"),
    # Whether a grant could ever apply: the agent's rules (and the caller's place among their reviewers).
    Unstated(("POST /v1/grants",), "tool_name", "would never apply"),
    Unstated(("POST /v1/webhooks",), "url", "does not resolve|resolves to|plain http only to a private address"),
    Unstated(MCP_SERVERS, "url", "does not resolve|resolves to|plain http only to a private address"),
    # Header names are case-insensitive, and hango's MCP client sets some itself: not a pattern of a key alone.
    Unstated(MCP_SERVERS, r"headers\..+", "is given twice|is set by hango's MCP client"),
    Unstated(("PUT /v1/mcp-servers/{name}",), "name", "the server's name in the URL"),
    Unstated(DECIDE, rf"{DECISION}\.(approval_id|tool_call_id)", "no such approval|no pending call|different calls"),
    Unstated(DECIDE, DECISION, "is named twice"),
    Unstated(DECIDE, rf"{DECISION}\.decision", "is not allowed for|only approve or reject is a vote"),
    Unstated(DECIDE, rf"{DECISION}\.args\..+", ".*"),  # the named call's tool checks the arguments of an edit
    Unstated(DECIDE, rf"{DECISION}\.args", "is not available|leave the scope"),
    Unstated(DECIDE, rf"{DECISION}\.remember(\.when)?", "never remembered|has no arguments|does not match the call"),
]


@dataclass(frozen=True)
class Realm:
    """A tenant with real resources, so that fuzzed requests reach past the 404s into the handlers."""

    token: str
    ids: dict[str, str]


def _populate(app: Flask, token: str) -> dict[str, str]:
    client, headers = app.test_client(), {"Authorization": f"Bearer {token}"}
    agent = {"name": "fuzzed", "model": {"provider": "scripted", "script": []}}
    agent_id = client.post("/v1/agents", json=agent, headers=headers).json["id"]
    run_id = client.post("/v1/runs", json={"agent_id": agent_id, "input": "go"}, headers=headers).json["id"]
    # A worker of this test process (another module's) may have taken the run and finished it first, its script
    # being empty: a 409 then says it is already finished, which is all this run is for.
    cancelled = client.post(f"/v1/runs/{run_id}/cancel", headers=headers)
    assert cancelled.status_code in (200, 409), cancelled.json
    member = client.post("/v1/users", json={"email": "m@example.com", "role": "member"}, headers=headers).json
    token_id = client.post(f"/v1/users/{member['id']}/tokens", headers=headers).json["id"]
    thread_id = client.post("/v1/threads", json={"agent_id": agent_id}, headers=headers).json["id"]
    # A thread's stream stays open while the thread exists: a run of it, ended, gives the stream an event to read.
    # The run is played to its end before the fuzzing starts. While it raced a worker of another module, the
    # coverage phase now and then took a fork at up_to_seq 2 for one past a bound (the schema declares none) and
    # the fork succeeded: a conversation still changing while schemathesis learns from the answers is our reading.
    thread_run = client.post(f"/v1/threads/{thread_id}/runs", json={"input": "go"}, headers=headers).json["id"]
    wait_until(lambda: client.get(f"/v1/runs/{thread_run}", headers=headers).json["state"] == "succeeded")
    ids = {"agent_id": agent_id, "run_id": run_id, "user_id": member["id"], "token_id": token_id}
    return {**ids, "thread_id": thread_id}


def _approval(db: Database, tenant_id: uuid.UUID, run_id: str) -> str:
    """A cancelled approval of the realm's run, so that the approval and preview routes reach their handlers (a run
    suspends only under a worker; its row is what the routes read)."""
    row = PendingApproval(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        run_id=uuid.UUID(run_id),
        turn=1,
        tool_call_id="w",
        tool_name="write_file",
        arguments={"file_path": "/memories/AGENTS.md", "content": "fuzzed"},
        allowed_decisions=["approve", "reject"],
        state="cancelled",
    )
    with db.transaction() as session:
        session.add(row)
    return str(row.id)


@pytest.fixture(scope="module")
def realm(app: Flask, db: Database) -> Realm:
    """An owner's token, an agent, a finished run (its event stream ends) with an approval, and a member whose token
    may be revoked."""
    created = tenancy.create_tenant(db, "fuzzed", f"owner-{uuid.uuid4().hex[:8]}@example.com")
    ids = _populate(app, created.token)
    return Realm(created.token, ids | {"approval_id": _approval(db, created.tenant_id, ids["run_id"])})


@pytest.fixture(scope="module")
def stranger(app: Flask, db: Database) -> Realm:
    """The owner of another tenant, who must see nothing of the realm."""
    created = tenancy.create_tenant(db, "stranger", f"owner-{uuid.uuid4().hex[:8]}@example.com")
    return Realm(created.token, _populate(app, created.token))


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """Thousands of requests: their lines would drown a failure's report."""


@pytest.fixture(scope="module")
def server(settings: Settings, db: Database) -> Iterator[str]:
    """The app served over HTTP on the loopback interface by a thread of this process."""
    app = create_app(settings.replace(sse_keepalive=STREAM_SILENCE * 2), db=db)
    http = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_QuietHandler)
    thread = threading.Thread(target=http.serve_forever, name="schemathesis-api", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_port}"
    finally:
        http.shutdown()
        thread.join()


def _identities(folder: Path, people: dict[str, Realm]) -> Path:
    """A Web Fuzzing Commons file naming each tenant owner's token."""
    path = folder / "identities.json"
    auth = [
        {"name": name, "fixedHeaders": [{"name": "Authorization", "value": f"Bearer {who.token}"}]}
        for name, who in people.items()
    ]
    path.write_text(json.dumps({"auth": auth}))
    return path


def _config(realm: Realm, identities: Path) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": 1,
            "suppress-health-check": ["all"],
            "cache": {"enabled": False},
            "workers": 1,
            "continue-on-failure": True,
            "request-timeout": 10,
            "checks": {
                "enabled": True,
                "negative_data_rejection": {"expected-statuses": NEGATIVE_REFUSALS},
                "positive_data_acceptance": {"expected-statuses": POSITIVE_ANSWERS},
            },
            # Every string the server stores or compares refuses a NUL (U+0000), in any field and at any depth of
            # a free-form value; JSON Schema has no keyword for "anywhere", so the document says it in words and
            # tests/integration/test_bad_input.py sends NULs everywhere.
            "generation": {"max-examples": EXAMPLES, "mode": "all", "database": "none", "allow-x00": False},
            "auth": {"wfc": {"path": str(identities), "user": "realm", "peers": ["realm", "stranger"]}},
            "parameters": {
                **{f"path.{name}": value for name, value in realm.ids.items()},
                "body.agent_id": {"dictionary": "agents"},
                "body.url": {"dictionary": "webhook-urls"},
            },
            "dictionaries": {"agents": {"values": [realm.ids["agent_id"]]}, "webhook-urls": {"values": WEBHOOK_URLS}},
            "operations": [*STREAMS, *UNFUZZED],
        }
    )


def _keeps(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Whether a failure stands: a 400 to a schema-valid request stands unless every field it names broke a rule
    the document can only say in words."""
    if not isinstance(failure, RejectedPositiveData) or response.status_code != 400:
        return True
    errors = json.loads(response.content or b"{}").get("errors") or []
    label = case.operation.label
    return not errors or not all(any(rule.covers(label, error) for rule in UNSTATED) for error in errors)


def _findings(event: Any) -> list[str]:
    if isinstance(event, events.ScenarioFinished):
        return [
            _finding(event, case_id, node)
            for case_id, nodes in event.recorder.checks.items()
            for node in nodes
            if node.failure_info is not None
        ]
    if isinstance(event, events.NonFatalError) and _too_large_to_draw(event.value):
        return []
    if isinstance(event, events.NonFatalError | events.FatalError):
        return [f"error: {getattr(event, 'label', '')} {event.info.traceback}"]
    if isinstance(event, events.EngineFinished):
        return [str(failure) for failure in event.failures]
    return []


def _too_large_to_draw(error: BaseException) -> bool:
    """Hypothesis cannot draw the 1,001 items that break a list's ``maxItems: 1000`` (decisions, messages): its
    smallest such input overruns its buffer. tests/integration/test_problems.py sends them."""
    return isinstance(error, FailedHealthCheck) and str(error).startswith("Minimum possible example is too large")


def _finding(event: Any, case_id: str, node: Any) -> str:
    interaction = event.recorder.interactions.get(case_id)
    response = interaction.response if interaction is not None else None
    answer = f"{response.status_code} {response.content[:400]!r}" if response is not None else "no response"
    return (
        f"{event.recorder.label} ({event.phase.value}) {node.name}: {node.failure_info.failure}\n"
        f"{node.failure_info.code_sample[:800]}\n-> {answer}"
    )


def test_every_operation_answers_what_the_openapi_document_declares(
    server: str, realm: Realm, stranger: Realm, tmp_path: Path
) -> None:
    identities = _identities(tmp_path, {"realm": realm, "stranger": stranger})
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json", config=_config(realm, identities))
    schema.hook("filter_failure")(_keeps)
    assert len(list(schema.get_all_operations())) >= 20
    findings: list[str] = []
    cases: Counter[str] = Counter()
    for event in from_schema(schema).execute():
        findings += _findings(event)
        if isinstance(event, events.ScenarioFinished):
            cases[event.phase.value] += len(event.recorder.cases)
    print(f"schemathesis, {EXAMPLES} examples per operation: {dict(cases)} cases")  # shown by pytest -s
    assert sum(cases.values()) > 0
    assert not findings, "\n\n".join(dict.fromkeys(findings))
    # The realm's thread, which every thread route is given, outlived the fuzzing.
    headers = {"Authorization": f"Bearer {realm.token}"}
    assert httpx.get(f"{server}/v1/threads/{realm.ids['thread_id']}", headers=headers).status_code == 200
