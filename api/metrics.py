"""``GET /metrics``: the request metrics of every API process, and the stored-state series once.

prometheus-flask-exporter counts the requests. Under ``hango api`` (gunicorn, several processes) its values go to
the files of the server's shared folder (:mod:`hango.processes.multiprocess_metrics`) and a scrape adds up every
process's
files. The stored-state series are computed from PostgreSQL by whichever process answers, and registered in
the exposed registry only, so they appear exactly once. Without a shared folder (the Flask test client, a single
process) the values stay in memory and the same endpoint reports them.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_flask_exporter import PrometheusMetrics

from hango.api import ops
from hango.kernel.config import Settings
from hango.platform.runtime import Runtime
from hango.processes import multiprocess_metrics
from hango.services.metrics import StoredStateCollector


class _RequestMetrics(PrometheusMetrics):  # type: ignore[misc]
    """prometheus-flask-exporter, whose endpoint serves ``exposed`` rather than the registry it counts into.

    The exporter's own multiprocess support builds a registry of the shared files alone, which would drop the
    stored-state series; here the exposed registry holds both.
    """

    def __init__(self, app: Flask, exposed: CollectorRegistry, **options: Any) -> None:
        self._exposed = exposed
        super().__init__(app, **options)

    def generate_metrics(self, accept_header: str | None = None, names: list[str] | None = None) -> tuple[str, str]:
        """The exposition text (or another format the scraper accepts) of the exposed registry."""
        registry = self._exposed.restricted_registry(names) if names else self._exposed
        encode, content_type = choose_encoder(accept_header or "")
        return encode(registry).decode("utf-8"), content_type


def register(app: Flask, settings: Settings, runtime: Runtime) -> None:
    """Count the app's requests and serve ``/metrics`` (behind ``HANGO_METRICS_TOKEN`` when it is set)."""
    exposed = CollectorRegistry()
    exposed.register(StoredStateCollector(runtime.db, runtime.tools.names()))
    folder = multiprocess_metrics.current_folder()
    if folder is None:
        counted = exposed
    else:
        # The exporter's metrics must not be in ``exposed`` too: this process's share would be reported twice.
        counted = CollectorRegistry()
        multiprocess_metrics.add_shared_values(exposed, folder)
    _RequestMetrics(
        app,
        exposed,
        registry=counted,
        group_by="url_rule",
        excluded_paths=["/docs/.*"],
        metrics_decorator=ops.metrics_guard(settings.metrics_token),
    )
