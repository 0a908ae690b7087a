"""TEMPORARY stub until the grants branch lands."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from hango.agent.interrupts import InterruptRule
from hango.models import Grant


def live_grant(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    agent_id: uuid.UUID,
    run_id: uuid.UUID,
    tool_name: str,
    arguments: dict[str, Any],
    now: datetime,
) -> Grant | None:
    rows = session.scalars(
        select(Grant).where(
            Grant.tenant_id == tenant_id,
            Grant.agent_id == agent_id,
            Grant.tool_name == tool_name,
            Grant.revoked_at.is_(None),
            Grant.expires_at > now,
            or_(Grant.run_id.is_(None), Grant.run_id == run_id),
        )
    )
    return next((g for g in rows if InterruptRule((), g.when).matches(arguments)), None)
