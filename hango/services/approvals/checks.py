"""The checks of a decision request, in the contract's order after the role checks (403 reviewers, 400 names and
decisions, 409 state, votes, completeness and digests): functions of the command, the run's locked approvals and
what the service read for them — the approval policy's answers (:class:`~hango.services.approval_policy.Standing`)
and the rules that held each edited call — with no database or policy of their own. Each raises the refusal;
nothing is written."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set
from typing import Any

from hango.agent.grant_terms import exact_call, ttl_errors, when_errors
from hango.agent.interrupts import QUORUM_DECISIONS, InterruptRule
from hango.agent.tools.base import ToolRegistry
from hango.kernel.canonical import sha256_hex
from hango.kernel.config import Settings
from hango.kernel.errors import (
    AlreadyVoted,
    FieldError,
    Forbidden,
    InvalidInput,
    NotAwaitingApproval,
    PartialDecision,
    StaleApproval,
)
from hango.kernel.models import PendingApproval, Run
from hango.services.approval_policy import Standing
from hango.services.approvals.commands import DecisionCommand, Remember

# The rules of the loop that held each edited call, by approval id (read by the service).
HoldingRules = Mapping[uuid.UUID, Mapping[str, InterruptRule]]


def check_reviewers(rows: list[PendingApproval], standing: Mapping[uuid.UUID, Standing], named: Set[uuid.UUID]) -> None:
    """Refuse a request naming an approval whose rule reserves it for other reviewers.

    Judged on the approvals the body names as far as it can be read, before its validation: whoever may not decide
    a call learns that first, not how their decision is malformed. An ``approval_id`` counts in every spelling of
    its UUID, as the decision itself would resolve it.
    """
    for row in rows:
        if row.id in named and not standing[row.id].may_decide:
            raise Forbidden(
                f"approval {row.id} ({row.tool_name}) may be decided only by its reviewers: "
                f"{standing[row.id].reviewers}"
            )


def resolve(decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]) -> list[PendingApproval]:
    """The approval each decision names, in order; a 400 naming each reference that names none of the run's, names
    two different calls, or names a call a second time."""
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
        raise InvalidInput.of(errors)
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


def check_decisions(
    tools: ToolRegistry,
    holding: HoldingRules,
    standing: Mapping[uuid.UUID, Standing],
    decisions: tuple[DecisionCommand, ...],
    rows: list[PendingApproval],
) -> None:
    """Refuse a decision its call's rule does not allow, or an edit its tool's schema or its holding rule refuses."""
    errors: list[FieldError] = []
    for index, (decision, row) in enumerate(zip(decisions, rows, strict=True)):
        field = f"decisions[{index}]"
        if standing[row.id].quorum and decision.kind not in QUORUM_DECISIONS:
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
            rule = holding.get(row.id, {}).get(row.tool_name)
            errors += _edit_errors(tools, rule, row, decision.args or {}, f"{field}.args")
    if errors:
        raise InvalidInput.of(errors)


def _edit_errors(
    tools: ToolRegistry, rule: InterruptRule | None, row: PendingApproval, args: dict[str, Any], field: str
) -> list[FieldError]:
    tool = tools.get(row.tool_name)
    if tool is None:
        return [FieldError(field, f"the tool {row.tool_name} is not available to check the arguments against")]
    schema_errors = tool.argument_errors(args)
    if schema_errors:
        return [FieldError(f"{field}.{name}" if name else field, message) for name, message in schema_errors]
    if rule is not None and rule.when and not rule.matches(args):
        return [FieldError(field, "the edited arguments leave the scope of the rule that made this call wait")]
    return []


def check_remember(
    settings: Settings, tools: ToolRegistry, decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]
) -> None:
    """Refuse a ``remember`` that could not become a grant covering the call approved (400, nothing stored)."""
    errors: list[FieldError] = []
    for index, (decision, row) in enumerate(zip(decisions, rows, strict=True)):
        remember, field = decision.remember, f"decisions[{index}].remember"
        if remember is None:
            continue
        if row.approvals_required > 1:
            errors.append(FieldError(field, "a rule that needs several approvals is never remembered"))
            continue
        errors += ttl_errors(remember.ttl, settings, f"{field}.ttl")
        if remember.exact and not row.arguments:
            # Nothing to pin: the default would cover every call of the tool, more than was seen.
            errors.append(FieldError(f"{field}.when", "the call has no arguments: name a when (null: every call)"))
            continue
        when = remembered_when(tools, remember, row)
        found = when_errors(when, settings, f"{field}.when")
        if not found and not remember.exact and not InterruptRule((), when=when).matches(row.arguments):
            found = [FieldError(f"{field}.when", "does not match the call approved")]
        errors += found
    if errors:
        raise InvalidInput.of(errors)


def remembered_when(tools: ToolRegistry, remember: Remember, row: PendingApproval) -> dict[str, Any] | None:
    """The ``when`` a ``remember`` asks for: its own (``None``: every call), or by default exactly this call, every
    argument pinned, the tool's defaults included."""
    return exact_call(row.arguments, tools.get(row.tool_name)) if remember.exact else remember.when


def check_complete(
    run: Run, rows: list[PendingApproval], standing: Mapping[uuid.UUID, Standing], chosen: list[PendingApproval]
) -> None:
    """Refuse a request the run has moved past (409), a call already decided or a second vote on a quorum call,
    and a request that leaves a call waiting on the caller undecided (a partial decision)."""
    # The row lock is held: the state read here is the one the transition will find.
    if run.state != "awaiting_approval":
        raise NotAwaitingApproval(f"run {run.id} is {run.state}, not awaiting approval")
    stale = [row for row in chosen if row.state != "pending"]
    if stale:
        raise NotAwaitingApproval(f"approval {stale[0].id} is already {stale[0].state}")
    voted = [row for row in chosen if standing[row.id].voted]
    if voted:
        raise AlreadyVoted(
            f"approval {voted[0].id} ({voted[0].tool_name}) already has your vote; "
            f"it needs {voted[0].approvals_required} distinct reviewers"
        )
    # Calls reserved for other reviewers, or already carrying the caller's vote, wait on others: not named here.
    remaining = [row for row in rows if standing[row.id].awaits and row not in chosen]
    if remaining:
        raise PartialDecision(
            f"{len(remaining)} pending call(s) of this run have no decision; decide them all in one request",
            [{"id": str(row.id), "tool_call_id": row.tool_call_id, "tool_name": row.tool_name} for row in remaining],
        )


def check_seen(decisions: tuple[DecisionCommand, ...], rows: list[PendingApproval]) -> None:
    """Refuse decisions bound to arguments other than the call's (a reviewer's stale or forged view)."""
    for decision, row in zip(decisions, rows, strict=True):
        seen = decision.arguments_sha256
        if seen is not None and seen != sha256_hex(row.arguments):
            raise StaleApproval(
                f"approval {row.id}: the decision was made on other arguments than the call's "
                f"(arguments_sha256 {seen} is not theirs); read the approval again"
            )
