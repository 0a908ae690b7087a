"""Standing approvals (grants): create, list, revoke, and a decision's ``remember``.

A grant says "calls of this agent's ``tool_name`` that match ``when`` (and, if set, belong to ``run_id``) are
approved until ``expires_at``". It is consulted only where an interrupt rule would suspend the call: the loop asks
:func:`hango.run.standing.live_grant`, and when one answers it records the call as an approval already decided
instead of waiting for a human. A grant never widens what a rule lets through; it only
spares a human the same decision again. It never applies to a rule with ``approvals_required`` above 1, nor to
one that does not allow ``approve`` (the loop does not ask for those).

Owners and admins only. The API's functions own their transactions; :func:`add_grant` and :func:`remember` work in
the caller's.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from hango.agent.grant_terms import ttl_errors, when_errors
from hango.agent.interrupts import InterruptRule, is_reviewer, rule_sets
from hango.agent.mcp import is_mcp_name
from hango.agent.spec import AgentSpec
from hango.kernel.auth import Principal
from hango.kernel.config import Settings, parse_duration
from hango.kernel.errors import Conflict, FieldError, InvalidInput
from hango.kernel.models import Grant
from hango.kernel.pagination import Page, PageRequest
from hango.platform.runtime import Runtime
from hango.services.tenancy import require_manager
from hango.store import agents as agent_store
from hango.store import grants as store
from hango.store.audit import AuditRecord, insert_audit_events
from hango.store.grants import GrantFilter
from hango.store.tenants import allows_self_approval

__all__ = [
    "GrantFilter",
    "GrantSpec",
    "add_grant",
    "audit_detail",
    "check_quota",
    "create",
    "get",
    "is_active",
    "list_grants",
    "never_applies",
    "revoke",
]


@dataclass(frozen=True)
class GrantSpec:
    """What a new grant covers, as its creator asked: ``when`` None is every call of the tool."""

    agent_id: uuid.UUID
    tool_name: str
    ttl: str
    when: Mapping[str, Any] | None = None
    run_id: uuid.UUID | None = None
    # ``when`` pins every argument of one call (``equals`` each, defaults filled in) and no other may be given.
    exact: bool = False


def is_active(grant: Grant, now: datetime) -> bool:
    """Whether the grant applies at ``now``: neither revoked nor expired."""
    return grant.revoked_at is None and grant.expires_at > now


def _raise(errors: list[FieldError]) -> None:
    if errors:
        raise InvalidInput.of(errors)


def check_quota(session: Session, settings: Settings, tenant_id: uuid.UUID, now: datetime, adding: int = 1) -> None:
    """Refuse ``adding`` more grants when the tenant would have more than ``HANGO_MAX_GRANTS_PER_TENANT`` active.

    The quota stays locked until commit: two creations at once count each other's grants.
    """
    store.lock_quota(session, tenant_id)
    limit = settings.max_grants_per_tenant
    if store.count_active(session, tenant_id, now) + adding > limit:
        raise Conflict(f"the tenant already has {limit} active standing approvals (HANGO_MAX_GRANTS_PER_TENANT)")


def _check_scope(session: Session, principal: Principal, spec: GrantSpec) -> AgentSpec:
    """The agent (and the run, when named) must be the tenant's: 404 otherwise, as for a run's ``agent_id``. The
    configuration the grant will meet: the run's snapshot for a grant of one run, else the agent as it stands."""
    agent = agent_store.get_agent(session, principal.tenant_id, spec.agent_id)
    if spec.run_id is None:
        return AgentSpec.of_agent(agent)
    run = store.share_run(session, principal.tenant_id, spec.run_id)
    if run.agent_id != spec.agent_id:
        raise InvalidInput.field("run_id", "is a run of another agent")
    if run.created_by == principal.user_id and not allows_self_approval(session, principal.tenant_id):
        raise InvalidInput.field(
            "run_id", "is your own run, and this tenant forbids self-approval: your grant would never apply to it"
        )
    return AgentSpec.of_snapshot(run.agent_snapshot)


def never_applies(principal: Principal, agent: AgentSpec, tool_name: str) -> str | None:
    """Why a grant of ``tool_name`` by ``principal`` could apply to no call of an agent so configured (None: it
    may apply somewhere).

    A grant applies only where its creator may decide the call under the rule that holds it: a rule that allows
    ``approve``, asks for one approval, and names the creator (by role or id) among its reviewers, if it names
    any. The agent's rules and each subagent's own are looked at; a tool no rule interrupts never needs a grant.
    """
    reasons: list[str] = []
    # An MCP tool's calls wait by default unless its server is trusted and the tool read-only, which only its
    # listing tells: judged as waiting, a grant of it is refused only where the agent's own rules say so.
    mcp_defaults: dict[str, Any] | None = {tool_name: {}} if is_mcp_name(tool_name) else None
    for place, rules in rule_sets(agent, mcp_defaults):
        reason = _refusal(principal, rules.get(tool_name))
        if reason is None:
            return None
        reasons.append(f"{place}: {reason}")
    return "; ".join(reasons)


def _refusal(principal: Principal, rule: InterruptRule | None) -> str | None:
    if rule is None:
        return "no rule interrupts it"
    if "approve" not in rule.allowed_decisions:
        return "its rule does not allow approve"
    if rule.approvals_required > 1:
        return f"its rule needs {rule.approvals_required} approvals, which a standing approval never gives"
    if not is_reviewer(principal.user_id, principal.role, rule.reviewers):
        return "its rule names other reviewers"
    return None


def add_grant(
    session: Session,
    settings: Settings,
    principal: Principal,
    spec: GrantSpec,
    now: datetime,
    judged_by: AgentSpec | None = None,
) -> Grant:
    """Validate and insert a grant created by ``principal`` in the caller's transaction.

    A grant that could never apply (:func:`never_applies`) is refused: judged against ``judged_by``, an agent
    configuration (a ``remember``: the deciding run's snapshot), else the run's snapshot or the agent as it stands.

    Raises:
        InvalidInput: ``tool_name``, ``ttl`` or ``when`` is malformed, ``run_id`` is another agent's run (or the
            creator's own, in a tenant that forbids self-approval), or the grant could never apply.
        NotFound: the agent or the run is not the tenant's.
        Conflict: the tenant already has ``HANGO_MAX_GRANTS_PER_TENANT`` active grants.
    """
    tool_errors = [] if spec.tool_name.strip() else [FieldError("tool_name", "must not be empty")]
    _raise(tool_errors + ttl_errors(spec.ttl, settings) + when_errors(spec.when, settings))
    agent = _check_scope(session, principal, spec)
    reason = never_applies(principal, judged_by if judged_by is not None else agent, spec.tool_name)
    if reason is not None:
        raise InvalidInput.field(
            "tool_name", f"a standing approval by you would never apply to {spec.tool_name} ({reason})"
        )
    check_quota(session, settings, principal.tenant_id, now)
    grant = Grant(
        id=uuid.uuid4(),
        tenant_id=principal.tenant_id,
        agent_id=spec.agent_id,
        tool_name=spec.tool_name,
        when=dict(spec.when) if spec.when is not None else None,
        exact=spec.exact,
        run_id=spec.run_id,
        created_by=principal.user_id,
        expires_at=now + parse_duration(spec.ttl),
    )
    return store.add(session, grant)


def remember(
    session: Session,
    settings: Settings,
    principal: Principal,
    asked: Sequence[tuple[uuid.UUID, GrantSpec]],
    judged_by: AgentSpec,
    trace_id: str | None,
) -> dict[uuid.UUID, uuid.UUID]:
    """The grants a decision's ``remember``s ask for, by the approval that asked: each created as :func:`add_grant`
    creates one, judged by ``judged_by`` (the deciding run's rules, under which the caller has just decided the
    call, so it applies at least there), and audited ``grant.create`` with that approval's id, in the caller's
    transaction. Whether a grant applies to a later call is judged then, by that call's rule and its creator's
    role."""
    now = datetime.now(UTC)
    created = {
        approval_id: add_grant(session, settings, principal, spec, now, judged_by=judged_by)
        for approval_id, spec in asked
    }
    records = [
        AuditRecord.by_user(
            principal,
            "grant.create",
            ("grant", str(grant.id)),
            "success",
            {**audit_detail(grant), "approval_id": str(approval_id)},
            trace_id,
        )
        for approval_id, grant in created.items()
    ]
    insert_audit_events(session, records)
    return {approval_id: grant.id for approval_id, grant in created.items()}


def audit_detail(grant: Grant) -> dict[str, Any]:
    """What a ``grant.*`` audit row says: ids, the tool, the arguments ``when`` constrains (never their values)."""
    return {
        "agent_id": str(grant.agent_id),
        "tool_name": grant.tool_name,
        "when_arguments": sorted(grant.when) if grant.when else None,
        "exact": grant.exact,
        "run_id": str(grant.run_id) if grant.run_id else None,
        "expires_at": grant.expires_at.isoformat(),
    }


# The API's services.


def create(runtime: Runtime, principal: Principal, spec: GrantSpec) -> Grant:
    """Create a grant (owner, admin); see :func:`add_grant` for what is refused."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        return add_grant(session, runtime.settings, principal, spec, datetime.now(UTC))


def list_grants(runtime: Runtime, principal: Principal, filters: GrantFilter, request: PageRequest) -> Page[Grant]:
    """The tenant's grants, newest first (owner, admin)."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        return store.page(session, principal.tenant_id, filters, request, datetime.now(UTC))


def get(runtime: Runtime, principal: Principal, grant_id: uuid.UUID) -> Grant:
    """One grant of the tenant (owner, admin)."""
    require_manager(principal)
    with runtime.db.transaction() as session:
        return store.get(session, principal.tenant_id, grant_id)


def revoke(runtime: Runtime, principal: Principal, grant_id: uuid.UUID) -> Grant:
    """Revoke a grant at once (owner, admin); revoking it again changes nothing.

    A loop holding the grant (between :func:`~hango.run.standing.live_grant` and its commit) finishes first; no
    lookup after this returns sees the grant.
    """
    require_manager(principal)
    with runtime.db.transaction() as session:
        return store.revoke(session, principal.tenant_id, grant_id, principal.user_id, datetime.now(UTC))
