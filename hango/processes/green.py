"""Cooperative I/O in gevent workers: what gunicorn's monkey-patching does not reach."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def monkey_patched() -> bool:
    """Whether this process runs under gevent's monkey-patching (a ``hango api`` worker)."""
    try:
        from gevent import monkey
    except ImportError:
        return False
    return bool(monkey.is_module_patched("socket"))


def cooperative_postgres() -> bool:
    """Make psycopg2 yield to other greenlets while it waits on PostgreSQL, when gevent patched this process.

    psycopg2 is a C extension: without a wait callback, one query would block every greenlet of the worker.
    Returns whether the callback is installed.
    """
    if not monkey_patched():
        return False
    from psycogreen.gevent import patch_psycopg

    patch_psycopg()
    return True
