"""The API when a dependency cannot be reached, in process: a 503 `unavailable` problem with `Retry-After`, never a
500; `/readyz` naming what is down; a read whose pooled connection was dropped answered from a fresh one.

"Cannot be reached" is a port nobody listens on (what a stopped server answers: the connection is refused). Real
servers stopped and started again are in test_faults.py.
"""

from __future__ import annotations

from datetime import timedelta

from flask.testing import FlaskClient
from sqlalchemy import text

from hango.api import create_app
from hango.kernel.config import Settings
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture
from tests.support.processes import free_port


def _assert_unavailable(response: object, dependency: str) -> None:
    assert response.status_code == 503, response.get_data(as_text=True)  # type: ignore[attr-defined]
    assert response.mimetype == "application/problem+json"  # type: ignore[attr-defined]
    body = response.json  # type: ignore[attr-defined]
    assert body["type"] == "urn:hango:problem:unavailable"
    assert dependency in body["detail"]
    assert response.headers["Retry-After"] == "7"  # type: ignore[attr-defined]


def test_a_database_that_cannot_be_reached_is_a_503_with_retry_after(settings: Settings, tenant: TenantFixture) -> None:
    down = settings.replace(
        database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere",
        unavailable_retry_after=timedelta(seconds=7),
    )
    client = create_app(down).test_client()
    for path in ("/v1/runs", "/v1/approvals", "/v1/me"):
        _assert_unavailable(client.get(path, headers=tenant.owner.headers), "database")
    _assert_unavailable(client.post("/v1/runs", json={"agent_id": "x"}, headers=tenant.owner.headers), "database")
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json["type"] == "urn:hango:problem:unavailable"
    assert ready.json["checks"] == {"database": "unreachable", "redis": "ok"}
    assert ready.headers["Retry-After"] == "7"


def test_a_redis_that_cannot_be_reached_is_named_by_readyz_and_refuses_streams(
    settings: Settings, db: Database, tenant: TenantFixture, client: FlaskClient
) -> None:
    down = settings.replace(
        redis_url=f"redis://127.0.0.1:{free_port()}/0", unavailable_retry_after=timedelta(seconds=7)
    )
    redisless = create_app(down, db=db).test_client()
    ready = redisless.get("/readyz")
    assert ready.status_code == 503
    assert ready.json["checks"] == {"database": "ok", "redis": "unreachable"}
    assert ready.headers["Retry-After"] == "7"
    # What needs only PostgreSQL goes on.
    assert redisless.get("/v1/runs", headers=tenant.owner.headers).status_code == 200
    events = redisless.get("/v1/approvals/events", headers=tenant.owner.headers)
    _assert_unavailable(events, "Redis")


def test_a_read_whose_pooled_connections_were_dropped_is_answered_from_fresh_ones(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    own = Database(settings.require_database_url(), pool_size=1, ping_after_idle=timedelta(hours=1))
    try:
        client = create_app(settings, db=own).test_client()
        assert client.get("/v1/runs", headers=tenant.owner.headers).status_code == 200
        # Every connection the app's pools keep is dropped, as a failover or an idle-connection reaper does.
        pids = set()
        for engine in (own.engine, own.reader):
            with engine.connect() as connection:
                pids.add(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
        with db.transaction() as session:
            for pid in pids:
                assert session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()
        response = client.get("/v1/runs", headers=tenant.owner.headers)
        assert response.status_code == 200, response.json
        # A write is never sent twice: once dropped again, it answers 503 and the client decides.
        with own.reader.connect() as connection:
            pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        with db.transaction() as session:
            session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        refused = client.post("/v1/runs", json={"agent_id": "x"}, headers=tenant.owner.headers)
        assert refused.status_code == 503, refused.json
    finally:
        own.dispose()
