"""The loops of one claimed run: the run's own, and its subagents' (child loops of ``task`` calls), at any depth.

:class:`Loops` reads a loop's stored inputs (history, decisions, state), builds its model and middleware chain and
drives it; :mod:`hango.run.subagents` is the ``task`` tool's engine that starts or resumes a child through it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

from opentelemetry.trace import Span, SpanContext
from sqlalchemy.orm import Session

from hango.agent.loop import AgentLoop, LoopConfig
from hango.agent.mcp import PinnedTool, default_rules
from hango.agent.messages import Message
from hango.agent.middleware.hitl import load_decisions, require_decisions_applied
from hango.agent.middleware.stack import default_chain
from hango.agent.models.factory import build_model
from hango.agent.spec import AgentSpec, LoopSpec
from hango.agent.state import (
    AwaitingApproval,
    Decision,
    DecisionKind,
    Done,
    Failed,
    LoopState,
    Outcome,
    holds_batch,
    load_state,
)
from hango.agent.tools.base import ToolLimits
from hango.agent.tools.mcp import mcp_tools
from hango.agent.tools.task import RUNNER_KEY
from hango.kernel.models import Execution, PendingApproval, Run
from hango.kernel.telemetry import resumed_links, tracer
from hango.platform.runtime import Runtime
from hango.run.mcp_tools import McpCalls, expand_tools, pinned_tools
from hango.run.persistence import RunPersistence
from hango.run.subagents import ChildRunner
from hango.run.threads import ThreadHistory
from hango.run.transitions import Lease
from hango.store import approvals as approval_store
from hango.store import subagent_calls as subagent_store
from hango.store.messages import child_history, run_history


def decision_of(row: PendingApproval) -> Decision:
    """The decision of an approval row, as the HITL middleware applies it: an approval its deadline rejected is an
    ``expire``."""
    # The columns hold only these values (the table's CHECK constraints).
    kind = "expire" if row.state == "expired" else cast(DecisionKind, row.decision)
    return Decision(
        kind=kind,
        approval_id=str(row.id),
        args=row.decision_args,
        message=row.decision_message,
        decided_by=str(row.decided_by) if row.decided_by else None,
        execution=cast(Execution, row.execution),
    )


@dataclass(frozen=True)
class StoredLoop:
    """What resuming one loop reads, in one transaction: its history, its live decisions and its stored state."""

    history: list[Message]
    decisions: dict[str, Decision]
    state: dict[str, Any]
    # A thread's run: how many of ``history``'s messages come from the thread's earlier runs, and the assistant
    # turns of the whole earlier conversation (:class:`hango.run.threads.ThreadHistory`).
    earlier: int = 0
    earlier_turns: int = 0

    @classmethod
    def of_child(cls, session: Session, run: Run, subagent_call_id: uuid.UUID) -> StoredLoop:
        """A child loop's stored inputs: its messages, its state from its ``subagent_calls`` row, its decisions."""
        history = child_history(session, run.id, subagent_call_id)
        state = subagent_store.state_of(session, run.id, subagent_call_id)
        return cls(history, _decisions(session, run, subagent_call_id, state), state)

    @classmethod
    def of_run(cls, session: Session, run: Run, thread: ThreadHistory | None = None) -> tuple[StoredLoop, set[str]]:
        """The run's own loop inputs and every tool call id of the run, as a claim reads them (the row is the
        one the claim returned); a thread's run sees ``thread``'s earlier conversation first."""
        history, call_ids = (thread.own, set()) if thread and thread.own is not None else run_history(session, run.id)
        state = dict(run.state_json or {})
        decisions = _decisions(session, run, None, state)
        if thread is None:
            return cls(history, decisions, state), call_ids
        call_ids |= {call.id for message in thread.messages for call in message.tool_calls}
        earlier = len(thread.messages)
        return cls([*thread.messages, *history], decisions, state, earlier, thread.turns), call_ids


def _decisions(
    session: Session, run: Run, subagent_call_id: uuid.UUID | None, state: dict[str, Any]
) -> dict[str, Decision]:
    """The loop's decided approvals by call id; none to read unless its state keeps a suspended batch."""
    if not holds_batch(state):
        return {}
    decided = approval_store.decided_unanswered(session, run, subagent_call_id)
    return {row.tool_call_id: decision_of(row) for row in decided}


class Loops:
    """Builds and drives the loops of one claimed run: its own, and its children's, at any depth."""

    def __init__(self, runtime: Runtime, run: Run, lease: Lease, stop: threading.Event, call_ids: set[str]) -> None:
        self.runtime = runtime
        self.run = run
        self.lease = lease
        self.stop = stop
        self.agent = AgentSpec.of_snapshot(run.agent_snapshot)  # the run's snapshot, read once
        self.span_context: SpanContext | None = None
        # Every tool call id of the run, read by the claim and grown by each loop's turns: a provider that repeats
        # an id in another loop of the same run (a child reusing its parent's) still gets a fresh one.
        self.call_ids = call_ids
        # The run's MCP tools, pinned at its first step (:meth:`pin`), and every tool its loops may call.
        self.pinned: dict[str, PinnedTool] = {}
        self.tools = runtime.tools

    def pin(self) -> None:
        """Read (or, at the run's first step, list and store) the run's MCP tools; before any loop is driven.

        Raises:
            PinFailed: a server the agent names is not configured or cannot be listed.
        """
        self.pinned = pinned_tools(self.runtime, self.run, self.lease, self.agent)
        if self.pinned:
            caller = McpCalls(self.runtime)
            self.tools = self.runtime.tools.extended(mcp_tools(self.pinned.values(), caller))

    def drive(
        self, spec: LoopSpec, subagent_call_id: uuid.UUID | None, depth: int, stored: StoredLoop | None = None
    ) -> tuple[Outcome, LoopState]:
        """Run (or resume) one loop from its stored history, state and decisions: the run's own as the claim read
        them (``stored``), a child's read here."""
        if stored is None:
            assert subagent_call_id is not None, "the run's own loop is driven from what its claim read"
            with self.runtime.db.transaction() as session:
                stored = StoredLoop.of_child(session, self.run, subagent_call_id)
        state = load_state(stored.state, stored.history)
        state.earlier, state.earlier_turns = stored.earlier, stored.earlier_turns
        # Decisions go into the state before any before_run hook runs.
        load_decisions(state, stored.decisions)
        runner = ChildRunner(self, spec, subagent_call_id, depth)
        port = RunPersistence(
            self.runtime,
            self.run,
            self.lease,
            self.stop,
            subagent_call_id=subagent_call_id,
            extras={RUNNER_KEY: runner},
        )
        scope = str(subagent_call_id or self.run.id)
        # With interrupts switched off the slot stays: it still applies the decisions loaded above.
        tools = expand_tools(spec.tools, self.pinned)
        chain = default_chain(
            tools,
            spec.interrupt_on,
            model=spec.model,
            interrupts=self.runtime.settings.interrupts_enabled,
            mcp_defaults=default_rules(self.pinned.values()),
        )
        require_decisions_applied(chain, state)
        loop = AgentLoop(
            LoopConfig(spec.system_prompt, tools, spec.max_turns, spec.max_tokens, spec.history_window),
            build_model(
                spec.model, self.runtime.settings, scope=scope, id_prefix=f"{scope[:8]}-" if spec.replays_parent else ""
            ),
            chain,
            self.tools,
            port,
            port,
            ToolLimits.of(self.runtime.settings),
            self.call_ids,
        )
        with invoke_agent_span(self.run, spec, subagent_call_id) as span:
            outcome = loop.run(state)
            span.set_attribute("hango.run.outcome", outcome_name(outcome))
            if subagent_call_id is None:
                self.span_context = span.get_span_context()
        if subagent_call_id is not None:
            self._store_child_end(port, outcome, state)
        return outcome, state

    @staticmethod
    def _store_child_end(port: RunPersistence, outcome: Outcome, state: LoopState) -> None:
        """Store how a child's loop ended: its last turn (a final answer, or the turn that asked for a held batch)
        or, suspended with nothing unsaved, its state. The run's own loop stores these with its transition."""
        if isinstance(outcome, Done | AwaitingApproval) and outcome.unsaved:
            port.append(list(outcome.unsaved), state, outcome.usage)
        elif isinstance(outcome, AwaitingApproval):
            port.save_state(state)


def outcome_name(outcome: Outcome) -> str:
    """``done``, ``failed``, ``cancelled`` or ``awaiting_approval``."""
    names = {Done: "done", Failed: "failed", AwaitingApproval: "awaiting_approval"}
    return names.get(type(outcome), "cancelled")


@contextmanager
def invoke_agent_span(run: Run, spec: LoopSpec, subagent_call_id: uuid.UUID | None) -> Iterator[Span]:
    """The ``invoke_agent`` span of one loop execution, a child of whatever is current (the run's Celery task).

    The run's own loop resumed after a suspension links to the suspended run's span (kept in
    ``runs.trace_context``): it sits in the trace of the decision that queued it again, and no span stays open
    while a human decides (see :mod:`hango.kernel.telemetry`).
    """
    name = spec.name or "agent"
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.provider.name": str(spec.model.get("provider", "unknown")),
        "gen_ai.conversation.id": str(run.id),
        "hango.run.id": str(run.id),
        "hango.tenant.id": str(run.tenant_id),
        "langfuse.session.id": str(run.id),
        "langfuse.trace.metadata.run_id": str(run.id),
    }
    if subagent_call_id is not None:
        attributes["hango.subagent_call.id"] = str(subagent_call_id)
    suspended = run.trace_context if subagent_call_id is None else None
    links = resumed_links(suspended)
    if links and suspended is not None:
        attributes["hango.run.resumed_from_span_id"] = suspended["span_id"]
        attributes["hango.run.suspension_seconds"] = float(suspended.get("suspension_seconds", 0.0))
    with tracer().start_as_current_span(f"invoke_agent {name}", links=links, attributes=attributes) as span:
        yield span
