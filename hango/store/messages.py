"""A run's append-only conversation."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.auth import Principal
from hango.models import Message
from hango.pagination import Page, PageRequest, paginate
from hango.store.runs import get_run


def list_messages(session: Session, principal: Principal, run_id: uuid.UUID, page: PageRequest) -> Page[Message]:
    """A visible run's messages by ``seq``; :class:`~hango.errors.NotFound` for a run the principal cannot see."""
    run = get_run(session, principal, run_id)
    statement = select(Message).where(Message.tenant_id == run.tenant_id, Message.run_id == run.id)
    return paginate(session, statement, [Message.seq], page)
