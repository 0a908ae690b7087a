"""Human-in-the-loop: pending_approvals, the awaiting_approval run state and runs.awaiting_since.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

FIVE_STATES = "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')"
SIX_STATES = "state IN ('queued', 'running', 'awaiting_approval', 'succeeded', 'failed', 'cancelled')"


def upgrade() -> None:
    op.create_table(
        "pending_approvals",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("tool_call_id", sa.Text(), nullable=False),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("arguments", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("allowed_decisions", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("subagent_call_id", sa.UUID(), nullable=True),
        sa.Column("state", sa.Text(), server_default="pending", nullable=False),
        sa.Column("decision", sa.Text(), server_default="", nullable=False),
        sa.Column("decision_args", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("decision_message", sa.Text(), server_default="", nullable=False),
        sa.Column("decided_by", sa.UUID(), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "state IN ('pending', 'decided', 'expired', 'cancelled')", name=op.f("ck_pending_approvals_state")
        ),
        sa.CheckConstraint(
            "decision IN ('', 'approve', 'edit', 'reject', 'respond')", name=op.f("ck_pending_approvals_decision")
        ),
        sa.ForeignKeyConstraint(["decided_by"], ["users.id"], name=op.f("fk_pending_approvals_decided_by_users")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_pending_approvals_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["subagent_call_id"],
            ["subagent_calls.id"],
            name=op.f("fk_pending_approvals_subagent_call_id_subagent_calls"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_pending_approvals_tenant_id_tenants"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_approvals")),
        sa.UniqueConstraint("run_id", "tool_call_id", name=op.f("uq_pending_approvals_run_id_tool_call_id")),
    )
    op.create_index(
        op.f("ix_pending_approvals_tenant_id_state_created_at"),
        "pending_approvals",
        ["tenant_id", "state", "created_at"],
    )
    op.create_index(op.f("ix_pending_approvals_tenant_id_run_id"), "pending_approvals", ["tenant_id", "run_id"])
    op.create_index(op.f("ix_pending_approvals_state_created_at"), "pending_approvals", ["state", "created_at"])
    op.drop_constraint(op.f("ck_runs_state"), "runs", type_="check")
    op.create_check_constraint("state", "runs", SIX_STATES)
    op.add_column("runs", sa.Column("awaiting_since", sa.DateTime(timezone=True), nullable=True))


WAITING_ERROR = "approvals were removed by a schema downgrade"
UNAPPLIED_ERROR = "approval decisions were removed by a schema downgrade before the run applied them"

# The runs this feature's removal would betray: those waiting for a human, and those queued (or running) with a
# decision whose call has no result in the messages yet. Without the table a resumed run would re-drive its batch
# with nothing to apply the decisions, so a rejected call would run; each is failed instead, with the same
# ``run.finished`` event a watching client understands and a system audit row a reviewer can find.
FAIL_BETRAYED_RUNS = sa.text("""
WITH betrayed AS (
    SELECT r.id, r.state AS previous_state,
           CASE WHEN r.state = 'awaiting_approval' THEN :waiting ELSE :unapplied END AS error
      FROM runs r
     WHERE r.state = 'awaiting_approval'
        OR (r.state IN ('queued', 'running') AND EXISTS (
               SELECT 1 FROM pending_approvals a
                WHERE a.run_id = r.id AND a.state = 'decided'
                  AND NOT EXISTS (
                      SELECT 1 FROM messages m
                       WHERE m.run_id = r.id AND m.role = 'tool'
                         AND m.content @> jsonb_build_array(jsonb_build_object('tool_use_id', a.tool_call_id)))))
), failed AS (
    UPDATE runs
       SET state = 'failed', error = betrayed.error, finished_at = now(), updated_at = now(),
           awaiting_since = NULL, lease_owner = NULL, lease_expires_at = NULL, event_seq = runs.event_seq + 1
      FROM betrayed
     WHERE runs.id = betrayed.id
 RETURNING runs.id, runs.tenant_id, runs.event_seq, runs.error, betrayed.previous_state
), events AS (
    INSERT INTO run_events (tenant_id, run_id, seq, type, data)
    SELECT tenant_id, id, event_seq, 'run.finished', jsonb_build_object('state', 'failed', 'error', error)
      FROM failed
)
INSERT INTO audit_events (id, tenant_id, actor_kind, actor_id, action, target_kind, target_id, outcome, detail)
SELECT gen_random_uuid(), tenant_id, 'system', NULL, 'run.fail', 'run', id::text, 'success',
       jsonb_build_object('reason', 'schema downgrade', 'previous_state', previous_state, 'error', error)
  FROM failed
""").bindparams(waiting=WAITING_ERROR, unapplied=UNAPPLIED_ERROR)


def downgrade() -> None:
    # Fail first, so no run loses a human's decision silently and the five-state constraint can come back.
    op.execute(FAIL_BETRAYED_RUNS)
    op.drop_column("runs", "awaiting_since")
    op.drop_constraint(op.f("ck_runs_state"), "runs", type_="check")
    op.create_check_constraint("state", "runs", FIVE_STATES)
    op.drop_index(op.f("ix_pending_approvals_state_created_at"), table_name="pending_approvals")
    op.drop_index(op.f("ix_pending_approvals_tenant_id_run_id"), table_name="pending_approvals")
    op.drop_index(op.f("ix_pending_approvals_tenant_id_state_created_at"), table_name="pending_approvals")
    op.drop_table("pending_approvals")
