"""WSGI entry point: ``gunicorn 'api.wsgi:app_from_env()'`` (what ``hango api`` runs)."""

from __future__ import annotations

import os

from flask import Flask

from api import create_app
from hango.config import Settings


def app_from_env() -> Flask:
    """Build the app from the ``HANGO_*`` environment."""
    return create_app(Settings.from_env(os.environ))
