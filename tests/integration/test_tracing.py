"""Traces across a suspension: a pause and its resume are two traces, linked both ways, that the audit joins."""

from __future__ import annotations

import http.client
import io
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from hango.agent.messages import user_message
from hango.api import create_app
from hango.api.decision_requests import read_request
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.logs import JsonFormatter
from hango.kernel.models import Agent, AuditEvent, Run
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service
from hango.run.worker import execute_run
from hango.services import approvals, tenancy
from hango.services.tenancy import NewTenant
from tests.integration.conftest import Person, bearer, create_agent, start_run, wait_for_state
from tests.support.otlp import ReceivedSpan, receiver
from tests.support.processes import ROOT, api_server, log_path, settings_env, wait_until, worker

pytestmark = pytest.mark.slow

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def recording() -> None:
    # The global provider can be set once per process; spans of later tests are merely kept in memory.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


def _spans(name_prefix: str) -> list[ReadableSpan]:
    return [span for span in EXPORTER.get_finished_spans() if span.name.startswith(name_prefix)]


@contextmanager
def _json_log(logger: str) -> Iterator[list[dict[str, Any]]]:
    """The lines ``logger`` writes meanwhile, formatted as hango formats them (when they are logged)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    target = logging.getLogger(logger)
    target.addHandler(handler)
    level = target.level
    target.setLevel(logging.INFO)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        target.removeHandler(handler)
        target.setLevel(level)
        lines.extend(json.loads(line) for line in stream.getvalue().splitlines())


def _suspended_run(db: Database, settings: Settings) -> tuple[Runtime, NewTenant, uuid.UUID]:
    """A run waiting for a decision on its call ``w`` (a write to a protected path), driven in this process."""
    runtime = Runtime.build(settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}"), db=db)
    created = tenancy.create_tenant(db, "traced", f"o-{uuid.uuid4().hex[:6]}@example.com")
    owner = Principal(created.tenant_id, created.user_id, "owner")
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=owner.tenant_id,
        name="tracer",
        created_by=owner.user_id,
        interrupt_on={},
        subagents=[],
        system_prompt="",
        max_turns=5,
        tools=["write_file"],
        model={
            "provider": "scripted",
            "script": [
                {
                    "tool_calls": [
                        {
                            "id": "w",
                            "name": "write_file",
                            "args": {"file_path": "/memories/AGENTS.md", "content": "s3cret"},
                        }
                    ]
                },
                {"text": "done"},
            ],
        },
    )
    with db.transaction() as session:
        session.add(agent)
    run = service.create_run(runtime, owner, agent.id, [user_message("go")])
    assert execute_run(runtime, run.id) == "suspended"
    return runtime, created, run.id


def test_a_suspension_ends_the_trace_and_the_resume_links_a_new_one(db: Database, settings: Settings) -> None:
    EXPORTER.clear()
    runtime, created, run_id = _suspended_run(db, settings)
    owner = Principal(created.tenant_id, created.user_id, "owner")
    [paused] = _spans("invoke_agent")
    assert paused.attributes["hango.run.outcome"] == "awaiting_approval"
    assert paused.attributes["langfuse.session.id"] == str(run_id)
    [waiting] = _spans("execute_tool")
    assert waiting.attributes["hango.tool.outcome"] == "awaiting_approval"
    [requested] = [event for event in waiting.events if event.name == "tool.approval_requested"]
    assert requested.attributes["gen_ai.tool.call.id"] == "w"
    assert list(requested.attributes["hango.approval.allowed_decisions"]) == ["approve", "edit", "reject", "respond"]
    assert _spans("chat scripted")

    body = {
        "decisions": [
            {"tool_call_id": "w", "decision": "edit", "args": {"file_path": "/memories/AGENTS.md", "content": "other"}}
        ]
    }
    audit_trace = uuid.uuid4().hex
    with _json_log("hango.services.approvals") as lines:
        approvals.decide(runtime, owner, run_id, read_request(body), audit_trace)
    # Outside any span (tracing off, or no request), the decision's line still names its audit row's trace.
    [logged] = [line for line in lines if line["message"] == "approval decided"]
    assert logged["trace_id"] == audit_trace
    EXPORTER.clear()
    assert execute_run(runtime, run_id) == "finished"
    [resumed] = _spans("invoke_agent")
    # Driven here, with no Celery task span around it, the resumed loop is a trace's root.
    assert resumed.parent is None
    assert resumed.context.trace_id != paused.context.trace_id
    assert [link.context.span_id for link in resumed.links] == [paused.context.span_id]
    assert resumed.attributes["hango.run.resumed_from_span_id"] == format(paused.context.span_id, "016x")
    assert resumed.attributes["hango.run.suspension_seconds"] >= 0
    assert resumed.attributes["langfuse.session.id"] == str(run_id)
    assert resumed.attributes["hango.run.outcome"] == "done"
    [executed] = _spans("execute_tool")
    [decided] = [event for event in executed.events if event.name == "tool.approval_decided"]
    assert (decided.attributes["hango.approval.decision"], decided.attributes["hango.approval.args_changed"]) == (
        "edit",
        True,
    )
    assert decided.attributes["hango.approval.decided_by"] == str(owner.user_id)
    recorded = str([(s.attributes, [e.attributes for e in s.events]) for s in EXPORTER.get_finished_spans()])
    assert "s3cret" not in recorded
    assert "other" not in recorded


def test_a_worker_exports_its_spans_over_otlp_when_configured(
    db: Database, settings: Settings, make_tenant: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with receiver() as otlp:
        own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", otlp_endpoint=otlp.endpoint)
        tenant = make_tenant("otlp")
        with worker(own, concurrency=1, beat=False, name="otlp"):
            client = create_app(own, db=db).test_client()
            run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "hi"}]))
            assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
            [done] = wait_until(lambda: otlp.named("invoke_agent"), timeout=20)
    assert (done.service, done.attributes["hango.run.id"]) == ("hango-worker", run_id)


def test_refused_decisions_are_audited_with_the_trace_of_their_request(db: Database, settings: Settings) -> None:
    runtime, created, run_id = _suspended_run(db, settings)
    # Built after this module installed a tracer provider, so it traces its requests into EXPORTER.
    client = create_app(runtime.settings, db=db).test_client()
    owner = bearer(created.token)
    response = client.post(
        "/v1/users", json={"email": f"m-{uuid.uuid4().hex[:6]}@example.com", "role": "member"}, headers=owner
    )
    member = bearer(response.json["token"])
    EXPORTER.clear()
    # A member cannot see the owner's run (a 404 the audit hook records); an edit without arguments is a 400 that
    # the decision service records.
    approve = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
    assert client.post(f"/v1/runs/{run_id}/approvals", json=approve, headers=member).status_code == 404
    no_args = {"decisions": [{"tool_call_id": "w", "decision": "edit"}]}
    assert client.post(f"/v1/runs/{run_id}/approvals", json=no_args, headers=owner).status_code == 400
    hidden, invalid = _spans("POST /v1/runs/<uuid:run_id>/approvals")
    with db.transaction() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.tenant_id == created.tenant_id, AuditEvent.action == "approval.decide")
        )
        by_target = {(row.target_kind, row.outcome): row.trace_id for row in rows}
    assert by_target == {
        ("run", "error"): format(hidden.context.trace_id, "032x"),
        ("pending_approval", "error"): format(invalid.context.trace_id, "032x"),
    }


@pytest.mark.parametrize(("endpoint", "instrumented"), [(None, "False"), ("http://127.0.0.1:9/v1/traces", "True")])
def test_the_api_traces_its_requests_only_when_tracing_is_configured(
    settings: Settings, endpoint: str | None, instrumented: str
) -> None:
    # A process of its own: this one has a tracer provider installed already. No request is made, so the endpoint
    # is never contacted.
    code = (
        "from hango.api.wsgi import app_from_env\n"
        "print(getattr(app_from_env(), '_is_instrumented_by_opentelemetry', False))"
    )
    env = settings_env(settings.replace(otlp_endpoint=endpoint))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == instrumented


# One pause and its resume, through the real API server and a real worker, both exporting to one receiver.
CREATE, DECIDE = "POST /v1/runs", "POST /v1/runs/<uuid:run_id>/approvals"
PUBLISH, TASK = "apply_async/hango.run", "run/hango.run"
TWO_WRITES = [
    {
        "tool_calls": [
            {"id": "same", "name": "write_file", "args": {"file_path": "/memories/a.md", "content": "one"}},
            {"id": "other", "name": "write_file", "args": {"file_path": "/memories/b.md", "content": "two"}},
        ]
    },
    {"text": "done"},
]
# Both calls edited: one given back with the model's arguments (in another key order), one really changed.
EDITS = {
    "decisions": [
        {"tool_call_id": "same", "decision": "edit", "args": {"content": "one", "file_path": "/memories/a.md"}},
        {"tool_call_id": "other", "decision": "edit", "args": {"file_path": "/memories/b.md", "content": "2"}},
    ]
}


@dataclass(frozen=True)
class Cycle:
    """What one traced pause and resume left: the spans, the audit rows and the API's log lines."""

    run_id: str
    spans: list[ReceivedSpan]
    audit: list[AuditEvent]
    api_log: list[dict[str, Any]]

    def one(self, name: str, **attributes: Any) -> ReceivedSpan:
        """The only span named ``name`` with these attributes."""
        [span] = [
            span
            for span in self.spans
            if span.name == name and all(span.attributes.get(key) == value for key, value in attributes.items())
        ]
        return span

    def by_id(self, span_id: str | None) -> ReceivedSpan:
        """The span with this id."""
        [span] = [span for span in self.spans if span.span_id == span_id]
        return span


@pytest.fixture(scope="module")
def cycle(settings: Settings, db: Database, app: Flask) -> Iterator[Cycle]:
    """A run that suspends on two calls, both decided with edits through ``hango api``, then finishes."""
    with pytest.MonkeyPatch.context() as patch, receiver() as otlp:
        patch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        own = settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}", otlp_endpoint=otlp.endpoint)
        created = tenancy.create_tenant(db, "traced", f"o-{uuid.uuid4().hex[:6]}@example.com")
        owner = Person(created.user_id, "", "owner", created.token)
        # The agent is made in this process, so that the receiver gets only the two requests of the cycle.
        agent_id = create_agent(app.test_client(), owner, TWO_WRITES, tools=["write_file"])
        with worker(own, concurrency=1, beat=False, name="traces"):
            with api_server(own) as base:
                status, run = _call(base, "POST", "/v1/runs", owner.token, {"agent_id": agent_id, "input": "go"})
                assert status == 202, run
                _wait_for(db, run["id"], "awaiting_approval")
                status, decided = _call(base, "POST", f"/v1/runs/{run['id']}/approvals", owner.token, EDITS)
                assert status == 200, decided
                _wait_for(db, run["id"], "succeeded")
            # The API has stopped, and a process that stops exports what it still holds: its spans are all here.
            # The worker's are once both tasks and all four tool calls (two waiting, two executed) have arrived.
            wait_until(lambda: len(otlp.named(TASK)) == 2 and len(otlp.named("execute_tool")) == 4, timeout=20)
        with db.transaction() as session:
            audit = list(session.scalars(select(AuditEvent).where(AuditEvent.tenant_id == created.tenant_id)))
            session.expunge_all()
        log = log_path(f"hango-test-api-{base.rsplit(':', 1)[1]}").read_text().splitlines()
        yield Cycle(run["id"], otlp.spans(), audit, [json.loads(line) for line in log if line.startswith("{")])


def test_a_pause_and_its_resume_are_exactly_two_traces(cycle: Cycle) -> None:
    created, decided = cycle.one(CREATE), cycle.one(DECIDE)
    suspended = trace_a = created.trace_id
    resumed = trace_b = decided.trace_id
    assert trace_a != trace_b
    assert {span.trace_id for span in cycle.spans} == {trace_a, trace_b}
    # Trace A: the creating request, its publish, the task it started and the run's loop until it suspended.
    [paused] = [s for s in cycle.spans if s.name.startswith("invoke_agent") and s.trace_id == suspended]
    assert paused.attributes["hango.run.outcome"] == "awaiting_approval"
    first_task = cycle.by_id(paused.parent_span_id)
    assert (first_task.name, first_task.trace_id) == (TASK, trace_a)
    assert cycle.by_id(first_task.parent_span_id).name == PUBLISH
    assert cycle.by_id(cycle.by_id(first_task.parent_span_id).parent_span_id) == created
    # Trace B: the decide request, the publish inside it, the task, and the resumed loop under that task.
    [finished] = [s for s in cycle.spans if s.name.startswith("invoke_agent") and s.trace_id == resumed]
    assert finished.attributes["hango.run.outcome"] == "done"
    second_task = cycle.by_id(finished.parent_span_id)
    assert (second_task.name, second_task.trace_id) == (TASK, trace_b)
    publish = cycle.by_id(second_task.parent_span_id)
    assert (publish.name, publish.parent_span_id) == (PUBLISH, decided.span_id)
    assert (created.service, decided.service, paused.service, finished.service) == (
        "hango-api",
        "hango-api",
        "hango-worker",
        "hango-worker",
    )


def test_the_two_traces_link_to_each_other(cycle: Cycle) -> None:
    [paused] = [s for s in cycle.spans if s.attributes.get("hango.run.outcome") == "awaiting_approval"]
    [finished] = [s for s in cycle.spans if s.attributes.get("hango.run.outcome") == "done"]
    decided = cycle.one(DECIDE)
    to_paused = (paused.trace_id, paused.span_id, {"hango.link.kind": "suspended_run"})
    # B to A: the resumed loop and the decide request both link to the suspended loop.
    assert [(link.trace_id, link.span_id, link.attributes) for link in finished.links] == [to_paused]
    assert [(link.trace_id, link.span_id, link.attributes) for link in decided.links] == [to_paused]
    assert finished.attributes["hango.run.resumed_from_span_id"] == paused.span_id
    assert finished.attributes["hango.run.suspension_seconds"] >= 0
    # A to B: the decision left a span in the suspended trace, under the suspended loop, linking to the request.
    marker = cycle.one("decide_approvals")
    assert (marker.trace_id, marker.parent_span_id) == (paused.trace_id, paused.span_id)
    assert [(link.trace_id, link.span_id, link.attributes) for link in marker.links] == [
        (decided.trace_id, decided.span_id, {"hango.link.kind": "decision"})
    ]
    assert marker.attributes["hango.approval.count"] == 2


def test_the_decision_audit_rows_and_log_lines_carry_the_decide_request_trace(cycle: Cycle) -> None:
    decided = cycle.one(DECIDE)
    rows = [row for row in cycle.audit if row.action == "approval.decide"]
    assert len(rows) == 2
    assert {row.trace_id for row in rows} == {decided.trace_id}
    [created] = [row for row in cycle.audit if row.action == "run.create"]
    assert created.trace_id == cycle.one(CREATE).trace_id
    lines = [line for line in cycle.api_log if line.get("message") == "approval decided"]
    assert sorted(line["tool_call_id"] for line in lines) == ["other", "same"]
    assert {line["trace_id"] for line in lines} == {decided.trace_id}


def test_the_spans_carry_the_gen_ai_attributes(cycle: Cycle) -> None:
    loops = [span for span in cycle.spans if span.name.startswith("invoke_agent")]
    assert len(loops) == 2
    for loop in loops:
        assert loop.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert loop.attributes["gen_ai.provider.name"] == "scripted"
        assert loop.attributes["gen_ai.conversation.id"] == cycle.run_id
        assert loop.attributes["langfuse.session.id"] == cycle.run_id
    tools = [span for span in cycle.spans if span.name.startswith("execute_tool")]
    assert sorted(span.attributes["hango.tool.outcome"] for span in tools) == ["awaiting_approval"] * 2 + ["ok"] * 2
    assert {span.attributes["gen_ai.tool.type"] for span in tools} == {"function"}


def test_the_span_and_the_audit_row_agree_on_whether_an_edit_changed_the_arguments(cycle: Cycle) -> None:
    on_spans = {
        span.attributes["gen_ai.tool.call.id"]: span.events["tool.approval_decided"]["hango.approval.args_changed"]
        for span in cycle.spans
        if "tool.approval_decided" in span.events
    }
    decided = [row for row in cycle.audit if row.action == "approval.decide"]
    in_audit = {row.detail["tool_call_id"]: row.detail["args_changed"] for row in decided}
    assert on_spans == in_audit == {"same": False, "other": True}
    assert "two" not in str([(span.attributes, span.events) for span in cycle.spans])


def _call(base: str, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def _wait_for(db: Database, run_id: str, state: str) -> None:
    # Read from the database, not through the API: a poll would be a request span of its own.
    def reached() -> bool:
        with db.transaction() as session:
            run = session.get(Run, uuid.UUID(run_id))
            assert run is not None
            assert run.state not in {"failed", "cancelled"}, run.error
            return run.state == state

    wait_until(reached, timeout=30)
