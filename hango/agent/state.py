"""The loop's state, its persisted form (with a schema version) and its outcomes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hango.agent.messages import Message
from hango.errors import HangoError

STATE_VERSION = 1
# The calls of a batch held back by a suspension, kept in the private area until the batch finally runs. The
# repair middleware leaves them alone: they are not dangling, they are waiting (or about to run, once decided).
SUSPENDED_BATCH = "suspended_batch"


class StateVersionError(HangoError):
    """The persisted state was written by a newer hango that this worker cannot resume safely."""


@dataclass
class LoopState:
    """What a loop knows between steps: its persisted history and the middlewares' private area.

    ``private`` is persisted with the run (``runs.state_json``); middlewares keep their resumable data there
    under their own keys.
    """

    messages: list[Message]
    private: dict[str, Any] = field(default_factory=dict)

    @property
    def turn(self) -> int:
        """Assistant turns taken so far; derived from the history so it can never drift from it."""
        return sum(1 for message in self.messages if message.role == "assistant")

    def unanswered_calls(self) -> list[str]:
        """Ids of tool calls with no tool result anywhere after them, in call order."""
        answered: set[str] = set()
        for message in self.messages:
            answered |= message.tool_result_ids
        return [call.id for message in self.messages for call in message.tool_calls if call.id not in answered]


def dump_state(state: LoopState) -> dict[str, Any]:
    """The JSON stored in ``state_json``."""
    return {"version": STATE_VERSION, "private": state.private}


def load_private(stored: dict[str, Any] | None) -> dict[str, Any]:
    """The private area of a stored state; refuses states from a newer schema clearly."""
    if not stored:
        return {}
    version = stored.get("version", STATE_VERSION)
    if not isinstance(version, int) or version > STATE_VERSION:
        raise StateVersionError(
            f"run state has schema version {version}; this worker understands up to {STATE_VERSION}"
        )
    private = stored.get("private") or {}
    return dict(private)


@dataclass(frozen=True)
class Done:
    """The model answered without tool calls."""

    text: str


@dataclass(frozen=True)
class Failed:
    """The run cannot continue; ``error`` is a readable reason."""

    error: str


@dataclass(frozen=True)
class Cancelled:
    """The run was cancelled, or this worker lost it, between steps."""


@dataclass(frozen=True)
class AwaitingApproval:
    """A tool batch is suspended until a human decides the calls in ``pending``; nothing of the batch ran."""

    pending: tuple[Any, ...]
    batch: tuple[str, ...]


Outcome = Done | Failed | Cancelled | AwaitingApproval
