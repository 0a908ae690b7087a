"""Tracing helpers shared by the API and the workers."""

from __future__ import annotations

from opentelemetry import trace


def current_trace_id() -> str | None:
    """The active span's trace id as 32 hex digits, or ``None`` when no valid span is active."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x")
