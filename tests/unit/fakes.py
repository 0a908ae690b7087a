"""In-memory doubles of the loop's persistence, its services and its filesystem, for unit tests of the agent core."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from hango.agent.files import FileInfo, StorageUse
from hango.agent.loop import GrantWithdrawn, RunStopped
from hango.agent.messages import Message, ToolCall, ToolResult, Usage
from hango.agent.paths import is_agent_path, normalize_path
from hango.agent.state import Decision, GrantLookup, LoopState, PendingCall, StandingApproval


@dataclass
class _Stored:
    content: str
    updated_at: datetime


# A file's owner, as the ``files`` table records it: the tenant, then the agent or the run.
_Owner = tuple[uuid.UUID, Literal["agent", "run"], uuid.UUID]


@dataclass
class FileTable:
    """The ``files`` table in memory, shared by the views of every tenant, agent and run."""

    rows: dict[tuple[_Owner, str], _Stored] = field(default_factory=dict)

    def view(self, tenant_id: uuid.UUID, agent_id: uuid.UUID, run_id: uuid.UUID) -> MemoryFiles:
        """One run's view of this table."""
        return MemoryFiles(tenant_id, agent_id, run_id, self)


@dataclass
class MemoryFiles:
    """One run's view of a :class:`FileTable`: the in-memory :class:`~hango.agent.files.FileSystem`.

    It behaves as :class:`hango.store.files.SqlFileSystem` does (tests/integration/test_file_system_contract.py runs
    the same cases on both): normalised paths, ``/memories/`` and ``/skills/`` owned by the agent and every other
    path by the run, listings sorted by path, and sizes in UTF-8 bytes of paths and contents. Like the database
    driver, it refuses a content holding a NUL character (:class:`ValueError`) or a lone surrogate
    (:class:`UnicodeEncodeError`).
    """

    tenant_id: uuid.UUID = field(default_factory=uuid.uuid4)
    agent_id: uuid.UUID = field(default_factory=uuid.uuid4)
    run_id: uuid.UUID = field(default_factory=uuid.uuid4)
    table: FileTable = field(default_factory=FileTable)

    def _owner(self, path: str) -> _Owner:
        if is_agent_path(path):
            return self.tenant_id, "agent", self.agent_id
        return self.tenant_id, "run", self.run_id

    def _visible(self, owner: _Owner) -> bool:
        return owner in {(self.tenant_id, "agent", self.agent_id), (self.tenant_id, "run", self.run_id)}

    def read(self, path: str, *, for_update: bool = False) -> str | None:
        """The file's content, or ``None``; ``for_update`` has nothing to lock here."""
        path = normalize_path(path)
        stored = self.table.rows.get((self._owner(path), path))
        return None if stored is None else stored.content

    def write(self, path: str, content: str) -> None:
        """Create or replace a file."""
        path = normalize_path(path)
        if "\x00" in content:
            raise ValueError("A string literal cannot contain NUL (0x00) characters.")
        content.encode("utf-8")  # like the driver, refuse what UTF-8 cannot encode (a lone surrogate)
        self.table.rows[self._owner(path), path] = _Stored(content, datetime.now(UTC))

    def list_files(self, prefix: str = "/") -> list[FileInfo]:
        """Every visible file whose path starts with ``prefix``, sorted by path."""
        prefix = normalize_path(prefix)
        found = [
            FileInfo(path, _size(stored.content), stored.updated_at)
            for (owner, path), stored in self.table.rows.items()
            if self._visible(owner) and path.startswith(prefix)
        ]
        return sorted(found, key=lambda info: info.path)

    def storage(self, path: str) -> StorageUse:
        """The bytes (paths and contents) stored by the owner of ``path`` and by the file at ``path``."""
        path = normalize_path(path)
        owner = self._owner(path)
        rows = self.table.rows.items()
        sizes = {name: _size(name) + _size(stored.content) for (of, name), stored in rows if of == owner}
        return StorageUse(sum(sizes.values()), sizes.get(path, 0))


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass
class MemoryBatch:
    port: MemoryPort
    files: Any
    finished: list[str] = field(default_factory=list)

    def tool_finished(self, call: ToolCall, result: ToolResult) -> None:
        self.finished.append(call.id)

    def isolated(self, call: ToolCall, run: Callable[[], ToolResult], *, delegates: bool = False) -> ToolResult:
        return run()

    def append(self, messages: list[Message], state: LoopState) -> list[Message]:
        self.port.executions.update(state.executions)
        state.executions.clear()
        return self.port.append(messages, state)


@dataclass
class MemoryPort:
    """Records what the loop persisted; can be told to stop the run after N appends."""

    stored: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    started: list[str] = field(default_factory=list)
    # Calls finished by the messages of an append outside a batch (a repair), in order.
    finished: list[str] = field(default_factory=list)
    # Approval ids marked executing, in order, and how each batch's approved calls ended.
    executing: list[str] = field(default_factory=list)
    executions: dict[str, str] = field(default_factory=dict)
    # Standing approvals by tool name, and the calls recorded as decided by one.
    grants: dict[str, StandingApproval] = field(default_factory=dict)
    grant_lookups: list[GrantLookup] = field(default_factory=list)
    granted: list[str] = field(default_factory=list)
    # Revoke every grant when the loop first records a granted call (a revocation racing the loop).
    revoke_on_record: bool = False
    stop_after: int | None = None
    files_view: MemoryFiles = field(default_factory=MemoryFiles)
    tenant_id: uuid.UUID = field(default_factory=uuid.uuid4)
    agent_id: uuid.UUID = field(default_factory=uuid.uuid4)
    run_id: uuid.UUID = field(default_factory=uuid.uuid4)
    subagent_call_id: uuid.UUID | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def check_active(self) -> None:
        if self.stop_after is not None and len(self.stored) >= self.stop_after:
            raise RunStopped("stopped by the test")

    def append(
        self,
        messages: list[Message],
        state: LoopState,
        usage: Usage | None = None,
        *,
        finished: Sequence[tuple[ToolCall, ToolResult]] = (),
    ) -> list[Message]:
        self.finished += [call.id for call, _ in finished]
        stored = [Message(m.role, m.content, seq=len(self.stored) + i + 1) for i, m in enumerate(messages)]
        self.stored += stored
        self.usage = self.usage + (usage or Usage())
        return stored

    def tool_started(self, call: ToolCall, state: LoopState) -> None:
        assert call.id in state.announced, "the state that goes with tool.started names the call"
        self.started.append(call.id)

    def execution_started(self, approval_id: str) -> None:
        self.executing.append(approval_id)

    def standing_approval(self, lookup: GrantLookup) -> StandingApproval | None:
        self.grant_lookups.append(lookup)
        return self.grants.get(lookup.call.name)

    def record_granted(self, granted: Sequence[PendingCall], state: LoopState) -> dict[str, Decision]:
        if self.revoke_on_record:
            self.grants.clear()
            raise GrantWithdrawn("revoked by the test")
        self.granted += [pending.call.id for pending in granted]
        return {pending.call.id: Decision("approve", str(uuid.uuid4())) for pending in granted}

    @contextmanager
    def batch(self) -> Iterator[MemoryBatch]:
        yield MemoryBatch(self, self.files_view)

    @contextmanager
    def files(self) -> Iterator[Any]:
        yield self.files_view
