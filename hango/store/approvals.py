"""Pending approvals: owned, audited, expiring rows (never checkpoint state)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple, cast

from sqlalchemy import ColumnElement, Select, Table, and_, bindparam, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import ApprovalVote, PendingApproval, Run, Tenant
from hango.kernel.pagination import Page, PageRequest, paginate
from hango.store.runs import get_run, visible_to_bound


def deadline(row: PendingApproval, ttl: timedelta) -> datetime:
    """When an approval expires: its own deadline (a rule's ``ttl``, an escalation), or ``ttl`` after creation."""
    return row.expires_at if row.expires_at is not None else row.created_at + ttl


def approval_json(row: PendingApproval, ttl: timedelta) -> dict[str, Any]:
    """The API shape of an approval (also the source of the ``approval.*`` event data)."""
    return {
        "id": str(row.id),
        "run_id": str(row.run_id),
        # The run's thread (null for a run without one), copied onto the row by its insert trigger.
        "thread_id": str(row.thread_id) if row.thread_id else None,
        "tool_call_id": row.tool_call_id,
        "tool_name": row.tool_name,
        "arguments": row.arguments,
        "arguments_sha256": row.arguments_sha256,
        "allowed_decisions": list(row.allowed_decisions),
        "state": row.state,
        "subagent_call_id": str(row.subagent_call_id) if row.subagent_call_id else None,
        "created_at": row.created_at,
        "expires_at": deadline(row, ttl),
        "decision": row.decision or None,
        "decision_args": row.decision_args,
        "decision_message": row.decision_message or None,
        "decided_by": str(row.decided_by) if row.decided_by else None,
        "decided_at": row.decided_at,
        "execution": row.execution,
        "on_expiry": row.on_expiry or "fail",
        "escalated_at": row.escalated_at,
        "grant_id": str(row.grant_id) if row.grant_id else None,
        # Why the call waits, from its rule (null: the rule gives no description).
        "description": row.description,
        # The approval policy: who may decide (None: every owner and admin), and a quorum's votes so far.
        "reviewers": row.reviewers,
        "approvals_required": row.approvals_required or 1,
        "votes": [vote_json(vote) for vote in row.votes] if (row.approvals_required or 1) > 1 else [],
        # An MCP call's server and tool as pinned (title, description, annotations); null for any other tool.
        "mcp": _mcp_shown(row.mcp),
        "definition_sha256": row.mcp.get("definition_sha256") if row.mcp else None,
    }


def _mcp_shown(mcp: dict[str, Any] | None) -> dict[str, Any] | None:
    if mcp is None:
        return None
    return {key: mcp.get(key) for key in ("server", "tool", "title", "description", "annotations", "trusted")}


def vote_json(vote: ApprovalVote) -> dict[str, Any]:
    """One vote as an approval item shows it: who and what, never the message (a reject's is ``decision_message``)."""
    return {"user_id": str(vote.user_id), "vote": vote.vote, "created_at": vote.created_at}


def approval_item(row: PendingApproval, ttl: timedelta) -> dict[str, Any]:
    """:func:`approval_json` as JSON: what the approval lists send, the times in ISO 8601 (the tenant stream's data)."""
    shown = approval_json(row, ttl)
    item: dict[str, Any] = {
        name: value.isoformat() if isinstance(value, datetime) else value for name, value in shown.items()
    }
    item["votes"] = [{**vote, "created_at": vote["created_at"].isoformat()} for vote in shown["votes"]]
    return item


def _call(row: PendingApproval) -> dict[str, Any]:
    """What every approval event of a run names: the approval and its call."""
    return {"approval_id": str(row.id), "tool_call_id": row.tool_call_id, "tool_name": row.tool_name}


def requested_event(row: PendingApproval) -> dict[str, Any]:
    """The data of an ``approval.requested`` event."""
    return {
        **_call(row),
        "arguments": row.arguments,
        "arguments_sha256": row.arguments_sha256,
        "allowed_decisions": list(row.allowed_decisions),
        "subagent_call_id": str(row.subagent_call_id) if row.subagent_call_id else None,
        "definition_sha256": row.mcp.get("definition_sha256") if row.mcp else None,
    }


def decided_event(row: PendingApproval) -> dict[str, Any]:
    """The data of an ``approval.decided`` event (never the edited arguments or the human's message)."""
    return {
        **_call(row),
        "decision": row.decision,
        "decided_by": str(row.decided_by) if row.decided_by else None,
    }


def expired_event(row: PendingApproval) -> dict[str, Any]:
    """The data of a run's ``approval.expired`` event: a call its deadline rejected (the run goes on)."""
    return {
        **_call(row),
        "action": row.expiry_action,
    }


def escalated_event(row: PendingApproval) -> dict[str, Any]:
    """The data of a run's ``approval.escalated`` event: who may decide now, and until when."""
    return {
        **_call(row),
        "reviewers": row.reviewers,
        "expires_at": row.expires_at.isoformat() if row.expires_at else None,
    }


def _filtered(statement: Select[PendingApproval], state: str) -> Select[PendingApproval]:
    # The votes of a page come in one more query, whatever its size.
    statement = statement.options(selectinload(PendingApproval.votes))
    return statement if state == "all" else statement.where(PendingApproval.state == state)


def list_for_run(
    session: Session, principal: Principal, run_id: uuid.UUID, state: str, page: PageRequest
) -> Page[PendingApproval]:
    """A visible run's approvals, oldest first; :class:`~hango.kernel.errors.NotFound` for a run the caller cannot
    see."""
    run = get_run(session, principal, run_id)
    statement = select(PendingApproval).where(
        PendingApproval.tenant_id == run.tenant_id, PendingApproval.run_id == run.id
    )
    return paginate(session, _filtered(statement, state), [PendingApproval.created_at, PendingApproval.id], page)


def _visible_to(principal: Principal) -> Select[PendingApproval]:
    """The approvals a principal may see: the tenant's, and for a member only those of the runs they created."""
    statement = select(PendingApproval).where(PendingApproval.tenant_id == principal.tenant_id)
    if not principal.is_manager:
        # The same rule as runs.visible_to, on the creator copied into each approval: an index range, no join.
        statement = statement.where(PendingApproval.run_creator == principal.user_id)
    return statement


def list_for_tenant(
    session: Session, principal: Principal, state: str, page: PageRequest, newest: bool = False
) -> Page[PendingApproval]:
    """The tenant's approval queue, oldest first (``newest``: most recent first); a member sees the approvals of
    their own runs only."""
    statement = _filtered(_visible_to(principal), state)
    keys = [PendingApproval.created_at, PendingApproval.id]
    return paginate(session, statement, keys, page, descending=newest)


def get_visible(session: Session, principal: Principal, approval_id: uuid.UUID) -> PendingApproval:
    """One approval the principal may see, with its votes; :class:`~hango.kernel.errors.NotFound` otherwise (another
    tenant's, or for a member another member's run's), so that its existence is never revealed."""
    statement = _visible_to(principal).where(PendingApproval.id == approval_id)
    row = session.scalar(statement.options(selectinload(PendingApproval.votes)))
    if row is None:
        raise NotFound(f"approval {approval_id} not found")
    return row


def _locked_with_approvals(members_own: bool) -> Select[Run, PendingApproval, bool]:
    self_approval = select(Tenant.self_approval).where(Tenant.id == Run.tenant_id).scalar_subquery()
    return (
        select(Run, PendingApproval, self_approval)
        .outerjoin(
            PendingApproval,
            (PendingApproval.tenant_id == Run.tenant_id) & (PendingApproval.run_id == Run.id),
        )
        .where(Run.id == bindparam("run_id"), visible_to_bound(members_own=members_own))
        .order_by(PendingApproval.created_at, PendingApproval.id)
        .with_for_update(of=Run)
    )


# Built once, for an owner or admin (the tenant's runs) and for a member (their own): every decision takes it.
_LOCKED_WITH_APPROVALS = {False: _locked_with_approvals(False), True: _locked_with_approvals(True)}


class Locked(NamedTuple):
    """A run locked for a decision, every approval of it, and its tenant's ``self_approval`` policy."""

    run: Run
    approvals: list[PendingApproval]
    self_approval: bool


def locked_with_approvals(
    session: Session, principal: Principal, run_id: uuid.UUID
) -> tuple[Run, list[PendingApproval]]:
    """A visible run, its row locked for this transaction, with every approval of it (any state, oldest first),
    in one statement; :class:`~hango.kernel.errors.NotFound` for a run the principal cannot see."""
    locked = locked_for_decision(session, principal, run_id)
    return locked.run, locked.approvals


def locked_for_decision(session: Session, principal: Principal, run_id: uuid.UUID) -> Locked:
    """:func:`locked_with_approvals`, with the tenant's ``self_approval`` read in the same statement (the tenant's
    row is read, not locked: a policy change committed meanwhile applies from the next decision)."""
    statement = _LOCKED_WITH_APPROVALS[not principal.is_manager]
    parameters = {"run_id": run_id, "tenant_id": principal.tenant_id, "user_id": principal.user_id}
    rows = session.execute(statement, parameters).all()
    if not rows:
        raise NotFound(f"run {run_id} not found")
    return Locked(rows[0][0], [approval for _, approval, _ in rows if approval is not None], bool(rows[0][2]))


def decided_unanswered(session: Session, run: Run, subagent_call_id: uuid.UUID | None) -> list[PendingApproval]:
    """A loop's decided approvals, and those its deadline rejected (``expired`` while the run goes on); the caller
    keeps those whose call has no result yet."""
    statement = select(PendingApproval).where(
        PendingApproval.tenant_id == run.tenant_id,
        PendingApproval.run_id == run.id,
        or_(
            PendingApproval.state == "decided",
            and_(PendingApproval.state == "expired", PendingApproval.expiry_action == "reject"),
        ),
    )
    if subagent_call_id is None:
        statement = statement.where(PendingApproval.subagent_call_id.is_(None))
    else:
        statement = statement.where(PendingApproval.subagent_call_id == subagent_call_id)
    return list(session.scalars(statement))


def mark_executing(session: Session, tenant_id: uuid.UUID, run_id: uuid.UUID, approval_id: uuid.UUID) -> None:
    """An approved call is about to run: ``executing`` (again, for an idempotent call a dead worker left)."""
    session.execute(
        update(PendingApproval)
        .where(
            PendingApproval.tenant_id == tenant_id,
            PendingApproval.run_id == run_id,
            PendingApproval.id == approval_id,
            PendingApproval.execution.in_(("not_started", "executing")),
        )
        .values(execution="executing")
    )


def record_executions(session: Session, tenant_id: uuid.UUID, run_id: uuid.UUID, ended: dict[str, str]) -> None:
    """How a batch's approved calls ended (``done`` or ``outcome_unknown``), written with the batch's results."""
    for execution in sorted(set(ended.values())):
        ids = [uuid.UUID(approval_id) for approval_id, value in ended.items() if value == execution]
        session.execute(
            update(PendingApproval)
            .where(
                PendingApproval.tenant_id == tenant_id,
                PendingApproval.run_id == run_id,
                PendingApproval.id.in_(ids),
            )
            .values(execution=execution)
        )


def close_pending(session: Session, run: Run, state: str) -> list[PendingApproval]:
    """Move a run's pending approvals to ``expired`` (the run failed with them: ``expiry_action`` ``fail``) or
    ``cancelled``; returns the rows changed."""
    values: dict[str, Any] = {"state": state}
    if state == "expired":
        values["expiry_action"] = "fail"
    statement = (
        update(PendingApproval)
        .where(
            PendingApproval.tenant_id == run.tenant_id,
            PendingApproval.run_id == run.id,
            PendingApproval.state == "pending",
        )
        .values(**values)
        .returning(PendingApproval)
    )
    options = {"synchronize_session": False, "populate_existing": True}
    return list(session.scalars(statement, execution_options=options))


def _due(now: datetime, older_than: datetime) -> ColumnElement[bool]:
    """Pending approvals past their deadline: their own, or ``older_than`` for those that follow the default TTL."""
    return and_(
        PendingApproval.state == "pending",
        or_(
            PendingApproval.expires_at <= now,
            and_(PendingApproval.expires_at.is_(None), PendingApproval.created_at < older_than),
        ),
    )


def stale_runs(session: Session, now: datetime, older_than: datetime, limit: int) -> Sequence[uuid.UUID]:
    """Runs with a pending approval past its deadline (see :func:`due_approvals`), oldest approval first."""
    oldest = func.min(PendingApproval.created_at)
    statement = (
        select(PendingApproval.run_id)
        .where(_due(now, older_than))
        .group_by(PendingApproval.run_id)
        .order_by(oldest)
        .limit(limit)
    )
    return list(session.scalars(statement))


def due_approvals(session: Session, run: Run, now: datetime, older_than: datetime) -> list[PendingApproval]:
    """A locked run's pending approvals past their deadline: their own ``expires_at``, or, without one, created
    before ``older_than`` (``HANGO_APPROVAL_TTL`` ago). Read after the lock, so what a decision changed meanwhile
    counts."""
    statement = (
        select(PendingApproval)
        .where(PendingApproval.tenant_id == run.tenant_id, PendingApproval.run_id == run.id, _due(now, older_than))
        .order_by(PendingApproval.created_at, PendingApproval.id)
        .execution_options(populate_existing=True)
    )
    return list(session.scalars(statement))


def still_pending(session: Session, run: Run) -> bool:
    """Whether any approval of the run still waits."""
    statement = select(PendingApproval.id).where(
        PendingApproval.tenant_id == run.tenant_id, PendingApproval.run_id == run.id, PendingApproval.state == "pending"
    )
    return session.execute(statement.limit(1)).first() is not None


_PENDING_COLUMNS = (
    "id",
    "created_at",
    "tenant_id",
    "run_id",
    "turn",
    "tool_call_id",
    "tool_name",
    "arguments",
    "arguments_sha256",
    "allowed_decisions",
    "subagent_call_id",
    "reviewers",
    "approvals_required",
    "expires_at",
    "on_expiry",
    "description",
    "mcp",
)


def insert_pending(session: Session, rows: Sequence[PendingApproval]) -> None:
    """Store a held batch's approvals in one Core statement; the objects given stay unattached. Their ids and
    creation time are set by the caller, so that events can name and show them; a row a standing approval decided
    is stored decided."""
    values = [{name: getattr(row, name) for name in _PENDING_COLUMNS} | _decided_values(row) for row in rows]
    session.execute(insert(PendingApproval), values)


def _decided_values(row: PendingApproval) -> dict[str, Any]:
    # Pending, or already decided by a standing approval (``grant_id``).
    return {
        "state": row.state or "pending",
        "decision": row.decision or "",
        "decision_message": row.decision_message or "",
        "decided_by": row.decided_by,
        "decided_at": row.decided_at,
        "grant_id": row.grant_id,
    }


_APPROVALS = cast(Table, PendingApproval.__table__)
# Built once; executed with one parameter set per decided row. Arguments are SQL NULL unless the decision is an
# edit, and the preview unless one was kept (a JSON column would otherwise store None as JSON ``null``).
_DECIDE = (
    update(_APPROVALS)
    .where(_APPROVALS.c.id == bindparam("approval_id"))
    .values(
        state="decided",
        decision=bindparam("decision"),
        decision_args=bindparam("decision_args", type_=JSONB(none_as_null=True)),
        decision_message=bindparam("decision_message"),
        decided_by=bindparam("decided_by"),
        decided_at=bindparam("decided_at"),
        decision_preview=bindparam("decision_preview", type_=JSONB(none_as_null=True)),
    )
)


def record_decisions(session: Session, decided: Sequence[tuple[PendingApproval, dict[str, Any]]]) -> None:
    """Store decisions on loaded rows in one statement: each pair is a row and its ``decision``,
    ``decision_args``, ``decision_message``, ``decided_by``, ``decided_at`` and ``decision_preview`` (the preview
    the decision keeps, or ``None``). The rows then read as stored."""
    if not decided:  # a request of votes alone, none of them final
        return
    session.execute(_DECIDE, [{"approval_id": row.id, "decision_preview": None, **values} for row, values in decided])
    for row, values in decided:
        for name, value in {"state": "decided", **values}.items():
            set_committed_value(row, name, value)


def reread_with_votes(session: Session, run: Run) -> list[PendingApproval]:
    """A locked run's approvals read again, with their votes, in statements that start after the lock was taken.

    The locking statement's join reads the approvals as they were when it *started*: a request that waited on the
    lock would not see the votes and decisions of the one it waited for, which leaves the run waiting.
    """
    statement = (
        select(PendingApproval)
        .where(PendingApproval.tenant_id == run.tenant_id, PendingApproval.run_id == run.id)
        .order_by(PendingApproval.created_at, PendingApproval.id)
        .options(selectinload(PendingApproval.votes))
        .execution_options(populate_existing=True)
    )
    return list(session.scalars(statement))


def record_votes(session: Session, votes: Sequence[tuple[PendingApproval, ApprovalVote]]) -> None:
    """Store votes on loaded rows in one statement: each pair is an approval and its new vote, which its ``votes``
    then include."""
    if not votes:
        return
    values = [
        {
            "id": vote.id,
            "tenant_id": vote.tenant_id,
            "run_id": vote.run_id,
            "approval_id": vote.approval_id,
            "user_id": vote.user_id,
            "vote": vote.vote,
            "message": vote.message,
            "created_at": vote.created_at,
        }
        for _, vote in votes
    ]
    session.execute(insert(ApprovalVote), values)
    for row, vote in votes:
        set_committed_value(row, "votes", [*row.votes, vote])
