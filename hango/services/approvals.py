"""Approval services: the decisions API, the approval lists, and what the audit trail names.

A decision request is checked in the contract's order — 404 (run not visible), 403 (not an owner or admin; a
member never decides, the run's creator included; the creator when the tenant forbids self-approval; a caller who
is not among the reviewers of an approval the request names), 400 (malformed or invalid decisions; nothing
stored), 409 (run no longer waiting, a second vote by the same user, decisions not covering every pending call that
waits on the caller, or a decision bound by ``arguments_sha256`` to other arguments than the call's; nothing
stored) — and then, in one transaction, stores every decision and, once no call of the batch is pending, moves the
run ``awaiting_approval → queued`` under its row lock. Two concurrent final decisions therefore produce one
transition: the second finds the run already ``queued`` and gets a 409.

The approval policy (:mod:`hango.services.approval_policy`): on an approval of a quorum rule a decision is a vote, an
``approval_votes`` row; the approval is decided by the N-th distinct approve or the first reject, and until then
stays ``pending`` while the run waits. A request must cover every pending call *that waits on the caller*: calls
reserved for other reviewers, and quorum calls that already carry the caller's vote, are left to the others.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from hango.agent.interrupts import QUORUM_DECISIONS, InterruptRule, compile_rules, loop_interrupt_config
from hango.agent.state import arguments_changed
from hango.kernel.auth import Principal
from hango.kernel.canonical import sha256_hex
from hango.kernel.errors import (
    AlreadyVoted,
    FieldError,
    Forbidden,
    HangoError,
    InvalidInput,
    NotAwaitingApproval,
    PartialDecision,
    StaleApproval,
)
from hango.kernel.models import Grant, Outcome, PendingApproval, Run
from hango.kernel.pagination import Page, PageRequest
from hango.kernel.telemetry import link_decision
from hango.platform.runtime import Runtime
from hango.platform.work import Work, unit_of_work
from hango.run import transitions
from hango.services import approval_policy as policy
from hango.services.approval_requests import (
    CallRef,
    DecisionCommand,
    DecisionRequest,
    NamedCall,
    Remember,
    read_request,
)
from hango.services.grants import GrantSpec, add_grant, check_quota, exact_call, ttl_errors, when_errors
from hango.services.grants import audit_detail as grant_audit_detail
from hango.store import approvals as store
from hango.store import subagent_calls as subagent_store
from hango.store import tenants as tenant_store
from hango.store.audit import AuditRecord, insert_audit_events

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Decided:
    """What a successful decision request committed."""

    run: Run
    approvals: list[PendingApproval]
    # The grant each ``remember`` created, by approval id.
    remembered: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)


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


def decide(
    runtime: Runtime, principal: Principal, run_id: uuid.UUID, body: Any, trace_id: str | None = None
) -> Decided:
    """Store a complete set of decisions and queue the run again; see the module docstring for the order.

    Authorisation, the row lock, validation, the writes and the ``approval.decide`` audit rows share one
    transaction: a decision never exists without its row, and a refused request (403, 400, 409 on a visible run)
    leaves only its audit rows, marked on the raised error as :attr:`~hango.kernel.errors.HangoError.audited`.
    """
    request = read_request(body)
    with unit_of_work(runtime) as work:
        run, rows = store.locked_with_approvals(work.session, principal, run_id)
        if policy.has_policy(rows) or any(row.on_expiry is not None for row in rows):
            # Calls of this batch may have been voted on, decided, rejected by their deadline or escalated while
            # this request waited for the lock.
            rows = store.reread_with_votes(work.session, run)
        suspended = run.trace_context  # the suspended run's span, read under the lock that decides
        try:
            decisions, chosen = _checked(runtime, work.session, principal, run, rows, request)
            remembered = _remembered(runtime, work.session, principal, run, decisions, chosen)
        except HangoError as refusal:
            # Every check comes before the first write, so the refusal's audit rows are all this commits.
            named = named_approvals(rows, request.named)
            insert_audit_events(work.session, _refusal_audit(principal, run, named, refusal, trace_id))
            refusal.audited = True
            refused: HangoError | None = refusal
        else:
            refused = None
            _store_decisions(work, principal, run, rows, decisions, chosen, trace_id)
            granted = _store_remembered(runtime, work.session, principal, run, remembered, trace_id)
    if refused is not None:
        raise refused
    link_decision(suspended, str(run.id), len(chosen), str(principal.user_id))
    for row in chosen:
        _log_decided(row, principal, trace_id)
    return Decided(run, chosen, granted)


def _log_decided(row: PendingApproval, principal: Principal, trace_id: str | None) -> None:
    """The decision's log line, with the ``trace_id`` of its audit row.

    With tracing on that is the request span's trace, which the log formatter would add anyway; with tracing off it
    is still the id the audit row has (the caller's ``traceparent`` or a fresh one), so the line joins the row.
    """
    extra = {
        "run_id": str(row.run_id),
        "tool": row.tool_name,
        "tool_call_id": row.tool_call_id,
        "decision": row.decision or "vote",
        "decided_by": str(principal.user_id),
    }
    if trace_id is not None:
        extra["trace_id"] = trace_id
    log.info("approval decided" if row.state == "decided" else "approval vote recorded", extra=extra)


def _checked(
    runtime: Runtime,
    session: Session,
    principal: Principal,
    run: Run,
    rows: list[PendingApproval],
    request: DecisionRequest,
) -> tuple[tuple[DecisionCommand, ...], list[PendingApproval]]:
    """The request's decisions and the approvals they name, once every check passed (403, then 400, then 409)."""
    if not principal.is_manager:
        raise Forbidden("only an owner or admin may decide approvals; a member never may, not even for their own run")
    if run.created_by == principal.user_id and not tenant_store.allows_self_approval(session, principal.tenant_id):
        raise Forbidden("this tenant's policy forbids self-approval: the run's creator may not decide its approvals")
    _check_reviewers(principal, rows, named_approvals(rows, request.named))
    if request.invalid is not None:
        raise request.invalid
    decisions = request.decisions
    chosen = _resolve(decisions, rows)
    _check(runtime, session, run, decisions, chosen)
    _check_remember(runtime, decisions, chosen)
    _check_complete(principal, run, rows, chosen)
    _check_seen(decisions, chosen)
    return decisions, chosen


def _check_reviewers(principal: Principal, rows: list[PendingApproval], named: list[NamedApproval]) -> None:
    """Refuse a request naming an approval whose rule reserves it for other reviewers.

    Judged on the approvals the body names as far as it can be read, before its validation: whoever may not decide
    a call learns that first, not how their decision is malformed. An ``approval_id`` counts in every spelling of
    its UUID, as the decision itself would resolve it.
    """
    ids = {item.id for item in named}
    for row in rows:
        if row.id in ids and not policy.may_decide(principal, row):
            raise Forbidden(
                f"approval {row.id} ({row.tool_name}) may be decided only by its reviewers: "
                f"{policy.reviewers_text(row)}"
            )


def _store_decisions(
    work: Work,
    principal: Principal,
    run: Run,
    rows: list[PendingApproval],
    decisions: tuple[DecisionCommand, ...],
    chosen: list[PendingApproval],
    trace_id: str | None,
) -> None:
    """Write the request's decisions and votes, then queue the run if no call of its batch is left pending."""
    now = datetime.now(UTC)
    votes = {
        row.id: policy.cast_vote(principal, row, _vote(decision), decision.message, now)
        for decision, row in zip(decisions, chosen, strict=True)
        if policy.is_quorum(row)
    }
    audit = [
        _audit(principal, _named(row, decision, votes.get(row.id)), trace_id)
        for decision, row in zip(decisions, chosen, strict=True)
    ]
    decided = [
        (row, _decided_values(principal, decision, now))
        for decision, row in zip(decisions, chosen, strict=True)
        if row.id not in votes or votes[row.id].tally != "pending"
    ]
    store.record_votes(work.session, [(vote.row, vote.record) for vote in votes.values()])
    store.record_decisions(work.session, decided)
    decided_rows = [row for row, _ in decided]
    if any(row.state == "pending" for row in rows):
        transitions.decided_waiting(work, run, decided_rows)
    else:
        transitions.requeue_decided(work, run, decided_rows)
    insert_audit_events(work.session, audit)


def _vote(decision: DecisionCommand) -> policy.VoteKind:
    # _check allows only approve and reject on a quorum's approval.
    return "approve" if decision.kind == "approve" else "reject"


def _decided_values(principal: Principal, decision: DecisionCommand, now: datetime) -> dict[str, Any]:
    """What a decided approval stores: a quorum's last vote decides it as a plain decision would."""
    return {
        "decision": decision.kind,
        "decision_args": decision.args,
        "decision_message": decision.message,
        "decided_by": principal.user_id,
        "decided_at": now,
    }


def _refusal_audit(
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


def _named(row: PendingApproval, decision: DecisionCommand, vote: policy.Vote | None = None) -> NamedApproval:
    kind = decision.kind
    changed = arguments_changed(row.arguments, decision.args) if kind == "edit" else None
    if vote is not None:
        return NamedApproval(row.id, row.tool_call_id, row.tool_name, kind, changed, vote.count, row.approvals_required)
    return NamedApproval(row.id, row.tool_call_id, row.tool_name, kind, changed)


def _audit(principal: Principal, named: NamedApproval, trace_id: str | None) -> AuditRecord:
    detail = audit_detail(named, principal.user_id)
    return _record(principal, "pending_approval", str(named.id), "success", detail, trace_id)


def _record(
    principal: Principal, kind: str, target_id: str, outcome: Outcome, detail: dict[str, Any], trace_id: str | None
) -> AuditRecord:
    return AuditRecord.by_user(principal, "approval.decide", (kind, target_id), outcome, detail, trace_id)


def _resolve(decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]) -> list[PendingApproval]:
    by_id = {row.id: row for row in rows}
    by_call = {row.tool_call_id: row for row in rows}
    chosen: list[PendingApproval] = []
    errors: list[FieldError] = []
    for index, decision in enumerate(decisions):
        row, error = _row_for(decision, by_id, by_call)
        if error is not None:
            errors.append(FieldError(f"decisions[{index}].{error[0]}", error[1]))
            continue
        assert row is not None
        if row in chosen:
            errors.append(FieldError(f"decisions[{index}]", f"call {row.tool_call_id} is named twice"))
        chosen.append(row)
    if errors:
        raise InvalidInput("; ".join(f"{e.field}: {e.message}" for e in errors), errors)
    return chosen


def _row_for(
    decision: DecisionCommand, by_id: dict[uuid.UUID, PendingApproval], by_call: dict[str, PendingApproval]
) -> tuple[PendingApproval | None, tuple[str, str] | None]:
    ref = decision.ref
    from_id = by_id.get(ref.approval_id) if ref.approval_id is not None else None
    from_call = by_call.get(ref.tool_call_id) if ref.tool_call_id is not None else None
    if ref.approval_id is not None and from_id is None:
        return None, ("approval_id", "no such approval in this run")
    if ref.tool_call_id is not None and from_call is None:
        return None, ("tool_call_id", "no pending call with this id in this run")
    if from_id is not None and from_call is not None and from_id is not from_call:
        return None, ("approval_id", "approval_id and tool_call_id name different calls")
    return from_id or from_call, None


def _check(
    runtime: Runtime, session: Session, run: Run, decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]
) -> None:
    errors: list[FieldError] = []
    for index, (decision, row) in enumerate(zip(decisions, rows, strict=True)):
        field = f"decisions[{index}]"
        if policy.is_quorum(row) and decision.kind not in QUORUM_DECISIONS:
            errors.append(
                FieldError(
                    f"{field}.decision",
                    f"{row.tool_name} needs {row.approvals_required} approvals: only approve or reject is a vote",
                )
            )
            continue
        if decision.kind not in row.allowed_decisions:
            allowed = ", ".join(row.allowed_decisions)
            errors.append(
                FieldError(f"{field}.decision", f"{decision.kind} is not allowed for {row.tool_name} ({allowed})")
            )
            continue
        if decision.kind == "edit":
            # An edit must stay inside the rule that made the call wait: the rules of the loop that held it.
            rule = _holding_rules(session, run, row).get(row.tool_name)
            errors += _edit_errors(runtime, rule, row, decision.args or {}, f"{field}.args")
    if errors:
        raise InvalidInput("; ".join(f"{e.field}: {e.message}" for e in errors), errors)


def _holding_rules(session: Session, run: Run, row: PendingApproval) -> dict[str, InterruptRule]:
    """The rules of the loop that held the call: the agent's, or those its subagent applies (its own, or inherited
    from the loop that started it), as the worker applies them when the edit runs."""
    lineage = subagent_store.lineage(session, run.id, row.subagent_call_id) if row.subagent_call_id else []
    return compile_rules(loop_interrupt_config(run.agent_snapshot, lineage))


def _edit_errors(
    runtime: Runtime, rule: Any, row: PendingApproval, args: dict[str, Any], field: str
) -> list[FieldError]:
    tool = runtime.tools.get(row.tool_name)
    if tool is None:
        return [FieldError(field, f"the tool {row.tool_name} is not available to check the arguments against")]
    schema_errors = tool.argument_errors(args)
    if schema_errors:
        return [FieldError(f"{field}.{name}" if name else field, message) for name, message in schema_errors]
    if rule is not None and rule.when and not rule.matches(args):
        return [FieldError(field, "the edited arguments leave the scope of the rule that made this call wait")]
    return []


def _check_remember(runtime: Runtime, decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]) -> None:
    """Refuse a ``remember`` that could not become a grant covering the call approved (400, nothing stored)."""
    errors: list[FieldError] = []
    for index, (decision, row) in enumerate(zip(decisions, rows, strict=True)):
        remember, field = decision.remember, f"decisions[{index}].remember"
        if remember is None:
            continue
        if row.approvals_required > 1:
            errors.append(FieldError(field, "a rule that needs several approvals is never remembered"))
            continue
        errors += ttl_errors(remember.ttl, runtime.settings, f"{field}.ttl")
        if remember.exact and not row.arguments:
            # Nothing to pin: the default would cover every call of the tool, more than was seen.
            errors.append(FieldError(f"{field}.when", "the call has no arguments: name a when (null: every call)"))
            continue
        when = _remembered_when(runtime, remember, row)
        found = when_errors(when, runtime.settings, f"{field}.when")
        if not found and not remember.exact and not InterruptRule((), when=when).matches(row.arguments):
            found = [FieldError(f"{field}.when", "does not match the call approved")]
        errors += found
    if errors:
        raise InvalidInput("; ".join(f"{e.field}: {e.message}" for e in errors), errors)


def _remembered_when(runtime: Runtime, remember: Remember, row: PendingApproval) -> dict[str, Any] | None:
    """The ``when`` a ``remember`` asks for: its own (``None``: every call), or by default exactly this call, every
    argument pinned, the tool's defaults included."""
    return exact_call(row.arguments, runtime.tools.get(row.tool_name)) if remember.exact else remember.when


def _remembered(
    runtime: Runtime,
    session: Session,
    principal: Principal,
    run: Run,
    decisions: tuple[DecisionCommand, ...],
    rows: list[PendingApproval],
) -> list[tuple[PendingApproval, GrantSpec]]:
    """The grants the decisions ask to remember, by approval: the run's agent, the call's tool, the checked
    ``when`` (by default exactly the call, every argument pinned), any run. A 409 if they would pass the tenant's
    limit."""
    remembered = []
    for decision, row in zip(decisions, rows, strict=True):
        remember = decision.remember
        if remember is not None:
            when = _remembered_when(runtime, remember, row)
            spec = GrantSpec(run.agent_id, row.tool_name, remember.ttl, when, exact=remember.exact)
            remembered.append((row, spec))
    if remembered:
        check_quota(session, runtime.settings, principal.tenant_id, datetime.now(UTC), len(remembered))
    return remembered


def _store_remembered(
    runtime: Runtime,
    session: Session,
    principal: Principal,
    run: Run,
    remembered: list[tuple[PendingApproval, GrantSpec]],
    trace_id: str | None,
) -> dict[uuid.UUID, uuid.UUID]:
    """Create the remembered grants, each audited ``grant.create`` with the approval that asked for it.

    Each is judged by the run's rules, under which the caller has just decided the call (so it applies at least
    there); whether it applies to a later call is judged then, by that call's rule and its creator's role.
    """
    now = datetime.now(UTC)
    created: dict[uuid.UUID, Grant] = {
        row.id: add_grant(session, runtime.settings, principal, spec, now, judged_by=run.agent_snapshot)
        for row, spec in remembered
    }
    audit = [
        AuditRecord.by_user(
            principal,
            "grant.create",
            ("grant", str(grant.id)),
            "success",
            {**grant_audit_detail(grant), "approval_id": str(approval_id)},
            trace_id,
        )
        for approval_id, grant in created.items()
    ]
    insert_audit_events(session, audit)
    return {approval_id: grant.id for approval_id, grant in created.items()}


def _check_complete(principal: Principal, run: Run, rows: list[PendingApproval], chosen: list[PendingApproval]) -> None:
    # The row lock is held: the state read here is the one the transition will find.
    if run.state != "awaiting_approval":
        raise NotAwaitingApproval(f"run {run.id} is {run.state}, not awaiting approval")
    stale = [row for row in chosen if row.state != "pending"]
    if stale:
        raise NotAwaitingApproval(f"approval {stale[0].id} is already {stale[0].state}")
    voted = [row for row in chosen if policy.has_voted(principal, row)]
    if voted:
        raise AlreadyVoted(
            f"approval {voted[0].id} ({voted[0].tool_name}) already has your vote; "
            f"it needs {voted[0].approvals_required} distinct reviewers"
        )
    # Calls reserved for other reviewers, or already carrying the caller's vote, wait on others: not named here.
    remaining = [row for row in rows if policy.awaits(principal, row) and row not in chosen]
    if remaining:
        raise PartialDecision(
            f"{len(remaining)} pending call(s) of this run have no decision; decide them all in one request",
            [{"id": str(row.id), "tool_call_id": row.tool_call_id, "tool_name": row.tool_name} for row in remaining],
        )


def _check_seen(decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]) -> None:
    """Refuse decisions bound to arguments other than the call's (a reviewer's stale or forged view)."""
    for decision, row in zip(decisions, rows, strict=True):
        seen = decision.arguments_sha256
        if seen is not None and seen != sha256_hex(row.arguments):
            raise StaleApproval(
                f"approval {row.id}: the decision was made on other arguments than the call's "
                f"(arguments_sha256 {seen} is not theirs); read the approval again"
            )


def list_for_run(
    runtime: Runtime, principal: Principal, run_id: uuid.UUID, state: str, page: PageRequest
) -> Page[PendingApproval]:
    """A visible run's approvals."""
    with runtime.db.transaction() as session:
        return store.list_for_run(session, principal, run_id, state, page)


def list_for_tenant(runtime: Runtime, principal: Principal, state: str, page: PageRequest) -> Page[PendingApproval]:
    """The tenant's approval queue (a member: their own runs')."""
    with runtime.db.transaction() as session:
        return store.list_for_tenant(session, principal, state, page)
