"""What the audit trail says of a decision request: the approvals it names (never their arguments), the
``approval.decide`` row of each decision or vote, and the rows of a refusal."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from hango.agent.state import arguments_changed
from hango.kernel.auth import Principal
from hango.kernel.errors import Forbidden, HangoError
from hango.kernel.models import Outcome, PendingApproval, Run
from hango.services import approval_policy as policy
from hango.services.approvals.commands import CallRef, DecisionCommand, NamedCall
from hango.store.audit import AuditRecord


@dataclass(frozen=True)
class NamedApproval:
    """An approval a decision request names, with what the audit row may say about it (never arguments)."""

    id: uuid.UUID
    tool_call_id: str
    tool_name: str
    decision: str | None
    args_changed: bool | None
    # For a vote on a quorum approval: how many votes it has with this one, and how many approvals it needs.
    votes: int | None = None
    approvals_required: int = 1


def named_approvals(rows: list[PendingApproval], calls: tuple[NamedCall, ...]) -> list[NamedApproval]:
    """The known approvals a (possibly invalid) request names, each once, for the reviewers check and the audit
    rows: a call named by ``approval_id`` and ``tool_call_id`` counts as every approval either names."""
    named: dict[uuid.UUID, NamedApproval] = {}
    for call in calls:
        for row in _named_rows(rows, call.ref):
            if row.id not in named:
                changed = arguments_changed(row.arguments, call.args) if call.decision == "edit" else None
                named[row.id] = NamedApproval(row.id, row.tool_call_id, row.tool_name, call.decision, changed)
    return list(named.values())


def _named_rows(rows: list[PendingApproval], ref: CallRef) -> list[PendingApproval]:
    # Canonical values only: the approval id as a UUID, the call id exactly as the model wrote it.
    return [row for row in rows if row.id == ref.approval_id or row.tool_call_id == ref.tool_call_id]


def audit_detail(named: NamedApproval, decided_by: uuid.UUID) -> dict[str, Any]:
    """The ``approval.decide`` audit detail: who, what decision, which call — never arguments or messages."""
    detail: dict[str, Any] = {
        "decided_by": str(decided_by),
        "decision": named.decision,
        "tool_name": named.tool_name,
        "tool_call_id": named.tool_call_id,
    }
    if named.decision == "edit":
        detail["args_changed"] = named.args_changed
    if named.approvals_required > 1:
        detail |= {"vote": named.decision, "votes": named.votes, "approvals_required": named.approvals_required}
    return detail


def refusal_audit(
    principal: Principal, run: Run, named: list[NamedApproval], refusal: HangoError, trace_id: str | None
) -> list[AuditRecord]:
    """A refused request's rows: one per approval it names, or one for the run when it names none it knows."""
    outcome: Outcome = "denied" if isinstance(refusal, Forbidden) else "error"
    refused = {"refusal": type(refusal).__name__}
    if not named:
        return [_record(principal, "run", str(run.id), outcome, refused, trace_id)]
    return [
        _record(
            principal,
            "pending_approval",
            str(item.id),
            outcome,
            audit_detail(item, principal.user_id) | refused,
            trace_id,
        )
        for item in named
    ]


def decision_audit(
    principal: Principal,
    row: PendingApproval,
    decision: DecisionCommand,
    vote: policy.Vote | None,
    trace_id: str | None,
) -> AuditRecord:
    """The ``approval.decide`` row of one decision (or vote) on ``row``."""
    named = _named(row, decision, vote)
    detail = audit_detail(named, principal.user_id)
    return _record(principal, "pending_approval", str(named.id), "success", detail, trace_id)


def _named(row: PendingApproval, decision: DecisionCommand, vote: policy.Vote | None = None) -> NamedApproval:
    kind = decision.kind
    changed = arguments_changed(row.arguments, decision.args) if kind == "edit" else None
    if vote is not None:
        return NamedApproval(row.id, row.tool_call_id, row.tool_name, kind, changed, vote.count, row.approvals_required)
    return NamedApproval(row.id, row.tool_call_id, row.tool_name, kind, changed)


def _record(
    principal: Principal, kind: str, target_id: str, outcome: Outcome, detail: dict[str, Any], trace_id: str | None
) -> AuditRecord:
    return AuditRecord.by_user(principal, "approval.decide", (kind, target_id), outcome, detail, trace_id)
