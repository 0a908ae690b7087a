"""The Flask edge: an app factory wiring authentication, audit, problem documents and the blueprints."""

from __future__ import annotations

import os

import redis
from flask import Flask
from opentelemetry.instrumentation.flask import FlaskInstrumentor

from hango import __version__
from hango.api import (
    agents,
    approvals,
    audit,
    audit_events,
    auth,
    files,
    grants,
    inbox,
    mcp_servers,
    metrics,
    ops,
    outages,
    problems,
    runs,
    tenant,
    threads,
    users,
    webhooks,
)
from hango.api.context import Services
from hango.api.openapi import DESCRIPTION, Rules
from hango.api.parsing import Api
from hango.kernel.config import Settings
from hango.kernel.telemetry import tracing_enabled
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.streams.live import Live

_BLUEPRINTS = (
    users.blp,
    agents.blp,
    files.blp,
    runs.blp,
    threads.blp,
    approvals.blp,
    audit_events.blp,
    webhooks.blp,
    mcp_servers.blp,
    grants.blp,
    tenant.blp,
)
# Probes and scrapes come every few seconds and say nothing about what users did.
_UNTRACED = "/healthz,/readyz,/metrics"


def create_app(settings: Settings, *, db: Database | None = None) -> Flask:
    """Build the API application; nothing connects until the first request."""
    app = Flask("hango", static_folder=None)
    _trace_requests(app)
    app.config.update(
        MAX_CONTENT_LENGTH=settings.max_body_bytes,
        API_TITLE="hango",
        API_VERSION=__version__,
        OPENAPI_VERSION="3.1.0",
        OPENAPI_URL_PREFIX="/",
        OPENAPI_JSON_PATH="openapi.json",
        API_SPEC_OPTIONS={
            "info": {"description": DESCRIPTION},
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{"bearer": []}],
        },
    )
    runtime = Runtime.build(settings, db=db)
    app.extensions["hango"] = Services(
        settings=settings,
        db=runtime.db,
        redis=redis.Redis.from_url(settings.require_redis_url(), socket_timeout=2, socket_connect_timeout=2),
        runtime=runtime,
        live=Live.build(runtime, _fanout_redis(settings)),
    )
    api = Api(app, spec_kwargs={"extra_plugins": [Rules(settings, runtime.tools.names())]})
    for blueprint in _BLUEPRINTS:
        api.register_blueprint(blueprint)
    inbox.register(app)
    ops.register(app)
    auth.register(app)
    audit.register(app)
    problems.register(app)
    outages.register(app)
    metrics.register(app, settings, runtime)
    return app


def _fanout_redis(settings: Settings) -> redis.Redis:
    """The live-event subscription's own client, named after the process so that ``CLIENT LIST`` shows whose it
    is (the app is built after the fork: this is the worker's pid)."""
    url, name = settings.require_redis_url(), f"hango-fanout-{os.getpid()}"
    # A connection that died without a word is found by a PING every half minute of silence.
    return redis.Redis.from_url(url, client_name=name, health_check_interval=30, socket_keepalive=True)


def _trace_requests(app: Flask) -> None:
    """A server span per request, when this process traces (set up after the fork, before the app is built).

    Installed before any other hook, so that authentication, the views, the problem handlers and the audit hook
    all run inside the span: the audit rows and log lines of a request carry its trace id, and a run enqueued by
    a request is published with its context. Without a tracer provider nothing is installed.
    """
    if tracing_enabled():
        FlaskInstrumentor.instrument_app(app, excluded_urls=_UNTRACED)  # type: ignore[no-untyped-call]
