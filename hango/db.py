"""Engine and session factory built from settings; importing this module connects to nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import URL, Engine, create_engine, make_url, text
from sqlalchemy.orm import Session, sessionmaker


def engine_url(url: str) -> URL:
    """The URL with the psycopg2 driver made explicit (SQLAlchemy 2.1 would otherwise pick psycopg 3)."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


class Database:
    """The process's connection pool and the one way to open a transaction on it."""

    def __init__(self, url: str, *, pool_size: int = 5) -> None:
        self.engine: Engine = create_engine(
            engine_url(url),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            pool_recycle=1800,
        )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """Open a session in a transaction that commits on success and rolls back on error.

        The connection goes back to the pool when the block ends, so nothing is held between calls.
        """
        with self._sessions.begin() as session:
            yield session

    def ping(self) -> None:
        """Run a trivial query; raises when the database cannot be reached."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def dispose(self) -> None:
        """Close every pooled connection (after fork, or at shutdown)."""
        self.engine.dispose()
