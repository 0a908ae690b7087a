"""Tracing: OpenTelemetry with the GenAI semantic conventions, exported over OTLP when configured (off by default).

Spans: the API's request spans (Flask instrumentation), the Celery publish and run spans, ``invoke_agent {agent}``
per loop execution (a run segment, or a subagent), ``chat {model}`` per model call, ``execute_tool {tool}`` per
tool call.

One pause and its resume make exactly two traces:

- trace A, started by the request that created the run: its Celery task, and the run's first ``invoke_agent``,
  which ends with ``hango.run.outcome = awaiting_approval``. The run's row keeps that span's context
  (``runs.trace_context``), so no span stays open while a human decides;
- trace B, started by the decide request: the task it enqueues (inside the request span, so the Celery headers
  carry trace B), and under it the resumed ``invoke_agent``.

A span's links cannot change once it has ended, and trace A's spans have all ended before anybody decides, so
every link between the two traces is made while trace B happens (:func:`link_decision`, :func:`resumed_links`):

- B to A: the decide request span (while it is open) and the resumed ``invoke_agent`` (as it starts) link to the
  suspended ``invoke_agent``;
- A to B: the decision adds one short span to trace A, ``decide_approvals``, a child of the suspended
  ``invoke_agent`` that links to the decide request span.

So from either trace a reader reaches the other through a span link. Both traces carry ``langfuse.session.id`` and
``gen_ai.conversation.id`` (the run id), so Langfuse groups them under one run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, TraceFlags

from hango.kernel.config import Settings

log = logging.getLogger(__name__)
_configured = False
# What a link says about the span it points to (OpenTelemetry has no standard attribute for it).
LINK_KIND = "hango.link.kind"


def tracer() -> trace.Tracer:
    """hango's tracer (a no-op one until tracing is configured)."""
    return trace.get_tracer("hango")


def tracing_enabled() -> bool:
    """Whether this process records spans: a tracer provider was installed (by :func:`configure_tracing`, or a test).

    Without one, OpenTelemetry's API hands out no-op tracers; instrumenting on top of them would only cost time.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def current_trace_id() -> str | None:
    """The active span's trace id as 32 hex digits, or ``None`` when no valid span is active."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")


def stored_context(span: SpanContext | None) -> dict[str, Any] | None:
    """What ``runs.trace_context`` keeps of a suspended run's span, so the traces after it can link to it."""
    if span is None or not span.is_valid:
        return None
    return {"trace_id": format(span.trace_id, "032x"), "span_id": format(span.span_id, "016x")}


def suspended_span(stored: Mapping[str, Any] | None) -> SpanContext | None:
    """The suspended run's span from ``runs.trace_context``; ``None`` when it was not traced."""
    if not stored or not stored.get("span_id") or not stored.get("trace_id"):
        return None
    return SpanContext(
        int(stored["trace_id"], 16),
        int(stored["span_id"], 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


def resumed_links(stored: Mapping[str, Any] | None) -> list[Link]:
    """The links of a resumed run's ``invoke_agent``: to the suspended one, when there was one."""
    suspended = suspended_span(stored)
    return [Link(suspended, {LINK_KIND: "suspended_run"})] if suspended is not None else []


def link_decision(stored: Mapping[str, Any] | None, run_id: str, decided: int, decided_by: str) -> None:
    """Join the current span (the decide request's) and the suspended run's trace, both ways.

    The current span gains a link to the suspended ``invoke_agent``; the suspended trace gains a
    ``decide_approvals`` span, a child of that ``invoke_agent``, linking to the current span. Nothing happens when
    either is missing (tracing off, or the run suspended while it was).
    """
    suspended = suspended_span(stored)
    current = trace.get_current_span()
    if suspended is None or not current.get_span_context().is_valid:
        return
    current.add_link(suspended, {LINK_KIND: "suspended_run"})
    attributes: dict[str, str | int] = {
        "hango.run.id": run_id,
        "hango.approval.count": decided,
        "hango.approval.decided_by": decided_by,
    }
    span = tracer().start_span(
        "decide_approvals",
        context=trace.set_span_in_context(NonRecordingSpan(suspended)),
        links=[Link(current.get_span_context(), {LINK_KIND: "decision"})],
        attributes=attributes,
    )
    span.end()


def configure_tracing(settings: Settings, service: str) -> None:
    """Install an OTLP-exporting tracer provider and the Celery instrumentation, once per process.

    Call it after forking (each gunicorn worker, each Celery pool process): the exporter's thread does not
    survive a fork. Without ``HANGO_OTLP_ENDPOINT`` nothing is installed and spans cost nothing.
    """
    global _configured
    if _configured or not settings.otlp_endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"hango-{service}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otlp_endpoint)))
    trace.set_tracer_provider(provider)
    CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]
    _configured = True
    log.info("tracing exported over OTLP", extra={"endpoint": settings.otlp_endpoint, "service": service})
