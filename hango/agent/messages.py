"""Conversation messages and content blocks, in the common provider shape and exactly as persisted.

Blocks are plain JSON objects so that what the loop holds, what PostgreSQL stores and what the API returns are
the same values:

- ``{"type": "text", "text": str}``
- ``{"type": "tool_use", "id": str, "name": str, "input": dict}``
- ``{"type": "tool_result", "tool_use_id": str, "content": str, "is_error": bool}``
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Block = dict[str, Any]
MessageRole = Literal["user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced; ``is_error`` results are shown to the model as failures it can recover from."""

    tool_use_id: str
    content: str
    is_error: bool = False

    def block(self) -> Block:
        """The ``tool_result`` block of this result."""
        return {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": self.content,
            "is_error": self.is_error,
        }


@dataclass(frozen=True)
class Message:
    """One message of a loop's history; ``seq`` is set once it is persisted."""

    role: MessageRole
    content: list[Block]
    seq: int | None = None
    subagent_call_id: str | None = None

    # A message's content is never changed once it is built, so what is derived from it is computed once: a
    # resumed loop reads these for every message of a long history at each step.

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The ``tool_use`` blocks of an assistant message, in order."""
        return list(self._tool_calls)

    @functools.cached_property
    def _tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(block["id"], block["name"], dict(block.get("input") or {}))
            for block in self.content
            if block.get("type") == "tool_use"
        )

    @functools.cached_property
    def tool_result_ids(self) -> frozenset[str]:
        """The ids answered by the ``tool_result`` blocks of this message."""
        return frozenset(block["tool_use_id"] for block in self.content if block.get("type") == "tool_result")

    @functools.cached_property
    def encoded_size(self) -> int:
        """The length of the content as JSON text."""
        return len(json.dumps(self.content))

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.get("text", "") for block in self.content if block.get("type") == "text")


def text_block(text: str) -> Block:
    """A text block."""
    return {"type": "text", "text": text}


def tool_use_block(call: ToolCall) -> Block:
    """A tool_use block."""
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}


def user_message(text: str) -> Message:
    """A user message holding one text block."""
    return Message(role="user", content=[text_block(text)])


@dataclass(frozen=True)
class Usage:
    """Tokens a model call consumed."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class AssistantTurn:
    """A model's answer: optional text and tool calls, with its usage."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def message(self) -> Message:
        """The assistant message to persist."""
        blocks = [text_block(self.text)] if self.text else []
        blocks += [tool_use_block(call) for call in self.tool_calls]
        return Message(role="assistant", content=blocks)


def unique_call_ids(
    turn: AssistantTurn, history: Iterable[Message], taken: Collection[str] = frozenset()
) -> AssistantTurn:
    """The turn with every call id unused by ``history``, by ``taken`` and by the turn's earlier calls.

    Tool results and approvals are matched to calls by id, so a provider repeating an id (a scripted model, an
    OpenAI-compatible server counting from 1 each turn) would make a new call look answered or decided. A repeat
    becomes ``<id>_2`` (``_3``, … if that is taken too), derived from the history alone, before it is persisted:
    what the loop, the store and the provider see next is the renamed id. ``taken`` holds the ids of the rest of
    the run (the parent's and the other children's), which are not in one loop's history.
    """
    used = {call.id for message in history for call in message.tool_calls} | set(taken)
    calls: list[ToolCall] = []
    for call in turn.tool_calls:
        base = call.id or "call"
        unique, suffix = base, 2
        while unique in used:
            unique, suffix = f"{base}_{suffix}", suffix + 1
        used.add(unique)
        calls.append(call if unique == call.id else replace(call, id=unique))
    if calls == turn.tool_calls:
        return turn
    return replace(turn, tool_calls=calls)
