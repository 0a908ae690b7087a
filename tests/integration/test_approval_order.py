"""``GET /v1/approvals?order=newest``: the most recently requested first, paged with the same cursors, so that a
reader of what was decided lately (the inbox's "Recently decided") reads one page instead of the whole history."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import delete

from hango.kernel.models import DECISIONS, Agent, PendingApproval, Run
from hango.kernel.models import Tenant as TenantRow
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture

START = datetime.now(UTC) - timedelta(hours=2)


@pytest.fixture
def decided(db: Database, tenant: TenantFixture) -> Iterator[list[str]]:
    """Four decided approvals of one run, requested a minute apart (their ids, oldest first)."""
    with db.transaction() as session:
        agent = Agent(id=uuid.uuid4(), tenant_id=tenant.id, name="bot", model={}, created_by=tenant.owner.user_id)
        session.add(agent)
        session.flush()
        run = Run(
            id=uuid.uuid4(),
            tenant_id=tenant.id,
            agent_id=agent.id,
            agent_snapshot={},
            created_by=tenant.owner.user_id,
            state="succeeded",
            updated_at=START,
        )
        session.add(run)
        session.flush()
        rows = [
            PendingApproval(
                id=uuid.uuid4(),
                tenant_id=tenant.id,
                run_id=run.id,
                turn=1,
                tool_call_id=f"call-{index}",
                tool_name="write_file",
                arguments={"file_path": f"/memories/{index}.md", "content": "x"},
                allowed_decisions=list(DECISIONS),
                state="decided",
                decision="approve",
                decided_by=tenant.owner.user_id,
                decided_at=START + timedelta(minutes=index, seconds=30),
                created_at=START + timedelta(minutes=index),
            )
            for index in range(4)
        ]
        session.add_all(rows)
    yield [str(row.id) for row in rows]
    with db.transaction() as session:
        session.execute(delete(TenantRow).where(TenantRow.id == tenant.id))


def _pages(client: FlaskClient, tenant: TenantFixture, query: str) -> list[list[str]]:
    pages, cursor = [], ""
    while True:
        response = client.get(f"/v1/approvals?state=decided&limit=3&{query}{cursor}", headers=tenant.owner.headers)
        assert response.status_code == 200, response.json
        body: dict[str, Any] = response.json or {}
        pages.append([item["id"] for item in body["items"]])
        if body["next_cursor"] is None:
            return pages
        cursor = f"&cursor={body['next_cursor']}"


def test_newest_lists_the_most_recent_first_across_pages(
    client: FlaskClient, tenant: TenantFixture, decided: list[str]
) -> None:
    newest = list(reversed(decided))
    assert _pages(client, tenant, "order=newest") == [newest[:3], newest[3:]]
    assert _pages(client, tenant, "order=oldest") == [decided[:3], decided[3:]]
    assert _pages(client, tenant, "") == [decided[:3], decided[3:]]  # the queue's order stays the default


def test_an_unknown_order_is_a_400_naming_it(client: FlaskClient, tenant: TenantFixture) -> None:
    response = client.get("/v1/approvals?order=latest", headers=tenant.owner.headers)
    assert response.status_code == 400
    assert [error["field"] for error in (response.json or {})["errors"]] == ["order"]
