"""The connection pool checks a connection before use only after it sat idle (``HANGO_DB_PING_AFTER_IDLE``).

Each test kills the server side of the pool's one connection with ``pg_terminate_backend``, as a database restart
or a dropped TCP connection would, and looks at what the next transaction meets.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from hango.platform.db import Database


def _pool(url: str, idle: timedelta) -> Iterator[Database]:
    database = Database(url, pool_size=1, ping_after_idle=idle)
    yield database
    database.dispose()


@pytest.fixture
def pinging(database_url: str) -> Iterator[Database]:
    """A pool that pings any connection idle for more than 50 ms."""
    yield from _pool(database_url, timedelta(milliseconds=50))


@pytest.fixture
def trusting(database_url: str) -> Iterator[Database]:
    """A pool that never pings within a test's time."""
    yield from _pool(database_url, timedelta(hours=1))


def _backend(database: Database) -> int:
    with database.transaction() as session:
        pid: int = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
    return pid


def _terminate(db: Database, pid: int) -> None:
    with db.transaction() as session:
        assert session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
    time.sleep(0.1)  # the backend is gone once the signal is handled


def test_an_idle_connection_that_died_is_replaced_before_use(db: Database, pinging: Database) -> None:
    dead = _backend(pinging)
    _terminate(db, dead)  # idle for more than 50 ms by now
    assert _backend(pinging) != dead


def test_a_recently_used_connection_is_not_pinged_and_after_its_failure_the_pool_recovers(
    db: Database, trusting: Database
) -> None:
    dead = _backend(trusting)
    _terminate(db, dead)
    # Not pinged: the transaction meets the dead connection (a ping would have replaced it first).
    with pytest.raises(OperationalError), trusting.transaction() as session:
        session.execute(text("SELECT 1"))
    # SQLAlchemy saw a disconnect and dropped the pool's connections: the next transaction gets a live one.
    assert _backend(trusting) != dead
