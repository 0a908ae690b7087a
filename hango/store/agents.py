"""Agent definitions."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.errors import NotFound
from hango.models import Agent
from hango.pagination import Page, PageRequest, paginate


def get_agent(session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, *, for_update: bool = False) -> Agent:
    """An agent of the tenant; :class:`NotFound` for another tenant's or an unknown one."""
    statement = select(Agent).where(Agent.tenant_id == tenant_id, Agent.id == agent_id)
    agent = session.scalar(statement.with_for_update() if for_update else statement)
    if agent is None:
        raise NotFound(f"agent {agent_id} not found")
    return agent


def list_agents(session: Session, tenant_id: uuid.UUID, page: PageRequest) -> Page[Agent]:
    """The tenant's agents, oldest first."""
    statement = select(Agent).where(Agent.tenant_id == tenant_id)
    return paginate(session, statement, [Agent.created_at, Agent.id], page)
