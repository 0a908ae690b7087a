"""In-memory doubles of the loop's persistence and services, for unit tests of the agent core."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hango.agent.loop import RunStopped
from hango.agent.messages import Message, ToolCall, ToolResult, Usage
from hango.agent.state import LoopState


class MemoryFiles:
    """A dict standing in for the filesystem view."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def read(self, path: str, *, for_update: bool = False) -> str | None:
        return self.data.get(path)

    def write(self, path: str, content: str) -> None:
        self.data[path] = content


@dataclass
class MemoryBatch:
    port: MemoryPort
    files: Any
    finished: list[str] = field(default_factory=list)

    def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        self.finished.append(call.id)

    def isolated(self, call: ToolCall, run: Callable[[], ToolResult]) -> ToolResult:
        return run()

    def append(self, messages: list[Message], state: LoopState) -> list[Message]:
        return self.port.append(messages, state)


@dataclass
class MemoryPort:
    """Records what the loop persisted; can be told to stop the run after N appends."""

    stored: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    started: list[str] = field(default_factory=list)
    stop_after: int | None = None
    files_view: MemoryFiles = field(default_factory=MemoryFiles)
    tenant_id: uuid.UUID = field(default_factory=uuid.uuid4)
    agent_id: uuid.UUID = field(default_factory=uuid.uuid4)
    run_id: uuid.UUID = field(default_factory=uuid.uuid4)
    subagent_call_id: uuid.UUID | None = None
    agent: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)

    def check_active(self) -> None:
        if self.stop_after is not None and len(self.stored) >= self.stop_after:
            raise RunStopped("stopped by the test")

    def append(self, messages: list[Message], state: LoopState, usage: Usage | None = None) -> list[Message]:
        stored = [Message(m.role, m.content, seq=len(self.stored) + i + 1) for i, m in enumerate(messages)]
        self.stored += stored
        self.usage = self.usage + (usage or Usage())
        return stored

    def tool_started(self, call: ToolCall) -> None:
        self.started.append(call.id)

    @contextmanager
    def batch(self) -> Iterator[MemoryBatch]:
        yield MemoryBatch(self, self.files_view)

    @contextmanager
    def files(self) -> Iterator[Any]:
        yield self.files_view
