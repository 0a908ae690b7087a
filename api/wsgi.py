"""WSGI entry point: ``gunicorn 'hango.api.wsgi:app_from_env()'`` (what ``hango api`` runs)."""

from __future__ import annotations

import gc
import os

from flask import Flask

from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.telemetry import configure_tracing
from hango.processes.green import cooperative_postgres


def app_from_env() -> Flask:
    """Build the app from the ``HANGO_*`` environment (called in each gunicorn worker, after the fork)."""
    cooperative_postgres()
    settings = Settings.from_env(os.environ)
    configure_tracing(settings, "api")
    app = create_app(settings)
    app.extensions["hango"].runtime.queue.prepare()  # before the first request, and before the freeze below
    # What the app built lives as long as the process: the collector need not look at it again. Thousands of
    # streams make full collections frequent, and each would walk every module, model and schema otherwise.
    gc.collect()
    gc.freeze()
    return app
