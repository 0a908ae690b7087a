"""The scripted model: deterministic assistant turns from the agent's configuration.

A product feature, not a test double: tests, the demo and the benchmarks all run on it. The turn it plays is the
number of assistant turns already in the loop's persisted history, so a resumed run continues where it stopped (and
a thread's next run where its last one did, counting the whole stored conversation even when a history window shows
the model less of it); once the script is used up it answers ``done``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hango.agent.messages import AssistantTurn, Message, ToolCall, Usage
from hango.agent.models.base import ModelRequest

EXHAUSTED_TEXT = "done"


def generated_call_id(scope: str, turn: int, index: int) -> str:
    """A call id unique within a run: derived from the loop's scope (run or child call), the turn and position."""
    digest = hashlib.sha256(f"{scope}:{turn}:{index}".encode()).hexdigest()[:20]
    return f"call_{digest}"


def _estimate_tokens(messages: list[Message], system: str) -> int:
    # A stable stand-in for a tokenizer (about four characters a token), so usage is recorded and comparable.
    size = len(system) + sum(message.encoded_size for message in messages)
    return max(1, size // 4)


class ScriptedModel:
    """Plays ``script`` one entry per assistant turn."""

    def __init__(self, script: list[dict[str, Any]], scope: str, id_prefix: str = "") -> None:
        self._script = script
        self._scope = scope
        # Ids given in a script are unique within it; a loop replaying another loop's script (a general-purpose
        # subagent) prefixes them so they stay unique within the run.
        self._id_prefix = id_prefix

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """The scripted turn for the current position in the history."""
        # The stored conversation's turns, not the window's: a thread's next run plays the script's next entry.
        turn = request.turns_before + sum(1 for message in request.messages if message.role == "assistant")
        if turn >= len(self._script):
            return AssistantTurn(
                text=EXHAUSTED_TEXT, usage=Usage(_estimate_tokens(request.messages, request.system), 1)
            )
        entry = self._script[turn]
        calls = [
            ToolCall(
                id=self._id_prefix + call["id"] if call.get("id") else generated_call_id(self._scope, turn, index),
                name=call["name"],
                input=dict(call.get("args") or {}),
            )
            for index, call in enumerate(entry.get("tool_calls") or [])
        ]
        text = entry.get("text") or ""
        usage = Usage(_estimate_tokens(request.messages, request.system), max(1, len(text) // 4) + 10 * len(calls))
        return AssistantTurn(text=text, tool_calls=calls, usage=usage)
