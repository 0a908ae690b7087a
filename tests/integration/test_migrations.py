"""The Alembic migrations and the SQLAlchemy models describe the same schema, both ways."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import DBAPIError

from hango import migrate
from hango.db import engine_url
from hango.models import Base
from tests.conftest import create_database, drop_database


@pytest.fixture
def empty_database() -> Iterator[str]:
    url = create_database("hango_migrations")
    yield url
    drop_database(url)


def _tables(url: str) -> set[str]:
    engine = create_engine(engine_url(url))
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _schema_differences(url: str) -> list[object]:
    engine = create_engine(engine_url(url))
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_round_trip(empty_database: str) -> None:
    migrate.upgrade(empty_database)
    assert _tables(empty_database) == set(Base.metadata.tables)

    migrate.downgrade(empty_database, "base")
    assert _tables(empty_database) == set()

    migrate.upgrade(empty_database)
    assert _tables(empty_database) == set(Base.metadata.tables)


def test_models_match_the_migrated_schema(database_url: str) -> None:
    assert _schema_differences(database_url) == []


def test_every_constraint_and_index_follows_the_naming_convention(database_url: str) -> None:
    engine = create_engine(engine_url(database_url))
    try:
        with engine.connect() as connection:
            names = connection.execute(
                text(
                    "SELECT conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
                    "WHERE n.nspname = 'public' UNION ALL "
                    "SELECT indexname FROM pg_indexes WHERE schemaname = 'public'"
                )
            ).scalars()
            prefixes = ("pk_", "fk_", "uq_", "ck_", "ix_")
            offenders = sorted(
                name for name in names if not name.startswith(prefixes) and name != "alembic_version_pkc"
            )
    finally:
        engine.dispose()
    assert offenders == []


@pytest.mark.parametrize("table", ["messages", "run_events"])
def test_logs_are_append_only(database_url: str, table: str) -> None:
    engine = create_engine(engine_url(database_url))
    tenant, user, agent, run = (uuid.uuid4() for _ in range(4))
    column = "content" if table == "messages" else "data"
    extra = ", role" if table == "messages" else ", type"
    extra_value = ", 'user'" if table == "messages" else ", 'run.queued'"
    try:
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO tenants (id, name) VALUES (:id, 't')"), {"id": tenant})
            connection.execute(
                text("INSERT INTO users (id, email) VALUES (:id, :email)"), {"id": user, "email": f"{user}@x"}
            )
            connection.execute(
                text("INSERT INTO agents (id, tenant_id, name, model, created_by) VALUES (:a, :t, 'a', '{}', :u)"),
                {"a": agent, "t": tenant, "u": user},
            )
            connection.execute(
                text(
                    "INSERT INTO runs (id, tenant_id, agent_id, agent_snapshot, created_by) "
                    "VALUES (:r, :t, :a, '{}', :u)"
                ),
                {"r": run, "t": tenant, "a": agent, "u": user},
            )
            connection.execute(
                text(
                    f"INSERT INTO {table} (tenant_id, run_id, seq, {column}{extra}) "
                    f"VALUES (:t, :r, 1, '[]'{extra_value})"
                ),
                {"t": tenant, "r": run},
            )
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as connection:
            connection.execute(text(f"UPDATE {table} SET seq = 2 WHERE run_id = :r"), {"r": run})
        with engine.begin() as connection:
            connection.execute(text("DELETE FROM tenants WHERE id = :t"), {"t": tenant})
            remaining = connection.execute(text(f"SELECT count(*) FROM {table} WHERE run_id = :r"), {"r": run}).scalar()
        assert remaining == 0
    finally:
        engine.dispose()
