"""The approval policy of one pending call: who may decide it, and how a quorum's votes add up.

A rule's ``reviewers`` (``{"roles": [...], "users": [...]}``, copied onto the approval at suspension) names who may
decide its calls: an owner or admin whose role is listed, or whose user id is. ``approvals_required`` N > 1 makes a
decision a *vote*: the call is approved by the N-th distinct approving reviewer, and refused by the first reject.
Every vote is an ``approval_votes`` row, written under the run's row lock like every decision.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from hango.agent.interrupts import REVIEWER_ROLES
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


def is_reviewer(user_id: uuid.UUID, role: str | None, reviewers: Mapping[str, Any] | None) -> bool:
    """Whether a user with this role in the tenant (None: none) may decide under ``reviewers`` (None: every
    owner and admin). A member never decides; user ids are compared as UUIDs, whatever their spelling."""
    if role not in REVIEWER_ROLES:
        return False
    if reviewers is None:
        return True
    return role in (reviewers.get("roles") or []) or user_id in user_ids(reviewers)


def user_ids(reviewers: Mapping[str, Any]) -> set[uuid.UUID]:
    """The users a ``reviewers`` object names, as UUIDs (a spelling that is not one names nobody)."""
    named = set()
    for user in reviewers.get("users") or []:
        try:
            named.add(uuid.UUID(str(user)))
        except ValueError:
            continue
    return named


def has_voted(principal: Principal, row: PendingApproval) -> bool:
    """Whether the caller already voted on this (quorum) approval."""
    return is_quorum(row) and any(vote.user_id == principal.user_id for vote in row.votes)


def awaits(principal: Principal, row: PendingApproval) -> bool:
    """Whether a pending call waits on the caller: theirs to decide, and not yet carrying their vote."""
    return row.state == "pending" and may_decide(principal, row) and not has_voted(principal, row)


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

    @property
    def count(self) -> int:
        """Votes on the approval with this one."""
        return len(self.row.votes) + 1


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
    return Vote(row, record, tally)
