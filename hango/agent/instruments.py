"""What a worker measures as it works: task, model call and tool call latency, and model tokens.

These are counted where the work happens, unlike the stored-state series of :mod:`hango.services.metrics`, which any API
process computes from PostgreSQL. ``hango worker`` shares them across its pool processes through
:mod:`hango.processes.multiprocess_metrics` and serves them on ``HANGO_WORKER_METRICS_PORT``.

Labels take values from fixed sets only (task names, providers, the tool registry), never from a tenant's
configuration or a model's output, so nobody outside the operator can add series. The instruments are built on
first use, not at import, and live in a registry of their own that no endpoint serves directly.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

from hango.agent.models.factory import PROVIDERS

TOKEN_TYPES = ("input", "output")
UNKNOWN = "unknown"
# Model calls and whole tasks take seconds to minutes; tool calls milliseconds to the tool timeout.
_MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_TOOL_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(frozen=True)
class Instruments:
    """The worker's histograms and counters."""

    task_seconds: Histogram
    model_call_seconds: Histogram
    model_tokens: Counter
    tool_call_seconds: Histogram

    def start_at_zero(self, tasks: Iterable[str], tools: Iterable[str]) -> None:
        """Create every series of the known label values at 0, so ``increase()`` sees each first event."""
        for task in tasks:
            self.task_seconds.labels(task=task)
        for provider in (*PROVIDERS, UNKNOWN):
            self.model_call_seconds.labels(provider=provider)
            for kind in TOKEN_TYPES:
                self.model_tokens.labels(provider=provider, type=kind)
        for tool in (*tools, UNKNOWN):
            self.tool_call_seconds.labels(tool=tool)


def provider_label(provider: str) -> str:
    """The provider as a label value: one of the known providers, else ``unknown``."""
    return provider if provider in PROVIDERS else UNKNOWN


@functools.cache
def instruments() -> Instruments:
    """This process's instruments, created at the first call."""
    registry = CollectorRegistry()
    return Instruments(
        task_seconds=Histogram(
            "hango_task_duration_seconds",
            "Seconds one Celery task of hango took, by task.",
            ["task"],
            buckets=_TASK_BUCKETS,
            registry=registry,
        ),
        model_call_seconds=Histogram(
            "hango_model_call_duration_seconds",
            "Seconds one model call (one assistant turn, retries included) took, by provider.",
            ["provider"],
            buckets=_MODEL_BUCKETS,
            registry=registry,
        ),
        model_tokens=Counter(
            "hango_model_tokens",
            "Tokens the models reported, by provider and type (input, output).",
            ["provider", "type"],
            registry=registry,
        ),
        tool_call_seconds=Histogram(
            "hango_tool_call_duration_seconds",
            "Seconds one executed tool call took, by tool.",
            ["tool"],
            buckets=_TOOL_BUCKETS,
            registry=registry,
        ),
    )
