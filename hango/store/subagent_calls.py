"""Child loops spawned by ``task`` tool calls."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import Run, SubagentCall
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


def state_of(session: Session, run_id: uuid.UUID, call_id: uuid.UUID) -> dict[str, Any]:
    """A child loop's stored state (empty before its first save)."""
    stored = session.scalar(
        select(SubagentCall.state_json).where(SubagentCall.id == call_id, SubagentCall.run_id == run_id)
    )
    return dict(stored or {})


def of_tool_call(session: Session, run_id: uuid.UUID, tool_call_id: str) -> SubagentCall | None:
    """The child a ``task`` call of the run started, if it started one."""
    return session.scalar(
        select(SubagentCall).where(SubagentCall.run_id == run_id, SubagentCall.tool_call_id == tool_call_id)
    )


def save_state(session: Session, run_id: uuid.UUID, call_id: uuid.UUID, state_json: dict[str, Any]) -> None:
    """Store a child loop's state in its row."""
    session.execute(
        update(SubagentCall)
        .where(SubagentCall.id == call_id, SubagentCall.run_id == run_id)
        .values(state_json=state_json),
        execution_options={"synchronize_session": False},
    )


def lock(session: Session, call_id: uuid.UUID) -> SubagentCall | None:
    """A child's row, locked for this transaction."""
    return session.get(SubagentCall, call_id, with_for_update=True)


def lineage(session: Session, run_id: uuid.UUID, call_id: uuid.UUID) -> list[str]:
    """The subagent types from the run's own child down to this one: the loops a nested call was held in."""
    types: list[str] = []
    current: uuid.UUID | None = call_id
    while current is not None:
        call = session.scalar(select(SubagentCall).where(SubagentCall.id == current, SubagentCall.run_id == run_id))
        if call is None:
            break
        types.append(call.subagent_type)
        current = call.parent_subagent_call_id
    return types[::-1]
