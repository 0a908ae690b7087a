"""Traces across a suspension: the pause ends the run's span, the resume starts a new trace linked to it."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hango import approvals, tenancy
from hango.agent.messages import user_message
from hango.auth import Principal
from hango.config import Settings
from hango.db import Database
from hango.models import Agent
from hango.run import service
from hango.run.runtime import Runtime
from hango.run.worker import execute_run

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def recording() -> None:
    # The global provider can be set once per process; spans of later tests are merely kept in memory.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


def _spans(name_prefix: str) -> list[ReadableSpan]:
    return [span for span in EXPORTER.get_finished_spans() if span.name.startswith(name_prefix)]


def test_a_suspension_ends_the_trace_and_the_resume_links_a_new_one(db: Database, settings: Settings) -> None:
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
    EXPORTER.clear()

    assert execute_run(runtime, run.id) == "suspended"
    [paused] = _spans("invoke_agent")
    assert paused.attributes["hango.run.outcome"] == "awaiting_approval"
    assert paused.attributes["langfuse.session.id"] == str(run.id)
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
    approvals.decide(runtime, owner, run.id, body)
    EXPORTER.clear()
    assert execute_run(runtime, run.id) == "finished"
    [resumed] = _spans("invoke_agent")
    assert resumed.parent is None, "a resume starts a new trace"
    assert resumed.context.trace_id != paused.context.trace_id
    assert [link.context.span_id for link in resumed.links] == [paused.context.span_id]
    assert resumed.attributes["hango.run.resumed_from_span_id"] == format(paused.context.span_id, "016x")
    assert resumed.attributes["hango.run.suspension_seconds"] >= 0
    assert resumed.attributes["langfuse.session.id"] == str(run.id)
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
    db: Database, settings: Settings, make_tenant: object
) -> None:
    import http.server
    import os
    import threading

    from hango.api import create_app
    from tests.integration.conftest import create_agent, start_run, wait_for_state
    from tests.support.processes import wait_until, worker

    received: list[str] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            received.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}", otlp_endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces"
    )
    client = create_app(own, db=db).test_client()
    tenant = make_tenant("otlp")  # type: ignore[operator]
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    try:
        with worker(own, concurrency=1, beat=False, name="otlp"):
            run_id = start_run(client, tenant.owner, create_agent(client, tenant.owner, [{"text": "hi"}]))
            assert wait_for_state(client, tenant.owner, run_id, {"succeeded", "failed"})["state"] == "succeeded"
            wait_until(lambda: "/v1/traces" in received, timeout=20)
    finally:
        os.environ.pop("OTEL_BSP_SCHEDULE_DELAY", None)
        server.shutdown()
