"""The path of a decision through the code, from the edge (the ``POST /v1/runs/{id}/approvals`` view) to its commit.

Recorded with the profile hook (:mod:`tests.support.walk`) on a real request through the Flask app and real
PostgreSQL, for the two shapes a decision takes: decisions that queue the run (an edit, an approve that remembers a
grant, a reject) and a quorum vote that leaves it waiting. The kernel (types, errors, settings) is read by every
layer and calls none of them, so its steps are left out of the walk; every other hango module counts.

The walk goes down the layers of pyproject.toml's contract and never up, and returns to a module it already
entered at most 3 times. ``docs/system-architecture.md`` shows the walk this test prints.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import delete

from hango.api import create_app
from hango.kernel.config import Settings
from hango.kernel.models import DECISIONS, Agent, PendingApproval, Run
from hango.kernel.models import Tenant as TenantRow
from hango.platform.db import Database
from tests.integration.conftest import TenantFixture
from tests.support.walk import Walk, layers, rank, walking

CREATED = datetime.now(UTC) - timedelta(hours=1)
MEMORY = {"file_path": "/memories/AGENTS.md", "content": "the model's text"}
RULES = {"write_file": {"allowed_decisions": list(DECISIONS), "when": {"file_path": {"prefix": "/memories/"}}}}
KERNEL = ("hango.kernel",)
# The unit of work and everything below it in the layers: storage, the database, the agent's rule language, the kernel.
FLOOR = "hango.platform.work"
EDGE = ("hango.api.approvals", "decide")
MOST_RETURNS = 3


@dataclass
class Waiting:
    run_id: uuid.UUID
    rows: dict[str, PendingApproval]


@pytest.fixture
def quiet_client(settings: Settings, db: Database) -> FlaskClient:
    # Nobody consumes this queue: the decided run stays queued.
    return create_app(settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}"), db=db).test_client()


@pytest.fixture
def waiting(db: Database, tenant: TenantFixture) -> Iterator[Any]:
    def make(*calls: tuple[str, int]) -> Waiting:
        """A run of the tenant suspended on one write_file call per (tool call id, approvals required)."""
        with db.transaction() as session:
            agent = Agent(id=uuid.uuid4(), tenant_id=tenant.id, name="bot", model={}, created_by=tenant.owner.user_id)
            session.add(agent)
            session.flush()
            run = Run(
                id=uuid.uuid4(),
                tenant_id=tenant.id,
                agent_id=agent.id,
                agent_snapshot={"interrupt_on": RULES},
                created_by=tenant.owner.user_id,
                state="awaiting_approval",
                awaiting_since=CREATED,
                updated_at=CREATED,
            )
            session.add(run)
            session.flush()
            rows = {
                call_id: PendingApproval(
                    id=uuid.uuid4(),
                    tenant_id=tenant.id,
                    run_id=run.id,
                    turn=1,
                    tool_call_id=call_id,
                    tool_name="write_file",
                    arguments=dict(MEMORY),
                    allowed_decisions=list(DECISIONS),
                    approvals_required=required,
                    created_at=CREATED + timedelta(seconds=index),
                )
                for index, (call_id, required) in enumerate(calls)
            }
            session.add_all(rows.values())
        return Waiting(run.id, rows)

    yield make
    with db.transaction() as session:
        session.execute(delete(TenantRow).where(TenantRow.id == tenant.id))


def _decide(client: FlaskClient, tenant: TenantFixture, run: Waiting, decisions: list[dict[str, Any]]) -> Walk:
    with walking(EDGE) as walk:
        response = client.post(
            f"/v1/runs/{run.run_id}/approvals", json={"decisions": decisions}, headers=tenant.owner.headers
        )
    assert response.status_code == 200, response.json
    return walk


def _check(walk: Walk) -> None:
    order = layers()
    floor = tuple(sorted({m for m in walk.visits() if rank(m, order) >= rank(FLOOR, order)}))
    print("\nwalk:", *(f"{s} → {t}" for s, t in walk.edges(floor)), sep="\n  ")
    print("floor:", ", ".join(m for m in floor if not m.startswith(KERNEL)))
    print("returns:", walk.entered_twice(floor))
    climbs = [(s, t) for s, t in walk.edges() if rank(t, order) < rank(s, order)]
    assert climbs == []
    returns = sum(len(callers) - 1 for callers in walk.entered_twice(floor).values())
    assert returns <= MOST_RETURNS


def test_decisions_that_queue_the_run_walk_down_the_layers(
    quiet_client: FlaskClient, tenant: TenantFixture, waiting: Any
) -> None:
    run = waiting(("e", 1), ("a", 1), ("r", 1))
    walk = _decide(
        quiet_client,
        tenant,
        run,
        [
            {"tool_call_id": "e", "decision": "edit", "args": {**MEMORY, "content": "the human's text"}},
            {"tool_call_id": "a", "decision": "approve", "remember": {"ttl": "1h"}},
            {"tool_call_id": "r", "decision": "reject", "message": "no"},
        ],
    )
    assert {"hango.services.grants", "hango.run.transitions", "hango.store.approvals"} <= set(walk.visits())
    _check(walk)


def test_a_vote_that_leaves_the_run_waiting_walks_down_the_layers(
    quiet_client: FlaskClient, tenant: TenantFixture, waiting: Any
) -> None:
    run = waiting(("q", 2))
    walk = _decide(quiet_client, tenant, run, [{"tool_call_id": "q", "decision": "approve"}])
    assert "hango.services.approval_policy" in walk.visits()
    _check(walk)
