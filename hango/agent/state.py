"""The loop's typed state, its persisted form (with a schema version) and its outcomes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from hango.agent.messages import Message, ToolCall, Usage
from hango.kernel.canonical import canonical_json
from hango.kernel.errors import HangoError
from hango.kernel.models import Decision as HumanDecision
from hango.kernel.models import Execution, ExpiryAction

# What a decision does to its call: a human's approve, edit, reject or respond, or expire (its deadline passed and its
# rule rejects it).
DecisionKind = HumanDecision | Literal["expire"]
# What a rule's deadline does: fail the run, reject the call, or hand it to other reviewers with a second deadline
# (``{"escalate": {...}, "ttl": "..."}``); ``None`` fails the run.
OnExpiry = ExpiryAction | Mapping[str, Any] | None

STATE_VERSION = 1
# The persisted layout (``runs.state_json`` / ``subagent_calls.state_json``), compatible since version 1 so runs
# stored by an earlier release resume: ``{"version": 1, "private": {"suspended_batch": [...], "suspended_at": ...,
# "announced": [...]}}``. Every key of ``private`` is optional. ``announced`` was added without a new version: a state
# stored before it loads with nothing announced (its batch's running calls are announced once more, as they were
# then), and an earlier release resuming a state that has it ignores it, as it ignores any key it does not know. A
# version is raised only for a change an earlier release would misread.
_BATCH_KEY = "suspended_batch"
_SUSPENDED_AT_KEY = "suspended_at"
_ANNOUNCED_KEY = "announced"


class StateVersionError(HangoError):
    """The persisted state was written by a newer hango that this worker cannot resume safely."""


@dataclass(frozen=True)
class Decision:
    """A human's decision on one suspended call, as the human-in-the-loop middleware applies it."""

    kind: DecisionKind
    approval_id: str
    args: dict[str, Any] | None = None
    message: str = ""
    decided_by: str | None = None
    # Where the approved call stood when the loop loaded the decision (``pending_approvals.execution``):
    # ``executing`` means a worker died while it ran.
    execution: Execution = "not_started"

    def changes_arguments(self, original: Any) -> bool:
        """Whether this decision runs the call with other arguments than ``original`` (the model's)."""
        return self.kind == "edit" and arguments_changed(original, self.args)


def arguments_changed(original: Any, edited: Any) -> bool:
    """Whether an edit's arguments differ from the call's, as JSON values: key order does not count, while ``1``,
    ``1.0``, ``true`` and ``"1"`` all differ (Python's ``==`` would take ``1 == 1.0 == True``).

    The one judge of ``args_changed``: the ``tool.approval_decided`` span event and the ``approval.decide`` audit
    row both ask it, so they cannot disagree.
    """
    return canonical_json(original) != canonical_json(edited)


@dataclass
class LoopState:
    """What a loop knows between steps.

    - ``messages``: its persisted history;
    - ``suspended_batch``: the ids of the batch held back by a suspension, kept until the batch finally runs (the
      repair middleware leaves these calls alone: they are not dangling, they are waiting or about to run);
    - ``decisions``: the human decisions loaded for this execution, by tool call id (read from the approvals on
      every resume, consumed as each call runs; never persisted with the state);
    - ``suspended_at``: when the loop last suspended (the claim that resumes it reads and clears it);
    - ``executions``: how the approved calls of the running batch ended, by approval id (``done`` or
      ``outcome_unknown``), written with the batch's results (never persisted with the state);
    - ``earlier`` and ``earlier_turns``: for a thread's run, how many of ``messages`` come first from the thread's
      earlier runs (as read: all of them, or the last a history window may show), and how many assistant turns the
      whole earlier conversation holds;
    - ``announced``: the calls of the running batch whose ``tool.started`` is stored, in order. It is persisted with
      that event and kept until the batch's results (and their ``tool.finished``) are stored, so a batch re-driven
      after a suspension or a crash announces none of them again: one start per call over its whole life.
    """

    messages: list[Message]
    suspended_batch: list[str] = field(default_factory=list)
    earlier: int = 0
    earlier_turns: int = 0
    decisions: dict[str, Decision] = field(default_factory=dict)
    suspended_at: datetime | None = None
    executions: dict[str, str] = field(default_factory=dict)
    announced: list[str] = field(default_factory=list)

    @property
    def turn(self) -> int:
        """Assistant turns this loop has taken (a thread's earlier runs' excluded); derived from the history so it
        can never drift from it."""
        return sum(1 for message in self.messages[self.earlier :] if message.role == "assistant")

    @property
    def conversation_turns(self) -> int:
        """Assistant turns of the whole conversation: a thread's earlier runs', then this loop's."""
        return self.earlier_turns + self.turn

    def unanswered_calls(self) -> list[str]:
        """Ids of tool calls with no tool result anywhere after them, in call order."""
        answered: set[str] = set()
        for message in self.messages:
            answered |= message.tool_result_ids
        return [call.id for message in self.messages for call in message.tool_calls if call.id not in answered]


def dump_state(state: LoopState) -> dict[str, Any]:
    """The JSON stored in ``state_json``."""
    private: dict[str, Any] = {}
    if state.suspended_batch:
        private[_BATCH_KEY] = list(state.suspended_batch)
    if state.suspended_at is not None:
        private[_SUSPENDED_AT_KEY] = state.suspended_at.isoformat()
    if state.announced:
        private[_ANNOUNCED_KEY] = list(state.announced)
    return {"version": STATE_VERSION, "private": private}


def holds_batch(stored: dict[str, Any] | None) -> bool:
    """Whether a stored state keeps a suspended batch: only then can a human's decision still wait to be applied
    (a batch's results clear it in the same transaction)."""
    return bool(((stored or {}).get("private") or {}).get(_BATCH_KEY))


def load_state(stored: dict[str, Any] | None, messages: list[Message]) -> LoopState:
    """A loop's state from its stored JSON and history; refuses states from a newer schema clearly."""
    if not stored:
        return LoopState(messages)
    version = stored.get("version", STATE_VERSION)
    if not isinstance(version, int) or version > STATE_VERSION:
        raise StateVersionError(
            f"run state has schema version {version}; this worker understands up to {STATE_VERSION}"
        )
    private = stored.get("private") or {}
    suspended_at = private.get(_SUSPENDED_AT_KEY)
    return LoopState(
        messages,
        suspended_batch=[str(call_id) for call_id in private.get(_BATCH_KEY) or []],
        suspended_at=datetime.fromisoformat(suspended_at) if suspended_at else None,
        announced=[str(call_id) for call_id in private.get(_ANNOUNCED_KEY) or []],
    )


@dataclass(frozen=True)
class Done:
    """The model answered without tool calls.

    ``unsaved`` is that last turn (with its token usage): the caller stores it in the transaction that ends the
    loop, as the run's ``finish`` or a child's result. Outcomes compare by ``text`` alone.
    """

    text: str
    unsaved: tuple[Message, ...] = field(default=(), compare=False)
    usage: Usage | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Failed:
    """The run cannot continue; ``error`` is a readable reason."""

    error: str


@dataclass(frozen=True)
class Cancelled:
    """The run was cancelled, or this worker lost it, between steps."""


@dataclass(frozen=True)
class StandingApproval:
    """A live grant that approves a call its rule would hold: which grant, and whose approval it stands for."""

    grant_id: uuid.UUID
    granted_by: uuid.UUID


@dataclass(frozen=True)
class GrantLookup:
    """A held call a standing approval might approve: the call, its arguments as the tool will read them (the
    tool's defaults filled in), and who its rule lets decide (None: every owner and admin)."""

    call: ToolCall
    arguments: Mapping[str, Any]
    reviewers: Mapping[str, list[str]] | None = None


@dataclass(frozen=True)
class PendingCall:
    """A call that must wait for a human, with the decisions a human may take and the child loop it belongs to.

    ``reviewers`` and ``approvals_required`` are its rule's: who may decide (None: every owner and admin) and how
    many distinct approvals the call needs before it runs.

    A call a standing approval covers (``granted``) is held like the others but waits for nobody: it is recorded
    as an approval already decided, and runs with its batch unless a sibling must wait for a human.
    """

    call: ToolCall
    allowed_decisions: tuple[str, ...]
    subagent_call_id: uuid.UUID | None = None
    reviewers: Mapping[str, list[str]] | None = None
    approvals_required: int = 1
    granted: StandingApproval | None = None
    # The rule's deadline for the call (None: ``HANGO_APPROVAL_TTL``) and what it does (None: fail the run).
    ttl: timedelta | None = None
    on_expiry: OnExpiry = None
    # Why it waits, from its rule (None: the rule gives no description).
    description: str | None = None
    # What its reviewer is shown of the tool beyond its name (``Tool.shown``: an MCP tool's server, title,
    # annotations and definition digest); None for a tool that shows nothing more.
    tool_shown: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class AwaitingApproval:
    """A tool batch is suspended until a human decides the calls in ``pending``; nothing of the batch ran."""

    pending: tuple[PendingCall, ...]
    batch: tuple[str, ...]
    # The turn that asked for the batch, when the suspension came straight after it: the caller stores it in the
    # suspension's own transaction, with its token usage.
    unsaved: tuple[Message, ...] = ()
    usage: Usage | None = None


Outcome = Done | Failed | Cancelled | AwaitingApproval
