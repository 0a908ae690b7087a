"""The Alembic migrations and the SQLAlchemy models describe the same schema, both ways."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import DBAPIError

from hango.api.decision_requests import read_request
from hango.kernel.config import Settings
from hango.kernel.models import Base
from hango.platform.db import Database, engine_url
from hango.platform.runtime import Runtime
from hango.processes import migrate
from tests.conftest import create_database, drop_database
from tests.integration.hitl_helpers import stored_agent


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


def _migrated_runtime(url: str, settings: Settings) -> tuple[Database, Runtime]:
    """The database at ``url`` migrated to the newest schema, and a runtime on it whose runs are enqueued onto a
    queue nobody consumes (the test drives them)."""
    migrate.upgrade(url)
    db = Database(url)
    return db, Runtime.build(settings.replace(database_url=url, queue=f"nowhere-{uuid.uuid4().hex[:6]}"), db=db)


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


def _insert_run(connection: Any, tenant: uuid.UUID, user: uuid.UUID, agent: uuid.UUID, run: uuid.UUID) -> None:
    """A tenant, its user, an agent and a run, in plain SQL (for a schema the models may not describe)."""
    connection.execute(text("INSERT INTO tenants (id, name) VALUES (:id, 't')"), {"id": tenant})
    connection.execute(text("INSERT INTO users (id, email) VALUES (:id, :email)"), {"id": user, "email": f"{user}@x"})
    connection.execute(
        text("INSERT INTO agents (id, tenant_id, name, model, created_by) VALUES (:a, :t, 'a', '{}', :u)"),
        {"a": agent, "t": tenant, "u": user},
    )
    connection.execute(
        text("INSERT INTO runs (id, tenant_id, agent_id, agent_snapshot, created_by) VALUES (:r, :t, :a, '{}', :u)"),
        {"r": run, "t": tenant, "a": agent, "u": user},
    )


@pytest.mark.parametrize("table", ["messages", "run_events"])
def test_logs_are_append_only(database_url: str, table: str) -> None:
    engine = create_engine(engine_url(database_url))
    tenant, user, agent, run = (uuid.uuid4() for _ in range(4))
    column = "content" if table == "messages" else "data"
    extra = ", role" if table == "messages" else ", type"
    extra_value = ", 'user'" if table == "messages" else ", 'run.queued'"
    try:
        with engine.begin() as connection:
            _insert_run(connection, tenant, user, agent, run)
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


WAITING = "approvals were removed by a schema downgrade"
UNAPPLIED = "approval decisions were removed by a schema downgrade before the run applied them"


def test_the_approvals_migration_downgrade_fails_suspended_and_decided_runs_first(
    empty_database: str, settings: Settings
) -> None:
    from hango.agent.messages import user_message
    from hango.run import service
    from hango.run.worker import execute_run
    from hango.services import approvals

    # Runs are enqueued onto a queue nobody consumes: a decided run stays queued, its decisions unconsumed.
    db, runtime = _migrated_runtime(empty_database, settings)
    write = {"id": "w", "name": "write_file", "args": {"file_path": "/memories/AGENTS.md", "content": "x"}}
    owner, agent_id = stored_agent(db, [{"tool_calls": [write]}], ["write_file"])
    waiting, decided = (service.create_run(runtime, owner, agent_id, [user_message("go")]) for _ in range(2))
    assert execute_run(runtime, waiting.id) == "suspended"
    assert execute_run(runtime, decided.id) == "suspended"
    body = {"decisions": [{"tool_call_id": "w", "decision": "reject", "message": "no"}]}
    assert approvals.decide(runtime, owner, decided.id, read_request(body)).run.state == "queued"
    db.dispose()

    migrate.downgrade(empty_database, "0001")
    engine = create_engine(engine_url(empty_database))
    try:
        with engine.connect() as connection:
            outcomes = {run_id: _failure_of(connection, run_id) for run_id in (waiting.id, decided.id)}
            assert "pending_approvals" not in inspect(connection).get_table_names()
            assert "awaiting_since" not in {c["name"] for c in inspect(connection).get_columns("runs")}
            with pytest.raises(DBAPIError, match="ck_runs_state"), connection.begin_nested():
                connection.execute(
                    text("UPDATE runs SET state = 'awaiting_approval' WHERE id = :id"), {"id": waiting.id}
                )
    finally:
        engine.dispose()
    assert outcomes == {waiting.id: _failed(WAITING, "awaiting_approval"), decided.id: _failed(UNAPPLIED, "queued")}

    migrate.upgrade(empty_database)
    assert _schema_differences(empty_database) == []


def _failed(error: str, previous: str) -> tuple[object, ...]:
    """What a run failed by the downgrade looks like: its row, its last event and its one audit row."""
    detail = {"reason": "schema downgrade", "previous_state": previous, "error": error}
    return (
        ("failed", error),
        ("run.finished", {"state": "failed", "error": error}),
        [("system", None, "success", detail)],
    )


def _failure_of(connection: Any, run_id: uuid.UUID) -> tuple[object, ...]:
    row = connection.execute(text("SELECT state, error FROM runs WHERE id = :id"), {"id": run_id}).one()
    last = connection.execute(
        text("SELECT type, data FROM run_events WHERE run_id = :id ORDER BY seq DESC LIMIT 1"), {"id": run_id}
    ).one()
    audit = connection.execute(
        text(
            "SELECT actor_kind, actor_id, outcome, detail FROM audit_events "
            "WHERE action = 'run.fail' AND target_kind = 'run' AND target_id = :id"
        ),
        {"id": str(run_id)},
    ).all()
    return tuple(row), tuple(last), [tuple(a) for a in audit]


def test_message_events_refer_to_their_messages_and_both_migrations_keep_the_replay(
    empty_database: str, settings: Settings
) -> None:
    from hango.agent.messages import Message, user_message
    from hango.run import service

    db, runtime = _migrated_runtime(empty_database, settings)
    owner, agent_id = stored_agent(db, [], [])
    said = [user_message("first"), Message(role="assistant", content=[{"type": "text", "text": "second"}])]
    run = service.create_run(runtime, owner, agent_id, [*said, user_message("third")])
    replayed = service.events_after(runtime, owner, run.id, 0)[0]
    messages = [event.data for event in replayed if event.type == "message.created"]
    assert [message["content"][0]["text"] for message in messages] == ["first", "second", "third"]
    assert [message["role"] for message in messages] == ["user", "assistant", "user"]
    assert _stored_message_events(empty_database, run.id) == [{"seq": message["seq"]} for message in messages]
    db.dispose()

    migrate.downgrade(empty_database, "0013")
    assert _stored_message_events(empty_database, run.id) == messages

    migrate.upgrade(empty_database)
    assert _stored_message_events(empty_database, run.id) == [{"seq": message["seq"]} for message in messages]
    db = Database(empty_database)
    try:
        runtime = Runtime.build(settings.replace(database_url=empty_database), db=db)
        assert service.events_after(runtime, owner, run.id, 0)[0] == replayed
    finally:
        db.dispose()


def _stored_message_events(url: str, run_id: uuid.UUID) -> list[dict[str, Any]]:
    engine = create_engine(engine_url(url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT data FROM run_events WHERE run_id = :id AND type = 'message.created' ORDER BY seq"),
                {"id": run_id},
            )
            return [row.data for row in rows]
    finally:
        engine.dispose()


def test_the_digest_migration_fills_the_approvals_already_stored(empty_database: str) -> None:
    from hango.kernel.canonical import sha256_hex

    migrate.upgrade(empty_database, "0015")
    engine = create_engine(engine_url(empty_database))
    tenant, user, agent, run = (uuid.uuid4() for _ in range(4))
    arguments = [{"file_path": "/memories/é.md", "content": f"line {n}\n", "n": n / 3} for n in range(3)]
    try:
        with engine.begin() as connection:
            _insert_run(connection, tenant, user, agent, run)
            for n, given in enumerate(arguments):
                connection.execute(
                    text(
                        "INSERT INTO pending_approvals (id, tenant_id, run_id, turn, tool_call_id, tool_name, "
                        "arguments, allowed_decisions) "
                        "VALUES (gen_random_uuid(), :t, :r, 1, :call, 'write_file', CAST(:arguments AS jsonb), "
                        "ARRAY['approve'])"
                    ),
                    {"t": tenant, "r": run, "call": f"c{n}", "arguments": json.dumps(given)},
                )
        migrate.upgrade(empty_database)
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    "SELECT arguments, arguments_sha256 FROM pending_approvals WHERE run_id = :r ORDER BY tool_call_id"
                ),
                {"r": run},
            ).all()
    finally:
        engine.dispose()
    assert [row.arguments_sha256 for row in rows] == [sha256_hex(given) for given in arguments]
    assert _schema_differences(empty_database) == []
