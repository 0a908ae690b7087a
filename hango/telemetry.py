"""Tracing: OpenTelemetry with the GenAI semantic conventions, exported over OTLP when configured (off by default).

Spans: ``invoke_agent {agent}`` per loop execution (a run segment, or a subagent), ``chat {model}`` per model call,
``execute_tool {tool}`` per tool call. A suspension ends the run's span with ``hango.run.outcome =
awaiting_approval``; the resume starts a new trace whose root links to the suspended one, and both carry
``langfuse.session.id`` so Langfuse groups them under one run.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

from hango.config import Settings

log = logging.getLogger(__name__)
_configured = False


def tracer() -> trace.Tracer:
    """hango's tracer (a no-op one until tracing is configured)."""
    return trace.get_tracer("hango")


def current_trace_id() -> str | None:
    """The active span's trace id as 32 hex digits, or ``None`` when no valid span is active."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")


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
