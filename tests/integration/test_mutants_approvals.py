"""The decisions service in-process on real PostgreSQL: what a decision request stores, refuses, emits and audits.

Runs and their pending approvals are written straight into the database, as a suspended run leaves them, so each
test calls ``hango.services.approvals`` without a worker. Written to kill the mutants that survived mutation testing
(docs/mutation-testing.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, select

from hango.api.decision_requests import read_request
from hango.kernel.auth import Principal
from hango.kernel.config import Settings
from hango.kernel.errors import FieldError, Forbidden, InvalidInput, NotAwaitingApproval, NotFound, PartialDecision
from hango.kernel.models import DECISIONS, Agent, AuditEvent, PendingApproval, Run, RunEvent
from hango.kernel.models import Tenant as TenantRow
from hango.kernel.pagination import PageRequest
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.services import approvals, tenancy

# Well inside the approval TTL, so no sweeper expires these runs while a test decides them.
CREATED = datetime.now(UTC) - timedelta(hours=1)
RULES = {"write_file": {"allowed_decisions": list(DECISIONS), "when": {"file_path": {"prefix": "/memories/"}}}}
MEMORY = {"file_path": "/memories/AGENTS.md", "content": "the model's text"}


@dataclass
class Suspended:
    """A tenant's run waiting for decisions on ``rows`` (by tool call id), with the people who may look at it."""

    owner: Principal
    admin: Principal
    member: Principal
    run: Run
    rows: dict[str, PendingApproval]


@pytest.fixture
def runtime(settings: Settings, db: Database) -> Runtime:
    # Nobody consumes this queue: a decided run stays queued for the test to read.
    return Runtime.build(settings.replace(queue=f"nowhere-{uuid.uuid4().hex[:8]}"), db=db)


@pytest.fixture
def make(db: Database) -> Iterator[Any]:
    tenants: list[uuid.UUID] = []

    def suspended(*calls: tuple[str, str, dict[str, Any], list[str]], state: str = "awaiting_approval") -> Suspended:
        created = tenancy.create_tenant(db, "deciders", f"o-{uuid.uuid4().hex[:8]}@example.com")
        tenants.append(created.tenant_id)
        owner = Principal(created.tenant_id, created.user_id, "owner")
        admin = _person(db, owner, "admin")
        member = _person(db, owner, "member")
        with db.transaction() as session:
            agent = Agent(id=uuid.uuid4(), tenant_id=owner.tenant_id, name="bot", model={}, created_by=owner.user_id)
            session.add(agent)
            session.flush()
            run = Run(
                id=uuid.uuid4(),
                tenant_id=owner.tenant_id,
                agent_id=agent.id,
                agent_snapshot={"interrupt_on": RULES},
                created_by=member.user_id,
                state=state,
                awaiting_since=CREATED,
                updated_at=CREATED,
                queue_generation=2,  # queued twice before this suspension
            )
            session.add(run)
            session.flush()
            rows = {
                call_id: PendingApproval(
                    id=uuid.uuid4(),
                    tenant_id=owner.tenant_id,
                    run_id=run.id,
                    turn=1,
                    tool_call_id=call_id,
                    tool_name=tool,
                    arguments=args,
                    allowed_decisions=allowed,
                    created_at=CREATED + timedelta(seconds=index),
                )
                for index, (call_id, tool, args, allowed) in enumerate(calls)
            }
            session.add_all(rows.values())
        return Suspended(owner, admin, member, run, rows)

    yield suspended
    with db.transaction() as session:
        session.execute(delete(TenantRow).where(TenantRow.id.in_(tenants)))


def _person(db: Database, owner: Principal, role: str) -> Principal:
    created = tenancy.create_member(db, owner, f"{role}-{uuid.uuid4().hex[:8]}@example.com", role)  # type: ignore[arg-type]
    return Principal(owner.tenant_id, created.membership.user_id, role)  # type: ignore[arg-type]


def _write(call_id: str, allowed: list[str] | None = None) -> tuple[str, str, dict[str, Any], list[str]]:
    return call_id, "write_file", dict(MEMORY), allowed or list(DECISIONS)


def _rows(db: Database, run: Run) -> dict[str, PendingApproval]:
    with db.transaction() as session:
        rows = session.scalars(select(PendingApproval).where(PendingApproval.run_id == run.id)).all()
        session.expunge_all()
    return {row.tool_call_id: row for row in rows}


def _run(db: Database, run: Run) -> Run:
    with db.transaction() as session:
        row = session.get(Run, run.id)
        assert row is not None
        session.expunge(row)
    return row


def _events(db: Database, run: Run) -> list[tuple[str, dict[str, Any]]]:
    with db.transaction() as session:
        events = session.scalars(select(RunEvent).where(RunEvent.run_id == run.id).order_by(RunEvent.seq)).all()
        return [(event.type, event.data) for event in events]


def _audit(db: Database, run: Suspended) -> list[AuditEvent]:
    targets = [str(row.id) for row in run.rows.values()]
    with db.transaction() as session:
        rows = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.tenant_id == run.owner.tenant_id, AuditEvent.target_id.in_(targets))
            .order_by(AuditEvent.created_at)
        ).all()
        session.expunge_all()
    return list(rows)


def _refused(runtime: Runtime, db: Database, run: Suspended, body: Any, error: type[Exception]) -> Any:
    """Decide, expect ``error``, and check that nothing at all was stored."""
    with pytest.raises(error) as raised:
        approvals.decide(runtime, run.owner, run.run.id, read_request(body))
    assert {call_id: row.state for call_id, row in _rows(db, run.run).items()} == dict.fromkeys(run.rows, "pending")
    assert _run(db, run.run).state == run.run.state
    assert _events(db, run.run) == []
    assert [row for row in _audit(db, run) if row.outcome == "success"] == []
    return raised.value


@pytest.mark.usefixtures("far_east")
def test_a_complete_set_of_decisions_is_stored_emitted_audited_and_queues_the_run(
    runtime: Runtime, db: Database, make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    run = make(_write("a"), _write("e"), _write("r"), _write("s"))
    edited = {"file_path": "/memories/notes.md", "content": "the human's text"}
    body = {
        "decisions": [
            {"tool_call_id": "s", "decision": "respond", "message": "use notes"},
            {"approval_id": str(run.rows["a"].id), "decision": "approve"},
            {"tool_call_id": "e", "approval_id": str(run.rows["e"].id), "decision": "edit", "args": edited},
            {"tool_call_id": "r", "decision": "reject", "message": "no"},
        ]
    }
    before = datetime.now(UTC)
    with caplog.at_level(logging.INFO, logger="hango.services.approvals"):
        decided = approvals.decide(runtime, run.admin, run.run.id, read_request(body), trace_id="t" * 32)
    after = datetime.now(UTC)

    assert decided.run.id == run.run.id
    assert decided.run.state == "queued"
    assert [row.tool_call_id for row in decided.approvals] == ["s", "a", "e", "r"]
    stored = _rows(db, run.run)
    assert {c: (r.state, r.decision, r.decided_by) for c, r in stored.items()} == {
        "a": ("decided", "approve", run.admin.user_id),
        "e": ("decided", "edit", run.admin.user_id),
        "r": ("decided", "reject", run.admin.user_id),
        "s": ("decided", "respond", run.admin.user_id),
    }
    assert {c: (r.decision_args, r.decision_message) for c, r in stored.items()} == {
        "a": (None, ""),
        "e": (edited, ""),
        "r": (None, "no"),
        "s": (None, "use notes"),
    }
    decided_at = {row.decided_at for row in stored.values()}
    assert len(decided_at) == 1
    [moment] = decided_at
    assert moment is not None
    assert before <= moment <= after
    queued = _run(db, run.run)
    assert (queued.state, queued.awaiting_since, queued.queue_generation) == ("queued", None, 3)
    assert before <= queued.updated_at <= after

    def event(call_id: str, decision: str) -> tuple[str, dict[str, Any]]:
        row = run.rows[call_id]
        data = {
            "approval_id": str(row.id),
            "tool_call_id": call_id,
            "tool_name": "write_file",
            "decision": decision,
            "decided_by": str(run.admin.user_id),
        }
        return "approval.decided", data

    assert _events(db, run.run) == [
        event("s", "respond"),
        event("a", "approve"),
        event("e", "edit"),
        event("r", "reject"),
        ("run.queued", {"reason": "approvals decided"}),
    ]

    audit = {row.target_id: row for row in _audit(db, run)}
    assert set(audit) == {str(row.id) for row in run.rows.values()}
    for call_id, kind in [("a", "approve"), ("e", "edit"), ("r", "reject"), ("s", "respond")]:
        row = audit[str(run.rows[call_id].id)]
        assert (row.tenant_id, row.actor_kind, row.actor_id) == (run.owner.tenant_id, "user", run.admin.user_id)
        assert (row.action, row.target_kind, row.outcome, row.trace_id) == (
            "approval.decide",
            "pending_approval",
            "success",
            "t" * 32,
        )
        detail = {
            "decided_by": str(run.admin.user_id),
            "decision": kind,
            "tool_name": "write_file",
            "tool_call_id": call_id,
        }
        assert row.detail == ({**detail, "args_changed": True} if kind == "edit" else detail)

    logged = [r for r in caplog.records if r.getMessage() == "approval decided"]
    assert [(r.run_id, r.tool, r.tool_call_id, r.decision) for r in logged] == [  # type: ignore[attr-defined]
        (str(run.run.id), "write_file", call_id, kind)
        for call_id, kind in [("s", "respond"), ("a", "approve"), ("e", "edit"), ("r", "reject")]
    ]
    assert {r.decided_by for r in logged} == {str(run.admin.user_id)}  # type: ignore[attr-defined]


def test_an_edit_that_keeps_the_arguments_is_audited_as_unchanged(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"))
    # PostgreSQL gives the stored arguments back in jsonb's key order (content first): the same JSON all the same.
    same = {"file_path": MEMORY["file_path"], "content": MEMORY["content"]}
    body = {"decisions": [{"tool_call_id": "w", "decision": "edit", "args": same}]}
    approvals.decide(runtime, run.owner, run.run.id, read_request(body))
    [row] = _audit(db, run)
    assert row.detail["args_changed"] is False
    assert row.actor_id == run.owner.user_id
    assert row.trace_id is None


def test_a_second_decision_finds_the_run_queued_and_stores_nothing(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"))
    approvals.decide(
        runtime, run.owner, run.run.id, read_request({"decisions": [{"tool_call_id": "w", "decision": "approve"}]})
    )
    with pytest.raises(NotAwaitingApproval, match=f"run {run.run.id} is queued, not awaiting approval"):
        approvals.decide(
            runtime,
            run.admin,
            run.run.id,
            read_request({"decisions": [{"tool_call_id": "w", "decision": "reject", "message": "x"}]}),
        )
    assert _rows(db, run.run)["w"].decision == "approve"
    assert len([row for row in _audit(db, run) if row.outcome == "success"]) == 1
    assert _run(db, run.run).queue_generation == 3


def test_a_member_never_decides_not_even_on_their_own_run(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"))
    with pytest.raises(Forbidden) as raised:
        approvals.decide(
            runtime, run.member, run.run.id, read_request({"decisions": [{"tool_call_id": "w", "decision": "approve"}]})
        )
    assert str(raised.value) == (
        "only an owner or admin may decide approvals; a member never may, not even for their own run"
    )
    assert _rows(db, run.run)["w"].state == "pending"
    # The 403 comes before the body is looked at.
    with pytest.raises(Forbidden):
        approvals.decide(runtime, run.member, run.run.id, read_request(None))


def test_another_tenants_run_is_not_found_before_anything_else(runtime: Runtime, db: Database, make: Any) -> None:
    run, other = make(_write("w")), make(_write("w"))
    for principal in (other.owner, other.member):
        with pytest.raises(NotFound):
            approvals.decide(runtime, principal, run.run.id, read_request(None))
    assert _rows(db, run.run)["w"].state == "pending"


def test_a_body_the_edge_could_not_decode_is_refused_as_it_is(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"))
    problem = InvalidInput.field("body", "not JSON")
    assert _refused(runtime, db, run, problem, InvalidInput) is problem


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (None, [FieldError("decisions", "Missing data for required field.")]),
        ({"decisions": []}, [FieldError("decisions", "Length must be between 1 and 1000.")]),
        (
            {"decisions": [{"decision": "approve"}]},
            [FieldError("decisions[0].tool_call_id", "name the call with tool_call_id or approval_id")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "edit"}]},
            [FieldError("decisions[0].args", "an edit needs args (they replace the arguments whole)")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "approve", "args": {}}]},
            [FieldError("decisions[0].args", "only an edit takes args")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "reject"}]},
            [FieldError("decisions[0].message", "a reject needs a message")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "respond", "message": " \n "}]},
            [FieldError("decisions[0].message", "a respond needs a message")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "approve", "message": "ok"}]},
            [FieldError("decisions[0].message", "only reject and respond take a message")],
        ),
        (
            {"decisions": [{"tool_call_id": "w", "decision": "edit", "args": MEMORY, "message": "ok"}]},
            [FieldError("decisions[0].message", "only reject and respond take a message")],
        ),
        (
            {"decisions": [{"tool_call_id": "", "decision": "maybe"}]},
            [
                FieldError("decisions[0].tool_call_id", "Length must be between 1 and 500."),
                FieldError("decisions[0].decision", "Must be one of: approve, edit, reject, respond."),
            ],
        ),
    ],
)
def test_a_malformed_body_names_each_bad_field_and_stores_nothing(
    runtime: Runtime, db: Database, make: Any, body: Any, errors: list[FieldError]
) -> None:
    run = make(_write("w"))
    refused = _refused(runtime, db, run, body, InvalidInput)
    assert refused.errors == errors
    assert refused.detail == "; ".join(f"{e.field}: {e.message}" for e in errors)


def test_a_body_with_many_bad_fields_names_them_all_and_sums_up_the_first_five(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("w"))
    body = {"decisions": [{"decision": "approve"} for _ in range(7)]}
    refused = _refused(runtime, db, run, body, InvalidInput)
    errors = [
        FieldError(f"decisions[{i}].tool_call_id", "name the call with tool_call_id or approval_id") for i in range(7)
    ]
    assert refused.errors == errors
    assert refused.detail == "; ".join(f"{e.field}: {e.message}" for e in errors[:5])


def test_calls_are_resolved_by_id_or_call_id_and_every_bad_reference_is_named(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("a"), _write("b"))
    a, b = str(run.rows["a"].id), str(run.rows["b"].id)
    body = {
        "decisions": [
            {"approval_id": str(uuid.uuid4()), "decision": "approve"},
            {"tool_call_id": "nope", "decision": "approve"},
            {"approval_id": a, "tool_call_id": "b", "decision": "approve"},
            {"approval_id": b, "decision": "approve"},
            {"tool_call_id": "b", "decision": "approve"},
            {"approval_id": str(uuid.uuid4()), "tool_call_id": "a", "decision": "approve"},
            {"approval_id": a, "tool_call_id": "nope", "decision": "approve"},
        ]
    }
    errors = [
        FieldError("decisions[0].approval_id", "no such approval in this run"),
        FieldError("decisions[1].tool_call_id", "no pending call with this id in this run"),
        FieldError("decisions[2].approval_id", "approval_id and tool_call_id name different calls"),
        FieldError("decisions[4]", "call b is named twice"),
        FieldError("decisions[5].approval_id", "no such approval in this run"),
        FieldError("decisions[6].tool_call_id", "no pending call with this id in this run"),
    ]
    refused = _refused(runtime, db, run, body, InvalidInput)
    assert refused.errors == errors
    assert refused.detail == "; ".join(f"{e.field}: {e.message}" for e in errors)


def test_a_decision_the_rule_does_not_allow_is_refused_with_the_allowed_ones(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("a", ["approve", "reject"]), _write("b", ["approve", "reject"]))
    body = {
        "decisions": [
            {"tool_call_id": "a", "decision": "respond", "message": "m"},
            {"tool_call_id": "b", "decision": "edit", "args": {"nonsense": 1}},
        ]
    }
    errors = [
        FieldError("decisions[0].decision", "respond is not allowed for write_file (approve, reject)"),
        FieldError("decisions[1].decision", "edit is not allowed for write_file (approve, reject)"),
    ]
    refused = _refused(runtime, db, run, body, InvalidInput)
    assert refused.errors == errors
    assert refused.detail == "; ".join(f"{e.field}: {e.message}" for e in errors)


def test_edited_arguments_are_checked_against_the_tool_and_the_rules_scope(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("schema"), _write("scope"), _write("fine"), ("gone", "no_such_tool", {"x": 1}, ["edit"]))
    body = {
        "decisions": [
            {"tool_call_id": "schema", "decision": "edit", "args": {"file_path": "/memories/a", "content": 5}},
            {"tool_call_id": "scope", "decision": "edit", "args": {"file_path": "/notes.txt", "content": "x"}},
            {"tool_call_id": "fine", "decision": "edit", "args": {"file_path": "/memories/b", "content": "x"}},
            {"tool_call_id": "gone", "decision": "edit", "args": {"x": 2}},
        ]
    }
    errors = [
        FieldError("decisions[0].args.content", "5 is not of type 'string'"),
        FieldError("decisions[1].args", "the edited arguments leave the scope of the rule that made this call wait"),
        FieldError("decisions[3].args", "the tool no_such_tool is not available to check the arguments against"),
    ]
    refused = _refused(runtime, db, run, body, InvalidInput)
    assert refused.errors == errors
    assert refused.detail == "; ".join(f"{e.field}: {e.message}" for e in errors)


def test_an_edit_that_breaks_the_whole_schema_names_the_arguments(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"))
    body = {"decisions": [{"tool_call_id": "w", "decision": "edit", "args": {"file_path": "/memories/a"}}]}
    refused = _refused(runtime, db, run, body, InvalidInput)
    assert refused.errors == [FieldError("decisions[0].args", "'content' is a required property")]


def test_an_edit_under_a_rule_without_when_may_go_anywhere_the_schema_allows(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(("w", "edit_file", {"file_path": "/a", "old_string": "x", "new_string": "y"}, list(DECISIONS)))
    with db.transaction() as session:
        session.get(Run, run.run.id).agent_snapshot = {"interrupt_on": {"edit_file": True}}  # type: ignore[union-attr]
    args = {"file_path": "/b", "old_string": "x", "new_string": "z"}
    approvals.decide(
        runtime,
        run.owner,
        run.run.id,
        read_request({"decisions": [{"tool_call_id": "w", "decision": "edit", "args": args}]}),
    )
    assert _rows(db, run.run)["w"].decision_args == args


def test_decisions_must_cover_every_pending_call(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("a"), _write("b"), _write("c"))
    body = {"decisions": [{"tool_call_id": "b", "decision": "approve"}]}
    refused = _refused(runtime, db, run, body, PartialDecision)
    assert str(refused) == "2 pending call(s) of this run have no decision; decide them all in one request"
    assert refused.remaining == [
        {"id": str(run.rows[c].id), "tool_call_id": c, "tool_name": "write_file"} for c in ("a", "c")
    ]


def test_a_run_no_longer_waiting_refuses_decisions(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("w"), state="failed")
    body = {"decisions": [{"tool_call_id": "w", "decision": "approve"}]}
    refused = _refused(runtime, db, run, body, NotAwaitingApproval)
    assert str(refused) == f"run {run.run.id} is failed, not awaiting approval"


def test_an_approval_already_closed_refuses_the_request(runtime: Runtime, db: Database, make: Any) -> None:
    run = make(_write("a"), _write("b"))
    with db.transaction() as session:
        session.get(PendingApproval, run.rows["b"].id).state = "expired"  # type: ignore[union-attr]
    body = {"decisions": [{"tool_call_id": "a", "decision": "approve"}, {"tool_call_id": "b", "decision": "approve"}]}
    with pytest.raises(NotAwaitingApproval, match=f"approval {run.rows['b'].id} is already expired"):
        approvals.decide(runtime, run.owner, run.run.id, read_request(body))
    assert _rows(db, run.run)["a"].state == "pending"
    # Deciding only the still pending call is complete: the expired one needs no decision.
    approvals.decide(
        runtime, run.owner, run.run.id, read_request({"decisions": [{"tool_call_id": "a", "decision": "approve"}]})
    )
    assert _run(db, run.run).state == "queued"


def test_named_approvals_are_the_known_calls_a_request_names_once_each(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("a"), _write("b"), _write("c"))
    a, b, c = run.rows["a"], run.rows["b"], run.rows["c"]
    body = {
        "decisions": [
            "not an object",
            {"approval_id": str(a.id), "decision": "edit", "args": {**MEMORY, "content": "new"}},
            {"tool_call_id": "a", "decision": "reject"},
            {"tool_call_id": "b", "decision": "maybe"},
            {"tool_call_id": "c", "decision": "edit", "args": dict(MEMORY)},  # jsonb keeps another key order
            {"tool_call_id": "zzz", "decision": "approve"},
        ]
    }
    assert approvals.named_approvals(list(run.rows.values()), read_request(body).named) == [
        approvals.NamedApproval(a.id, "a", "write_file", "edit", True),
        approvals.NamedApproval(b.id, "b", "write_file", None, None),
        approvals.NamedApproval(c.id, "c", "write_file", "edit", False),
    ]
    one = {"decisions": [{"tool_call_id": "b", "decision": "approve"}]}
    assert approvals.named_approvals(list(run.rows.values()), read_request(one).named) == [
        approvals.NamedApproval(b.id, "b", "write_file", "approve", None)
    ]


@pytest.mark.parametrize("body", [None, [], "x", {}, {"decisions": {"tool_call_id": "a"}}, {"decisions": "a"}])
def test_a_body_without_a_list_of_decisions_names_nothing(runtime: Runtime, make: Any, body: Any) -> None:
    run = make(_write("a"))
    assert approvals.named_approvals(list(run.rows.values()), read_request(body).named) == []


def test_the_audit_detail_never_holds_arguments_and_says_whether_an_edit_changed_them() -> None:
    who = uuid.uuid4()
    edit = approvals.NamedApproval(uuid.uuid4(), "c1", "write_file", "edit", False)
    reject = approvals.NamedApproval(uuid.uuid4(), "c2", "grep", "reject", None)
    assert approvals.audit_detail(edit, who) == {
        "decided_by": str(who),
        "decision": "edit",
        "tool_name": "write_file",
        "tool_call_id": "c1",
        "args_changed": False,
    }
    assert approvals.audit_detail(reject, who) == {
        "decided_by": str(who),
        "decision": "reject",
        "tool_name": "grep",
        "tool_call_id": "c2",
    }


def test_the_approval_lists_show_the_runs_and_the_tenants_approvals(runtime: Runtime, make: Any) -> None:
    run = make(_write("a"), _write("b"))
    ids = [run.rows["a"].id, run.rows["b"].id]
    assert [
        row.id for row in approvals.list_for_run(runtime, run.member, run.run.id, "pending", PageRequest()).items
    ] == ids
    assert approvals.list_for_run(runtime, run.member, run.run.id, "decided", PageRequest()).items == []
    assert [row.id for row in approvals.list_for_tenant(runtime, run.admin, "pending", PageRequest()).items] == ids
    assert [row.id for row in approvals.list_for_tenant(runtime, run.member, "all", PageRequest(limit=1)).items] == ids[
        :1
    ]
    with pytest.raises(NotFound):
        approvals.list_for_run(runtime, run.member, uuid.uuid4(), "all", PageRequest())


def test_a_refused_request_is_audited_as_denied_or_as_an_error_naming_the_refusal(
    runtime: Runtime, db: Database, make: Any
) -> None:
    run = make(_write("w"))
    with pytest.raises(Forbidden) as denied:
        approvals.decide(
            runtime,
            run.member,
            run.run.id,
            read_request({"decisions": [{"tool_call_id": "w", "decision": "approve"}]}),
            "t1",
        )
    unknown = {"decisions": [{"tool_call_id": "nope", "decision": "approve"}]}
    with pytest.raises(InvalidInput) as invalid:
        approvals.decide(runtime, run.owner, run.run.id, read_request(unknown), "t2")
    # The rows are written: the edge must not audit these refusals a second time.
    assert denied.value.audited is True
    assert invalid.value.audited is True
    with db.transaction() as session:
        rows = session.scalars(
            select(AuditEvent)
            .where(AuditEvent.tenant_id == run.owner.tenant_id, AuditEvent.action == "approval.decide")
            .order_by(AuditEvent.created_at)
        ).all()
        seen = [(row.actor_id, row.target_kind, row.target_id, row.outcome, row.detail, row.trace_id) for row in rows]
    member = run.member.user_id
    named = {"decided_by": str(member), "decision": "approve", "tool_name": "write_file", "tool_call_id": "w"}
    assert seen == [
        # A 403 is denied, and its row is the call's that the request names.
        (member, "pending_approval", str(run.rows["w"].id), "denied", named | {"refusal": "Forbidden"}, "t1"),
        # Any other refusal is an error; naming no known call, the row is the run's.
        (run.owner.user_id, "run", str(run.run.id), "error", {"refusal": "InvalidInput"}, "t2"),
    ]
