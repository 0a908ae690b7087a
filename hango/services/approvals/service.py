"""The decision service: one unit of work that checks a decision request (:mod:`.checks`), stores its decisions
and votes with their audit rows (:mod:`.audit`) and moves the run; and the approval lists.

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

What the reviewer saw is kept: each approve or edit that decides a ``write_file`` or ``edit_file`` call keeps the
preview of the call (:mod:`hango.services.previews`) worked out in the same transaction, with the arguments that
will run, so the decided approval still shows the change once the call has written its file.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from hango.agent.interrupts import compile_rules
from hango.agent.mcp import default_rules, pinned_of
from hango.agent.spec import AgentSpec
from hango.agent.tools.base import ToolLimits
from hango.agent.tools.mcp import with_pinned
from hango.kernel.auth import Principal
from hango.kernel.errors import Forbidden, HangoError
from hango.kernel.models import PendingApproval, Run
from hango.kernel.pagination import Page, PageRequest
from hango.kernel.telemetry import link_decision
from hango.platform.runtime import Runtime
from hango.platform.work import Work, unit_of_work
from hango.run import transitions
from hango.services import approval_policy as policy
from hango.services import grants, previews
from hango.services.approvals import audit, checks
from hango.services.approvals.commands import DecisionCommand, Malformed, Request
from hango.services.grants import GrantSpec
from hango.store import approvals as store
from hango.store import subagent_calls as subagent_store
from hango.store.audit import insert_audit_events
from hango.store.files import one_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decided:
    """What a successful decision request committed."""

    run: Run
    approvals: list[PendingApproval]
    # The grant each ``remember`` created, by approval id.
    remembered: dict[uuid.UUID, uuid.UUID] = field(default_factory=dict)


def decide(
    runtime: Runtime, principal: Principal, run_id: uuid.UUID, request: Request, trace_id: str | None = None
) -> Decided:
    """Store a complete set of decisions and queue the run again; see the module docstring for the order.

    Authorisation, the row lock, validation, the writes and the ``approval.decide`` audit rows share one
    transaction: a decision never exists without its row, and a refused request (403, 400, 409 on a visible run)
    leaves only its audit rows, marked on the raised error as :attr:`~hango.kernel.errors.HangoError.audited`.
    """
    with unit_of_work(runtime) as work:
        run, rows, self_approval = store.locked_for_decision(work.session, principal, run_id)
        if policy.has_policy(rows) or any(row.on_expiry is not None for row in rows):
            # Calls of this batch may have been voted on, decided, rejected by their deadline or escalated while
            # this request waited for the lock.
            rows = store.reread_with_votes(work.session, run)
        suspended = run.trace_context  # the suspended run's span, read under the lock that decides
        agent = AgentSpec.of_snapshot(run.agent_snapshot)
        try:
            decisions, chosen = _checked(runtime, work.session, principal, run, agent, rows, request, self_approval)
            remembered = _remembered(runtime, work.session, principal, run, decisions, chosen)
        except HangoError as refusal:
            # Every check comes before the first write, so the refusal's audit rows are all this commits.
            named = audit.named_approvals(rows, request.named)
            insert_audit_events(work.session, audit.refusal_audit(principal, run, named, refusal, trace_id))
            refusal.audited = True
            refused: HangoError | None = refusal
        else:
            refused = None
            _store_decisions(runtime, work, principal, run, rows, decisions, chosen, trace_id)
            # One call into the grants service, which creates and audits what the decisions remember.
            granted = grants.remember(work.session, runtime.settings, principal, remembered, agent, trace_id)
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
    agent: AgentSpec,
    rows: list[PendingApproval],
    request: Request,
    self_approval: bool,
) -> tuple[tuple[DecisionCommand, ...], list[PendingApproval]]:
    """The request's decisions and the approvals they name, once every check passed (403, then 400, then 409);
    ``self_approval`` is the tenant's policy, read with the run's lock."""
    if not principal.is_manager:
        raise Forbidden("only an owner or admin may decide approvals; a member never may, not even for their own run")
    if run.created_by == principal.user_id and not self_approval:
        raise Forbidden("this tenant's policy forbids self-approval: the run's creator may not decide its approvals")
    standing = policy.standing(principal, rows)
    checks.check_reviewers(rows, standing, {item.id for item in audit.named_approvals(rows, request.named)})
    if isinstance(request, Malformed):
        raise request.error
    decisions = request.decisions
    chosen = checks.resolve(decisions, rows)
    holding = _holding_rules(session, run, agent, decisions, chosen)
    # An MCP call's edit meets the input schema the run pinned, not the server's schema of today.
    tools = with_pinned(runtime.tools, run.mcp_tools)
    checks.check_decisions(tools, holding, standing, decisions, chosen)
    checks.check_remember(runtime.settings, tools, decisions, chosen)
    checks.check_complete(run, rows, standing, chosen)
    checks.check_seen(decisions, chosen)
    return decisions, chosen


def _store_decisions(
    runtime: Runtime,
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
    records = [
        audit.decision_audit(principal, row, decision, votes.get(row.id), trace_id)
        for decision, row in zip(decisions, chosen, strict=True)
    ]
    deciding = [
        (decision, row)
        for decision, row in zip(decisions, chosen, strict=True)
        if row.id not in votes or votes[row.id].tally != "pending"
    ]
    kept = _kept_previews(runtime, work.session, run, deciding)
    decided = [
        (row, {**_decided_values(principal, decision, now), "decision_preview": kept.get(row.id)})
        for decision, row in deciding
    ]
    store.record_votes(work.session, [(vote.row, vote.record) for vote in votes.values()])
    store.record_decisions(work.session, decided)
    decided_rows = [row for row, _ in decided]
    if any(row.state == "pending" for row in rows):
        transitions.decided_waiting(work, run, decided_rows)
    else:
        transitions.requeue_decided(work, run, decided_rows)
    insert_audit_events(work.session, records)


def _kept_previews(
    runtime: Runtime, session: Session, run: Run, deciding: list[tuple[DecisionCommand, PendingApproval]]
) -> dict[uuid.UUID, dict[str, Any]]:
    """The previews the deciding approves and edits keep, by approval id: what each call will make of its file,
    worked out on the file as it is now with the arguments that will run (an edit's own), within the preview
    limits. A reject or a respond runs nothing, and a call that writes no file has nothing to keep."""
    limits, diff_limits = ToolLimits.of(runtime.settings), previews.DiffLimits.of(runtime.settings)
    kept = {}
    for decision, row in deciding:
        if decision.kind not in ("approve", "edit"):
            continue
        arguments = decision.args if decision.kind == "edit" and decision.args is not None else row.arguments
        path = previews.planned_path(runtime.tools, row.tool_name, arguments)
        if path is None:
            continue
        # The planning reads a copy of the one file it changes, so the agent core never calls up into the store.
        files = one_file(session, run, path)
        preview = previews.kept_preview(runtime.tools, files, limits, diff_limits, row.tool_name, arguments)
        if preview is not None:
            kept[row.id] = preview
    return kept


def _vote(decision: DecisionCommand) -> policy.VoteKind:
    # checks.check_decisions allows only approve and reject on a quorum's approval.
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


def _holding_rules(
    session: Session, run: Run, agent: AgentSpec, decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]
) -> checks.HoldingRules:
    """The rules of the loop that held each edited call: the agent's, or those its subagent applies (its own, or
    inherited from the loop that started it), as the worker applies them when the edit runs."""
    holding = {}
    mcp_defaults = default_rules(pinned_of(run.mcp_tools).values())
    for decision, row in zip(decisions, rows, strict=True):
        if decision.kind == "edit":
            lineage = subagent_store.lineage(session, run.id, row.subagent_call_id) if row.subagent_call_id else []
            holding[row.id] = compile_rules(agent.loop_rules(lineage), mcp_defaults)
    return holding


def _remembered(
    runtime: Runtime,
    session: Session,
    principal: Principal,
    run: Run,
    decisions: tuple[DecisionCommand, ...],
    rows: list[PendingApproval],
) -> list[tuple[uuid.UUID, GrantSpec]]:
    """The grants the decisions ask to remember, by approval id: the run's agent, the call's tool, the checked
    ``when`` (by default exactly the call, every argument pinned), any run. A 409 if they would pass the tenant's
    limit."""
    remembered = []
    for decision, row in zip(decisions, rows, strict=True):
        remember = decision.remember
        if remember is not None:
            when = checks.remembered_when(with_pinned(runtime.tools, run.mcp_tools), remember, row)
            spec = GrantSpec(run.agent_id, row.tool_name, remember.ttl, when, exact=remember.exact)
            remembered.append((row.id, spec))
    if remembered:
        grants.check_quota(session, runtime.settings, principal.tenant_id, datetime.now(UTC), len(remembered))
    return remembered


def list_for_run(
    runtime: Runtime, principal: Principal, run_id: uuid.UUID, state: str, page: PageRequest
) -> Page[PendingApproval]:
    """A visible run's approvals."""
    with runtime.db.transaction() as session:
        return store.list_for_run(session, principal, run_id, state, page)


def list_for_tenant(
    runtime: Runtime, principal: Principal, state: str, page: PageRequest, newest: bool = False
) -> Page[PendingApproval]:
    """The tenant's approval queue (a member: their own runs'), oldest first, or newest first."""
    with runtime.db.transaction() as session:
        return store.list_for_tenant(session, principal, state, page, newest)
