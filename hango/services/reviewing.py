"""What a reviewer reads before deciding: one approval by id, and what its call would change (the preview)."""

from __future__ import annotations

import uuid

from sqlalchemy import text

from hango.agent.tools.base import ToolLimits
from hango.kernel.auth import Principal
from hango.kernel.models import PendingApproval
from hango.platform.runtime import Runtime
from hango.services.previews import DiffLimits, Preview, from_kept, preview_call
from hango.store import approvals as approval_store
from hango.store.files import run_files
from hango.store.runs import get_run


def get_approval(runtime: Runtime, principal: Principal, approval_id: uuid.UUID) -> PendingApproval:
    """One approval the caller may see, in any state (a member: their own runs' only; otherwise 404)."""
    with runtime.db.transaction() as session:
        return approval_store.get_visible(session, principal, approval_id)


def preview(runtime: Runtime, principal: Principal, approval_id: uuid.UUID) -> tuple[PendingApproval, Preview]:
    """An approval the caller may see and what its call would make of its file now, worked out by the tool's own
    code on the run's view of the files (the agent's ``/memories/`` and ``/skills/``, the run's scratch).

    A decided approval that kept its preview (a reviewer's approve or edit of a file tool) answers that one, as it
    was at decision time: the call has run since, and the file now holds what it wrote.
    """
    with runtime.db.transaction() as session:
        # Nothing a preview runs may write or lock: the database refuses it, whatever the planning code does.
        session.execute(text("SET TRANSACTION READ ONLY"))
        row = approval_store.get_visible(session, principal, approval_id)
        if row.decision_preview is not None:
            return row, from_kept(row.decision_preview)
        run = get_run(session, principal, row.run_id)
        settings = runtime.settings
        limits, diff_limits = ToolLimits.of(settings), DiffLimits.of(settings)
        shown = preview_call(
            runtime.tools,
            run_files(session, run.tenant_id, run.agent_id, run.id, run.thread_id),
            limits,
            diff_limits,
            row.tool_name,
            row.arguments,
        )
        return row, shown
