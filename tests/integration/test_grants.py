"""Standing approvals (grants): the API (roles, tenants, validation, limit, audit), the loop's lookup
(``live_grant``), and ``remember`` on an approve (the loop's use of grants: ``test_grants_applied.py``)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select, text, update

from hango.agent.messages import ToolCall, user_message
from hango.agent.state import GrantLookup
from hango.api import create_app
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.errors import Conflict
from hango.kernel.models import Grant, PendingApproval, Run
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run import service, standing
from hango.run.standing import GrantQuery
from hango.services import grants
from hango.services.grants import GrantSpec
from tests.integration.conftest import Person, TenantFixture, create_agent
from tests.integration.hitl_helpers import MEMORY, audit_rows, decide, pending, suspended_run, write_memory
from tests.support.processes import wait_until

SCRIPT = [{"tool_calls": [write_memory("new line", call_id="w")]}, {"text": "Done."}]


def post_grant(client: FlaskClient, person: Person, **body: Any) -> Any:
    return client.post("/v1/grants", json={"tool_name": "write_file", "ttl": "1h", **body}, headers=person.headers)


def created(client: FlaskClient, person: Person, **body: Any) -> dict[str, Any]:
    response = post_grant(client, person, **body)
    assert response.status_code == 201, response.json
    grant: dict[str, Any] = response.json
    return grant


def owner_of(tenant: TenantFixture) -> Principal:
    return Principal(tenant.id, tenant.owner.user_id, "owner")


@pytest.fixture
def idle_runtime(settings: Settings, db: Database) -> Runtime:
    """A runtime on a queue no worker listens on: its runs stay queued, for the lookup's tests."""
    return Runtime.build(settings.replace(queue=f"hango-test-{uuid.uuid4().hex[:10]}"), db=db)


def idle_run(runtime: Runtime, tenant: TenantFixture, agent_id: str) -> Run:
    return service.create_run(runtime, owner_of(tenant), uuid.UUID(agent_id), [user_message("go")])


# The API.


def test_a_grant_is_created_listed_shown_and_revoked_at_once(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    when = {"file_path": {"prefix": "/memories/notes/"}}
    grant = created(client, tenant.owner, agent_id=agent_id, when=when)
    assert grant["agent_id"] == agent_id
    assert grant["tool_name"] == "write_file"
    assert grant["when"] == when
    assert grant["run_id"] is None
    assert grant["created_by"] == str(tenant.owner.user_id)
    assert grant["active"] is True
    assert grant["revoked_at"] is None
    assert grant["revoked_by"] is None
    lasts = datetime.fromisoformat(grant["expires_at"]) - datetime.fromisoformat(grant["created_at"])
    assert timedelta(minutes=59) < lasts <= timedelta(hours=1)
    headers = tenant.owner.headers
    assert client.get(f"/v1/grants/{grant['id']}", headers=headers).json == grant
    assert [item["id"] for item in client.get("/v1/grants", headers=headers).json["items"]] == [grant["id"]]

    assert client.delete(f"/v1/grants/{grant['id']}", headers=headers).status_code == 204
    revoked = client.get(f"/v1/grants/{grant['id']}", headers=headers).json
    assert revoked["active"] is False
    assert revoked["revoked_by"] == str(tenant.owner.user_id)
    assert client.delete(f"/v1/grants/{grant['id']}", headers=headers).status_code == 204  # again: no change
    assert client.get(f"/v1/grants/{grant['id']}", headers=headers).json["revoked_at"] == revoked["revoked_at"]
    assert client.get("/v1/grants?active=true", headers=headers).json["items"] == []
    assert [item["id"] for item in client.get("/v1/grants?active=false", headers=headers).json["items"]] == [
        grant["id"]
    ]

    [create] = audit_rows(db, tenant.id, "grant.create")
    assert (create.target_kind, create.target_id, create.outcome) == ("grant", grant["id"], "success")
    assert create.detail["when_arguments"] == ["file_path"]
    assert "/memories/notes/" not in str(create.detail)  # the arguments' names, never the matchers' values
    revokes = audit_rows(db, tenant.id, "grant.revoke")
    assert [row.target_id for row in revokes] == [grant["id"], grant["id"]]


def test_lists_are_paged_and_filtered_by_agent(client: FlaskClient, tenant: TenantFixture) -> None:
    first, second = create_agent(client, tenant.owner, []), create_agent(client, tenant.owner, [])
    ids = [created(client, tenant.owner, agent_id=agent)["id"] for agent in (first, second, first)]
    headers = tenant.owner.headers
    page = client.get("/v1/grants?limit=2", headers=headers).json
    rest = client.get(f"/v1/grants?limit=2&cursor={page['next_cursor']}", headers=headers).json
    assert [item["id"] for item in page["items"] + rest["items"]] == ids[::-1]  # newest first
    assert rest["next_cursor"] is None
    of_first = client.get(f"/v1/grants?agent_id={first}", headers=headers).json["items"]
    assert [item["id"] for item in of_first] == [ids[2], ids[0]]


def test_members_may_not_create_list_or_revoke_grants_and_admins_may(
    client: FlaskClient, tenant: TenantFixture
) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    member, admin = tenant.add("member"), tenant.add("admin")
    grant = created(client, admin, agent_id=agent_id)
    assert post_grant(client, member, agent_id=agent_id).status_code == 403
    assert client.get("/v1/grants", headers=member.headers).status_code == 403
    assert client.get(f"/v1/grants/{grant['id']}", headers=member.headers).status_code == 403
    refused = client.delete(f"/v1/grants/{grant['id']}", headers=member.headers)
    assert refused.status_code == 403
    assert refused.mimetype == "application/problem+json"
    assert client.get(f"/v1/grants/{grant['id']}", headers=admin.headers).json["active"] is True


def test_another_tenants_grants_and_agents_are_not_found(
    client: FlaskClient, tenant: TenantFixture, make_tenant: Any
) -> None:
    other = make_tenant("other")
    agent_id = create_agent(client, tenant.owner, [])
    grant = created(client, tenant.owner, agent_id=agent_id)
    assert client.get(f"/v1/grants/{grant['id']}", headers=other.owner.headers).status_code == 404
    assert client.delete(f"/v1/grants/{grant['id']}", headers=other.owner.headers).status_code == 404
    assert client.get("/v1/grants", headers=other.owner.headers).json["items"] == []
    assert post_grant(client, other.owner, agent_id=agent_id).status_code == 404
    assert client.get(f"/v1/grants?agent_id={agent_id}", headers=other.owner.headers).json["items"] == []
    assert client.get(f"/v1/grants/{grant['id']}", headers=tenant.owner.headers).json["active"] is True


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ttl": "0s"}, "ttl"),
        ({"ttl": "forever"}, "ttl"),
        ({"ttl": "31d"}, "ttl"),
        ({"ttl": "9" * 40 + "d"}, "ttl"),
        ({"ttl": None}, "ttl"),
        ({"ttl": 3600}, "ttl"),
        ({"tool_name": ""}, "tool_name"),
        ({"tool_name": "   "}, "tool_name"),
        ({"when": {}}, "when"),
        ({"when": {"file_path": {"glob": "*"}}}, "when.file_path.glob"),
        ({"when": {"file_path": {"prefix": []}}}, "when.file_path.prefix"),
        ({"when": {"content": {"size_over": -1}}}, "when.content.size_over"),
        ({"when": {"content": "x"}}, "when.content"),
        ({"when": ["x"]}, "when"),
        ({"agent_id": "not-a-uuid"}, "agent_id"),
        ({"forever": True}, "forever"),
    ],
)
def test_a_malformed_grant_is_a_400_naming_the_field_and_stores_nothing(
    client: FlaskClient, tenant: TenantFixture, db: Database, change: dict[str, Any], field: str
) -> None:
    body = {"agent_id": create_agent(client, tenant.owner, []), **change}
    response = post_grant(client, tenant.owner, **body)
    assert response.status_code == 400, response.json
    assert response.mimetype == "application/problem+json"
    assert field in [error["field"] for error in response.json["errors"]]
    with db.transaction() as session:
        assert session.scalars(select(Grant).where(Grant.tenant_id == tenant.id)).all() == []


def test_a_grant_for_one_run_must_name_a_run_of_its_agent(
    client: FlaskClient, tenant: TenantFixture, idle_runtime: Runtime
) -> None:
    agent_id, other_agent = create_agent(client, tenant.owner, []), create_agent(client, tenant.owner, [])
    run = idle_run(idle_runtime, tenant, agent_id)
    assert created(client, tenant.owner, agent_id=agent_id, run_id=str(run.id))["run_id"] == str(run.id)
    wrong = post_grant(client, tenant.owner, agent_id=other_agent, run_id=str(run.id))
    assert wrong.status_code == 400
    assert [error["field"] for error in wrong.json["errors"]] == ["run_id"]
    assert post_grant(client, tenant.owner, agent_id=agent_id, run_id=str(uuid.uuid4())).status_code == 404


def test_the_tenants_active_grants_are_limited_and_a_revoked_one_frees_its_place(
    settings: Settings, db: Database, tenant: TenantFixture
) -> None:
    limited = create_app(settings.replace(max_grants_per_tenant=2), db=db).test_client()
    agent_id = create_agent(limited, tenant.owner, [])
    first = created(limited, tenant.owner, agent_id=agent_id)
    created(limited, tenant.owner, agent_id=agent_id)
    refused = post_grant(limited, tenant.owner, agent_id=agent_id)
    assert refused.status_code == 409
    assert "HANGO_MAX_GRANTS_PER_TENANT" in refused.json["detail"]
    assert limited.delete(f"/v1/grants/{first['id']}", headers=tenant.owner.headers).status_code == 204
    created(limited, tenant.owner, agent_id=agent_id)


def test_the_openapi_document_describes_the_grants(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").json["paths"]
    assert {"post", "get"} <= set(paths["/v1/grants"])
    assert {"get", "delete"} <= set(paths["/v1/grants/{grant_id}"])
    assert "409" in paths["/v1/grants"]["post"]["responses"]


# The loop's lookup and writer.


@dataclass
class Scene:
    """Two agents of one tenant, two runs of the first, and the runtime to look grants up with."""

    runtime: Runtime
    tenant: TenantFixture
    agent: uuid.UUID
    other_agent: uuid.UUID
    run: Run
    other_run: Run

    def grant(self, **changes: Any) -> Grant:
        spec: dict[str, Any] = {"agent_id": self.agent, "tool_name": "write_file", "ttl": "1h", **changes}
        return grants.create(self.runtime, owner_of(self.tenant), GrantSpec(**spec))

    def lookup(self, arguments: dict[str, Any], **changes: Any) -> uuid.UUID | None:
        """The id of the grant :func:`standing.live_grant` answers with, or None."""
        with self.runtime.db.transaction() as session:
            found = standing.live_grant(
                session, self.query(arguments, **changes), changes.get("now", datetime.now(UTC))
            )
            return found.id if found is not None else None

    def query(self, arguments: dict[str, Any], **changes: Any) -> GrantQuery:
        """The loop's question for a held ``write_file`` call with these arguments (``changes``: other ids, tool,
        reviewers)."""
        call = ToolCall("c1", changes.get("tool_name", "write_file"), arguments)
        return GrantQuery(
            changes.get("tenant_id", self.tenant.id),
            changes.get("agent_id", self.agent),
            changes.get("run_id", self.run.id),
            GrantLookup(call, arguments, changes.get("reviewers")),
        )


@pytest.fixture
def scene(client: FlaskClient, tenant: TenantFixture, idle_runtime: Runtime) -> Scene:
    agent, other_agent = create_agent(client, tenant.owner, []), create_agent(client, tenant.owner, [])
    runs = idle_run(idle_runtime, tenant, agent), idle_run(idle_runtime, tenant, agent)
    return Scene(idle_runtime, tenant, uuid.UUID(agent), uuid.UUID(other_agent), *runs)


NOTE = {"file_path": "/memories/notes/a.md", "content": "x"}


def test_a_live_grant_approves_the_calls_its_when_matches_and_only_those(scene: Scene) -> None:
    grant = scene.grant(when={"file_path": {"prefix": "/memories/notes/"}})
    assert scene.lookup(NOTE) == grant.id
    # Paths are normalised as the interrupt rules normalise them.
    assert scene.lookup({**NOTE, "file_path": "/memories/x/../notes//b.md"}) == grant.id
    assert scene.lookup({**NOTE, "file_path": "/memories/notes/../AGENTS.md"}) is None
    assert scene.lookup({**NOTE, "file_path": "/memories/AGENTS.md"}) is None
    assert scene.lookup({"content": "x"}) is None  # a missing argument does not match
    assert scene.lookup(NOTE, tool_name="edit_file") is None
    assert scene.lookup(NOTE, agent_id=scene.other_agent) is None
    assert scene.lookup(NOTE, tenant_id=uuid.uuid4()) is None


def test_a_grant_without_when_approves_every_call_of_its_tool(scene: Scene) -> None:
    grant = scene.grant()
    assert scene.lookup({"file_path": "/anything", "content": "y" * 5000}) == grant.id
    assert scene.lookup({}) == grant.id


def test_a_grant_for_one_run_applies_to_that_run_only(scene: Scene) -> None:
    grant = scene.grant(run_id=scene.other_run.id)
    assert scene.lookup(NOTE) is None
    assert scene.lookup(NOTE, run_id=scene.other_run.id) == grant.id


def test_an_expired_or_revoked_grant_approves_nothing(scene: Scene) -> None:
    expired, revoked = scene.grant(ttl="1h"), scene.grant(ttl="2h")
    with scene.runtime.db.transaction() as session:
        session.execute(update(Grant).where(Grant.id == expired.id).values(expires_at=datetime.now(UTC)))
    assert scene.lookup(NOTE) == revoked.id
    assert scene.lookup(NOTE, now=datetime.now(UTC) + timedelta(hours=3)) is None
    grants.revoke(scene.runtime, owner_of(scene.tenant), revoked.id)
    assert scene.lookup(NOTE) is None


def test_the_oldest_matching_grant_answers(scene: Scene) -> None:
    narrow = scene.grant(when={"content": {"equals": "x"}})
    scene.grant()
    assert scene.lookup(NOTE) == narrow.id


def test_a_revocation_racing_a_lookup_waits_for_the_lookups_commit(scene: Scene) -> None:
    grant = scene.grant()
    revoked = threading.Event()
    with scene.runtime.db.transaction() as session:
        found = standing.live_grant(session, scene.query(NOTE), datetime.now(UTC))
        assert found is not None
        assert found.id == grant.id

        def revoke() -> None:
            grants.revoke(scene.runtime, owner_of(scene.tenant), grant.id)
            revoked.set()

        racer = threading.Thread(target=revoke)
        racer.start()
        wait_until(lambda: _waits_on_a_lock(scene.runtime.db) or None, timeout=10)
        assert not revoked.is_set()  # the revocation waits on the lookup's share lock
    racer.join(timeout=10)
    assert revoked.is_set()
    assert scene.lookup(NOTE) is None


def _waits_on_a_lock(db: Database) -> bool:
    with db.transaction() as session:
        statement = text(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'UPDATE grants%'"
        )
        return bool(session.scalar(statement))


# ``remember`` on a decision.


@pytest.fixture
def waiting(client: FlaskClient, tenant: TenantFixture, worker_process: Any) -> str:
    return suspended_run(client, tenant, SCRIPT)


def test_approving_with_remember_creates_a_grant_of_exactly_that_call(
    client: FlaskClient, tenant: TenantFixture, db: Database, waiting: str
) -> None:
    response = decide(
        client, tenant.owner, waiting, {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}
    )
    assert response.status_code == 200, response.json
    [item] = response.json["approvals"]
    assert item["grant_id"] is None  # a human decided this one
    grant = client.get(f"/v1/grants/{item['remembered_grant_id']}", headers=tenant.owner.headers).json
    agent_id = client.get(f"/v1/runs/{waiting}", headers=tenant.owner.headers).json["agent_id"]
    assert (grant["agent_id"], grant["tool_name"], grant["run_id"]) == (agent_id, "write_file", None)
    assert grant["when"] == {"file_path": {"equals": MEMORY}, "content": {"equals": "new line"}}
    assert grant["exact"] is True
    assert grant["created_by"] == str(tenant.owner.user_id)
    [audit] = audit_rows(db, tenant.id, "grant.create")
    assert audit.detail["approval_id"] == item["id"]
    assert audit.target_id == grant["id"]

    def lookup(arguments: dict[str, Any]) -> Grant | None:
        held = GrantLookup(ToolCall("c", "write_file", arguments), arguments)
        query = GrantQuery(tenant.id, uuid.UUID(agent_id), uuid.uuid4(), held)
        with db.transaction() as session:
            return standing.live_grant(session, query, datetime.now(UTC))

    same, other = lookup(item["arguments"]), lookup({**item["arguments"], "content": "?"})
    assert same is not None
    assert str(same.id) == grant["id"]
    assert other is None


def test_remember_may_name_its_own_when_if_it_covers_the_call(
    client: FlaskClient, tenant: TenantFixture, waiting: str
) -> None:
    when = {"file_path": {"prefix": "/memories/"}}
    outside = {"file_path": {"prefix": "/skills/"}}
    refused = decide(
        client,
        tenant.owner,
        waiting,
        {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h", "when": outside}},
    )
    assert refused.status_code == 400
    assert [error["field"] for error in refused.json["errors"]] == ["decisions[0].remember.when"]
    remember = {"ttl": "2h", "when": when}
    response = decide(client, tenant.owner, waiting, {"tool_call_id": "w", "decision": "approve", "remember": remember})
    assert response.status_code == 200, response.json
    grant_id = response.json["approvals"][0]["remembered_grant_id"]
    assert client.get(f"/v1/grants/{grant_id}", headers=tenant.owner.headers).json["when"] == when


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ({"decision": "reject", "message": "no", "remember": {"ttl": "1h"}}, "decisions[0].remember"),
        ({"decision": "approve", "remember": {}}, "decisions[0].remember.ttl"),
        ({"decision": "approve", "remember": {"ttl": "0s"}}, "decisions[0].remember.ttl"),
        ({"decision": "approve", "remember": {"ttl": "400d"}}, "decisions[0].remember.ttl"),
        (
            {"decision": "approve", "remember": {"ttl": "1h", "when": {"x": {"nope": 1}}}},
            "decisions[0].remember.when.x.nope",
        ),
        ({"decision": "approve", "remember": {"ttl": "1h", "forever": True}}, "decisions[0].remember.forever"),
    ],
)
def test_a_bad_remember_is_a_400_and_stores_nothing(
    client: FlaskClient, tenant: TenantFixture, db: Database, waiting: str, decision: dict[str, Any], field: str
) -> None:
    response = decide(client, tenant.owner, waiting, {"tool_call_id": "w", **decision})
    assert response.status_code == 400, response.json
    assert field in [error["field"] for error in response.json["errors"]]
    assert [item["state"] for item in pending(client, tenant.owner, waiting)] == ["pending"]
    with db.transaction() as session:
        assert session.scalars(select(Grant).where(Grant.tenant_id == tenant.id)).all() == []


def test_a_rule_needing_several_approvals_is_never_remembered(
    client: FlaskClient, tenant: TenantFixture, db: Database, waiting: str
) -> None:
    with db.transaction() as session:
        session.execute(
            update(PendingApproval).where(PendingApproval.run_id == uuid.UUID(waiting)).values(approvals_required=2)
        )
    response = decide(
        client, tenant.owner, waiting, {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}
    )
    assert response.status_code == 400, response.json
    assert [error["field"] for error in response.json["errors"]] == ["decisions[0].remember"]
    with db.transaction() as session:
        assert session.scalars(select(Grant).where(Grant.tenant_id == tenant.id)).all() == []


def test_remember_past_the_tenants_limit_is_a_409_and_decides_nothing(
    settings: Settings, db: Database, tenant: TenantFixture, client: FlaskClient, waiting: str
) -> None:
    limited = create_app(settings.replace(max_grants_per_tenant=1), db=db).test_client()
    agent_id = client.get(f"/v1/runs/{waiting}", headers=tenant.owner.headers).json["agent_id"]
    created(limited, tenant.owner, agent_id=agent_id)
    response = decide(
        limited, tenant.owner, waiting, {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}
    )
    assert response.status_code == 409, response.json
    assert [item["state"] for item in pending(client, tenant.owner, waiting)] == ["pending"]


def test_refused_grant_requests_are_audited_with_their_outcome(
    client: FlaskClient, tenant: TenantFixture, db: Database
) -> None:
    agent_id = create_agent(client, tenant.owner, [])
    grant = created(client, tenant.owner, agent_id=agent_id)
    member = tenant.add("member")
    assert post_grant(client, member, agent_id=agent_id).status_code == 403
    assert post_grant(client, tenant.owner, agent_id=agent_id, ttl="0s").status_code == 400
    assert client.delete(f"/v1/grants/{grant['id']}", headers=member.headers).status_code == 403
    creates = audit_rows(db, tenant.id, "grant.create")
    assert [row.outcome for row in creates] == ["success", "denied", "error"]
    [revoke] = audit_rows(db, tenant.id, "grant.revoke")
    assert (revoke.outcome, revoke.target_id, revoke.actor_id) == ("denied", grant["id"], member.user_id)


def test_a_when_over_the_size_limit_is_a_400_and_so_is_remembering_a_call_that_large(
    settings: Settings, db: Database, tenant: TenantFixture, client: FlaskClient, waiting: str
) -> None:
    small = create_app(settings.replace(grant_max_when_bytes=40), db=db).test_client()
    agent_id = client.get(f"/v1/runs/{waiting}", headers=tenant.owner.headers).json["agent_id"]
    big = {"file_path": {"prefix": "/memories/" + "x" * 40}}
    refused = post_grant(small, tenant.owner, agent_id=agent_id, when=big)
    assert refused.status_code == 400
    assert [error["field"] for error in refused.json["errors"]] == ["when"]
    remember = {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}
    response = decide(small, tenant.owner, waiting, remember)
    assert response.status_code == 400, response.json
    assert [error["field"] for error in response.json["errors"]] == ["decisions[0].remember.when"]
    assert "HANGO_GRANT_MAX_WHEN_BYTES" in response.json["errors"][0]["message"]


def test_creations_racing_for_the_last_place_leave_exactly_one_winner(
    settings: Settings, db: Database, client: FlaskClient, tenant: TenantFixture
) -> None:
    runtime = Runtime.build(settings.replace(max_grants_per_tenant=1), db=db)
    spec = GrantSpec(uuid.UUID(create_agent(client, tenant.owner, [])), "write_file", "1h")
    for _ in range(5):
        assert sorted(_race(4, lambda: grants.create(runtime, owner_of(tenant), spec))) == ["created"] + ["refused"] * 3
        with db.transaction() as session:
            session.execute(update(Grant).where(Grant.tenant_id == tenant.id).values(revoked_at=datetime.now(UTC)))


def _race(count: int, create: Callable[[], object]) -> list[str]:
    """Run ``create`` in ``count`` threads released at once; each outcome is ``created`` or ``refused`` (409)."""
    outcomes: list[str] = []
    start = threading.Barrier(count)

    def attempt() -> None:
        start.wait()
        try:
            create()
            outcomes.append("created")
        except Conflict:
            outcomes.append("refused")

    racers = [threading.Thread(target=attempt) for _ in range(count)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    return outcomes


def test_a_call_without_arguments_is_remembered_only_with_a_when_of_the_reviewers_own(
    client: FlaskClient, tenant: TenantFixture, db: Database, waiting: str
) -> None:
    with db.transaction() as session:
        session.execute(
            update(PendingApproval).where(PendingApproval.run_id == uuid.UUID(waiting)).values(arguments={})
        )
    remember: dict[str, Any] = {"tool_call_id": "w", "decision": "approve", "remember": {"ttl": "1h"}}
    refused = decide(client, tenant.owner, waiting, remember)
    assert refused.status_code == 400, refused.json
    assert [error["field"] for error in refused.json["errors"]] == ["decisions[0].remember.when"]
    remember["remember"]["when"] = None
    response = decide(client, tenant.owner, waiting, remember)
    assert response.status_code == 200, response.json
    grant_id = response.json["approvals"][0]["remembered_grant_id"]
    assert client.get(f"/v1/grants/{grant_id}", headers=tenant.owner.headers).json["when"] is None
