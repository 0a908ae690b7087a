"""Child loops spawned by ``task`` tool calls."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.errors import NotFound
from hango.models import Run, SubagentCall
from hango.store.runs import visible_to


def get_subagent_call(session: Session, principal: Principal, call_id: uuid.UUID) -> SubagentCall:
    """A child call of a run the principal may see; :class:`NotFound` otherwise."""
    statement = (
        select(SubagentCall)
        .join(Run, Run.id == SubagentCall.run_id)
        .where(SubagentCall.id == call_id, SubagentCall.tenant_id == principal.tenant_id, visible_to(principal))
    )
    call = session.scalar(statement)
    if call is None:
        raise NotFound(f"subagent call {call_id} not found")
    return call
