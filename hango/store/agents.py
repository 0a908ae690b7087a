"""Agent definitions."""

from __future__ import annotations

import uuid

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from hango.kernel.errors import NotFound
from hango.kernel.models import Agent
from hango.kernel.pagination import Page, PageRequest, paginate

# Built once: every run's creation reads its agent.
_AGENT = select(Agent).where(Agent.tenant_id == bindparam("tenant_id"), Agent.id == bindparam("agent_id"))
_LOCKED_AGENT = _AGENT.with_for_update()


def get_agent(session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, *, for_update: bool = False) -> Agent:
    """An agent of the tenant; :class:`NotFound` for another tenant's or an unknown one."""
    statement = _LOCKED_AGENT if for_update else _AGENT
    agent = session.scalar(statement, {"tenant_id": tenant_id, "agent_id": agent_id})
    if agent is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent


def list_agents(session: Session, tenant_id: uuid.UUID, page: PageRequest) -> Page[Agent]:
    """The tenant's agents, oldest first."""
    statement = select(Agent).where(Agent.tenant_id == tenant_id)
    return paginate(session, statement, [Agent.created_at, Agent.id], page)
