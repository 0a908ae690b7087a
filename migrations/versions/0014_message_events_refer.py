"""A ``message.created`` event refers to its message instead of copying it.

The run's log kept each message twice: as its row in ``messages`` and again inside its ``message.created`` event.
The event now keeps the message's number only (``{"seq": n}``), and a replay reads the message with it. The upgrade
shortens the events already written; the downgrade copies the messages back into them. Both rewrite every
``message.created`` row once, with the log's append-only trigger set aside for that statement only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    _rewrite(
        "UPDATE run_events SET data = jsonb_build_object('seq', data->'seq') "
        "WHERE type = 'message.created' AND data ? 'role'"
    )


def downgrade() -> None:
    _rewrite(
        "UPDATE run_events e SET data = jsonb_build_object("
        "'seq', m.seq, 'role', m.role, 'content', m.content, 'subagent_call_id', m.subagent_call_id::text) "
        "FROM messages m "
        "WHERE e.type = 'message.created' AND m.run_id = e.run_id AND m.seq = (e.data->>'seq')::int"
    )


def _rewrite(statement: str) -> None:
    op.execute("ALTER TABLE run_events DISABLE TRIGGER run_events_append_only")
    op.execute(statement)
    op.execute("ALTER TABLE run_events ENABLE TRIGGER run_events_append_only")
