"""Engine and session factory built from settings; importing this module connects to nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, exc, make_url, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from hango.kernel.config import SessionTimeouts

# When a pooled connection was last given back (or opened), in ``time.monotonic()`` seconds.
_RETURNED_AT = "hango_returned_at"


def engine_url(url: str) -> URL:
    """The URL with the psycopg2 driver made explicit (SQLAlchemy 2.1 would otherwise pick psycopg 3)."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def connect_args(timeouts: SessionTimeouts | None) -> dict[str, Any]:
    """libpq's connection parameters for hango's sessions: how long connecting may take, and the server-side
    timeouts that end a statement, a lock wait or a transaction left idle (a frozen or partitioned process), so no
    session holds a run's row for much longer than a lease. TCP keepalives find a server that vanished."""
    if timeouts is None:
        return {}
    server = {
        "statement_timeout": timeouts.statement,
        "lock_timeout": timeouts.lock,
        "idle_in_transaction_session_timeout": timeouts.idle_in_transaction,
    }
    options = " ".join(f"-c {name}={_milliseconds(value)}" for name, value in server.items())
    return {
        "connect_timeout": max(1, round(timeouts.connect.total_seconds())),
        "options": options,
        "keepalives": 1,
        "keepalives_idle": max(1, round(timeouts.keepalive_idle.total_seconds())),
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }


# SQLSTATEs of errors that say nothing about the statement, only about this moment: trying again may succeed.
_TRANSIENT_STATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available (lock_timeout)
        "57014",  # query_canceled (statement_timeout)
        "25P03",  # idle_in_transaction_session_timeout
        "57P01",  # admin_shutdown (pg_terminate_backend, a fast shutdown)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up, shutting down)
        "53300",  # too_many_connections
    }
)


def is_transient(error: BaseException | None) -> bool:
    """Whether ``error`` (or what it was raised from) is the database's moment rather than the statement's fault: a
    lost or refused connection, a failover, a serialization failure, a deadlock, a lock or statement timeout, a
    pool with no connection to give. Doing the same work again later may succeed."""
    while error is not None:
        if isinstance(error, exc.TimeoutError):  # no pooled connection within the pool's timeout
            return True
        if isinstance(error, exc.DBAPIError):
            state = getattr(error.orig, "pgcode", None)
            if error.connection_invalidated or state in _TRANSIENT_STATES or str(state).startswith("08"):
                return True
            # psycopg2 gives no state when the connection itself failed (refused, reset, closed).
            if state is None and isinstance(error, exc.OperationalError | exc.InterfaceError):
                return True
        error = error.__cause__ or error.__context__
    return False


def _milliseconds(value: timedelta) -> int:
    return max(1, round(value.total_seconds() * 1000))


class Database:
    """The process's connection pool and the one way to open a transaction on it."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        ping_after_idle: timedelta = timedelta(seconds=10),
        timeouts: SessionTimeouts | None = None,
    ) -> None:
        self.engine: Engine = create_engine(
            engine_url(url),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            connect_args=connect_args(timeouts),
        )
        # Single-statement reads on a pool of their own, as large, in autocommit: no BEGIN and COMMIT round trips.
        # Every request authenticates there, so it must not be the narrower of the two.
        self.reader: Engine = create_engine(
            engine_url(url),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            isolation_level="AUTOCOMMIT",
            connect_args=connect_args(timeouts),
        )
        for engine in (self.engine, self.reader):
            _ping_idle_connections(engine, ping_after_idle.total_seconds())
        _share_invalidation(self.engine, self.reader)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._reads = sessionmaker(self.reader, expire_on_commit=False)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Open a session in a transaction that commits on success and rolls back on error.

        The connection goes back to the pool when the block ends, so nothing is held between calls.
        """
        with self._sessions.begin() as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for one read statement, outside any transaction (autocommit).

        Each statement sees the database as of its own start: use it where one statement answers the question
        (a token's principal, a file's content), and :meth:`transaction` where several must agree or anything is
        written.
        """
        with self._reads() as session:
            yield session

    def ping(self) -> None:
        """Run a trivial query; raises when the database cannot be reached. A pooled connection found dead is
        replaced and the query run once more: the database answering on a fresh connection is up."""
        try:
            self._select_one()
        except exc.DBAPIError as error:
            if not error.connection_invalidated:
                raise
            self._select_one()

    def _select_one(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def checked_out(self) -> int:
        """Connections of this process's pools in use right now."""
        return sum(engine.pool.checkedout() for engine in (self.engine, self.reader))  # type: ignore[attr-defined]

    def dispose(self) -> None:
        """Close every pooled connection (after fork, or at shutdown)."""
        self.engine.dispose()
        self.reader.dispose()


def _share_invalidation(*engines: Engine) -> None:
    """When a statement finds its connection dead, SQLAlchemy replaces every connection of that pool: what killed
    one (a restart, a failover, every session dropped) most likely killed them all. The other pool's connections
    died with them, so they are replaced too (those in use are left to their statements): a process meets such an
    event once, not once per pool."""

    def invalidate_others(context: ExceptionContext) -> None:
        if not context.is_disconnect:
            return
        for engine in engines:
            if engine is not context.engine:
                engine.dispose(close=False)

    for engine in engines:
        event.listen(engine, "handle_error", invalidate_others)


def _ping_idle_connections(engine: Engine, idle_seconds: float) -> None:
    """Check a pooled connection with ``SELECT 1`` at checkout when it sat idle longer than ``idle_seconds``.

    SQLAlchemy's ``pool_pre_ping`` pings at every checkout: one more round trip per transaction, which a busy
    worker pays several times per step. A connection given back moments ago is pinged by the statement it runs
    next; one idle for longer (a database restart, a server-side timeout or a dropped TCP connection may have
    closed it meanwhile) is pinged first and replaced when dead. A failure SQLAlchemy sees on a connection that
    was not pinged invalidates the whole pool, so after a database restart at most the transactions in flight fail.
    """

    @event.listens_for(engine, "connect")
    def opened(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def returned(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def checked_out(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection) -> None:
        if time.monotonic() - record.info.get(_RETURNED_AT, 0.0) <= idle_seconds:
            return
        try:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        except engine.dialect.loaded_dbapi.Error as error:
            # The pool discards this connection and checks out another (a fresh one if need be).
            raise exc.DisconnectionError(f"a pooled connection idle for a while was dead: {error}") from error
