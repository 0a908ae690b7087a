"""The agents' virtual filesystem: agent-owned ``/memories/`` and ``/skills/``, run-owned scratch."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.errors import NotFound
from hango.models import File
from hango.store.agents import get_agent
from hango.store.runs import get_run


def get_agent_file(session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, path: str) -> File:
    """A file owned by one of the tenant's agents; :class:`NotFound` otherwise."""
    agent = get_agent(session, tenant_id, agent_id)
    file = session.scalar(select(File).where(File.tenant_id == tenant_id, File.agent_id == agent.id, File.path == path))
    if file is None:
        raise NotFound(f"file {path} not found")
    return file


def get_run_file(session: Session, principal: Principal, run_id: uuid.UUID, path: str) -> File:
    """A scratch file of a run the principal may see; :class:`NotFound` otherwise."""
    run = get_run(session, principal, run_id)
    file = session.scalar(select(File).where(File.tenant_id == run.tenant_id, File.run_id == run.id, File.path == path))
    if file is None:
        raise NotFound(f"file {path} not found")
    return file
