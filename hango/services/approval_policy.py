"""The approval policy of one pending call: who may decide it, and how a quorum's votes add up.

A rule's ``reviewers`` (``{"roles": [...], "users": [...]}``, copied onto the approval at suspension) names who may
decide its calls: an owner or admin whose role is listed, or whose user id is. ``approvals_required`` N > 1 makes a
decision a *vote*: the call is approved by the N-th distinct approving reviewer, and refused by the first reject.
Every vote is an ``approval_votes`` row, written under the run's row lock like every decision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from hango.agent.interrupts import is_reviewer
from hango.kernel.auth import Principal
from hango.kernel.models import ApprovalVote, PendingApproval

Tally = Literal["pending", "approved", "rejected"]
VoteKind = Literal["approve", "reject"]


def is_quorum(row: PendingApproval) -> bool:
    """Whether deciding this call takes more than one reviewer's approval."""
    return (row.approvals_required or 1) > 1


def has_policy(rows: list[PendingApproval]) -> bool:
    """Whether any of a run's approvals names reviewers or needs a quorum: only then can some calls of a batch be
    decided (or voted on) while the run keeps waiting for the others."""
    return any(row.reviewers is not None or is_quorum(row) for row in rows)


def may_decide(principal: Principal, row: PendingApproval) -> bool:
    """Whether the caller is one of the approval's reviewers (anyone who may decide at all, when it names none)."""
    return is_reviewer(principal.user_id, principal.role, row.reviewers)


def has_voted(principal: Principal, row: PendingApproval) -> bool:
    """Whether the caller already voted on this (quorum) approval."""
    return is_quorum(row) and any(vote.user_id == principal.user_id for vote in row.votes)


def awaits(principal: Principal, row: PendingApproval) -> bool:
    """Whether a pending call waits on the caller: theirs to decide, and not yet carrying their vote."""
    return row.state == "pending" and may_decide(principal, row) and not has_voted(principal, row)


@dataclass(frozen=True)
class Standing:
    """Where one of a run's approvals stands for the caller: the policy's answers, which the decision's checks read
    as values."""

    may_decide: bool  # the caller is one of its reviewers
    quorum: bool  # deciding it takes more than one approval
    voted: bool  # the caller's vote is already on it
    awaits: bool  # it is pending and waits on the caller
    reviewers: str  # who may decide it, for a refusal's detail


def standing(principal: Principal, rows: list[PendingApproval]) -> dict[uuid.UUID, Standing]:
    """Where each approval stands for the caller, by approval id."""
    return {
        row.id: Standing(
            may_decide(principal, row),
            is_quorum(row),
            has_voted(principal, row),
            awaits(principal, row),
            reviewers_text(row),
        )
        for row in rows
    }


def reviewers_text(row: PendingApproval) -> str:
    """Who may decide an approval, for a refusal's detail."""
    reviewers = row.reviewers or {}
    named = [f"role {role}" for role in reviewers.get("roles") or []]
    named += [f"user {user}" for user in reviewers.get("users") or []]
    return ", ".join(named) or "owners and admins"


@dataclass(frozen=True)
class Vote:
    """One reviewer's vote, as it is about to be stored, and where it leaves the approval."""

    row: PendingApproval
    record: ApprovalVote
    tally: Tally
    count: int  # votes on the approval with this one


def cast_vote(principal: Principal, row: PendingApproval, vote: VoteKind, message: str, now: datetime) -> Vote:
    """The caller's vote on a quorum approval and its outcome: the first reject refuses the call, the N-th distinct
    approve approves it, anything before that leaves it pending."""
    record = ApprovalVote(
        id=uuid.uuid4(),
        tenant_id=row.tenant_id,
        run_id=row.run_id,
        approval_id=row.id,
        user_id=principal.user_id,
        vote=vote,
        message=message,
        created_at=now,
    )
    approvals = sum(1 for earlier in row.votes if earlier.vote == "approve") + (vote == "approve")
    tally: Tally = "rejected" if vote == "reject" else "approved" if approvals >= row.approvals_required else "pending"
    return Vote(row, record, tally, len(row.votes) + 1)
