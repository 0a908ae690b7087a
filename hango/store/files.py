"""The agents' virtual filesystem: agent-owned ``/memories/`` and ``/skills/``, scratch owned by a run or its
thread."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import InstrumentedAttribute, Session

from hango.agent.deadline import shielded_call
from hango.agent.files import FileInfo, OneFile, StorageUse
from hango.agent.paths import is_agent_path, normalize_path
from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import File, Run
from hango.store.agents import get_agent
from hango.store.runs import get_run


class SqlFileSystem:
    """One run's view of the filesystem inside a transaction: its scratch files plus its agent's files.

    The :class:`~hango.agent.files.FileSystem` of the agent core, on the ``files`` table.

    Paths are normalised here; ``/memories/…`` and ``/skills/…`` resolve to the agent, everything else to the run.
    Every method runs shielded from a tool call's deadline timer, which must never interrupt SQLAlchemy in the
    middle of a statement (see :mod:`hango.agent.deadline`).
    """

    def __init__(
        self,
        session: Session,
        tenant_id: uuid.UUID,
        agent_id: uuid.UUID,
        run_id: uuid.UUID,
        thread_id: uuid.UUID | None = None,
    ) -> None:
        self._session = session
        self._tenant_id = tenant_id
        self._agent_id = agent_id
        self._scratch = _Scratch(run_id, thread_id)

    def _owner(self, path: str) -> ColumnElement[bool]:
        return _owned_by(self._tenant_id, self._agent_id, self._scratch, path)

    def _visible(self) -> ColumnElement[bool]:
        return (File.tenant_id == self._tenant_id) & ((File.agent_id == self._agent_id) | self._scratch.files())

    @shielded_call
    def read(self, path: str, *, for_update: bool = False) -> str | None:
        """The file's content, or ``None`` when it does not exist; ``for_update`` locks it until commit."""
        path = normalize_path(path)
        return _content(self._session, self._owner(path), path, for_update=for_update)

    @shielded_call
    def write(self, path: str, content: str) -> None:
        """Create or replace a file, in one statement (an upsert on the owner's unique path)."""
        path = normalize_path(path)
        owned = is_agent_path(path)
        owner_column = File.agent_id if owned else self._scratch.column()
        new = insert(File).values(
            id=uuid.uuid4(),
            tenant_id=self._tenant_id,
            path=path,
            content=content,
            **({"agent_id": self._agent_id} if owned else self._scratch.values()),
        )
        self._session.execute(
            new.on_conflict_do_update(
                index_elements=[owner_column, File.path],
                index_where=owner_column.is_not(None),
                set_={"content": new.excluded.content, "updated_at": datetime.now(UTC)},
                # The owner's ids are the tenant's own; the guard keeps even a forged one from crossing tenants.
                where=File.tenant_id == self._tenant_id,
            )
        )

    @shielded_call
    def delete(self, path: str) -> bool:
        """Remove a file; ``False`` when it did not exist."""
        path = normalize_path(path)
        result = self._session.execute(delete(File).where(self._owner(path), File.path == path))
        return bool(result.rowcount)  # type: ignore[attr-defined]

    @shielded_call
    def list_files(self, prefix: str = "/") -> list[FileInfo]:
        """Every visible file whose path starts with ``prefix``, sorted by path in code-point order (``COLLATE "C"``,
        whatever the database's collation, so listings and globs order alike everywhere)."""
        prefix = normalize_path(prefix)
        statement = (
            select(File.path, func.octet_length(File.content), File.updated_at)
            .where(self._visible(), File.path.startswith(prefix, autoescape=True))
            .order_by(File.path.collate("C"))
        )
        return [FileInfo(path, size or 0, updated) for path, size, updated in self._session.execute(statement)]

    @shielded_call
    def storage(self, path: str) -> StorageUse:
        """The bytes (paths and contents) stored by the owner of ``path`` (the run's scratch, or the agent), and by
        the file at ``path``."""
        path = normalize_path(path)
        return _storage_use(self._session, self._owner(path), path)


class _Scratch(NamedTuple):
    """Who owns a run's scratch files: its thread when it has one (they persist across the thread's runs), else the
    run."""

    run_id: uuid.UUID
    thread_id: uuid.UUID | None

    def column(self) -> InstrumentedAttribute[uuid.UUID | None]:
        return File.run_id if self.thread_id is None else File.thread_id

    def values(self) -> dict[str, uuid.UUID]:
        return {"run_id": self.run_id} if self.thread_id is None else {"thread_id": self.thread_id}

    def files(self) -> ColumnElement[bool]:
        return self.column() == (self.run_id if self.thread_id is None else self.thread_id)


def _owned_by(tenant_id: uuid.UUID, agent_id: uuid.UUID, scratch: _Scratch, path: str) -> ColumnElement[bool]:
    """The files of the owner of a normalised ``path``: the agent's for ``/memories/`` and ``/skills/``, else the
    scratch owner's (the run's, or its thread's)."""
    if is_agent_path(path):
        return (File.tenant_id == tenant_id) & (File.agent_id == agent_id)
    return (File.tenant_id == tenant_id) & scratch.files()


def _content(session: Session, owner: ColumnElement[bool], path: str, *, for_update: bool = False) -> str | None:
    statement = select(File.content).where(owner, File.path == path)
    return session.scalar(statement.with_for_update() if for_update else statement)


def _use_columns(path: str) -> tuple[ColumnElement[Any], ColumnElement[Any]]:
    """The bytes (paths and contents) of an owner's files, and of the one at ``path``, as aggregates over them.

    ``octet_length`` reads a stored value's size without fetching, or decompressing, the value itself.
    """
    size = func.octet_length(File.path) + func.octet_length(File.content)
    return func.coalesce(func.sum(size), 0), func.coalesce(func.sum(size).filter(File.path == path), 0)


def _storage_use(session: Session, owner: ColumnElement[bool], path: str) -> StorageUse:
    owner_bytes, file_bytes = session.execute(select(*_use_columns(path)).where(owner)).one()
    return StorageUse(int(owner_bytes), int(file_bytes))


def run_files(
    session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, run_id: uuid.UUID, thread_id: uuid.UUID | None
) -> SqlFileSystem:
    """The files a run's tools see: its scratch files (its thread's, for a thread's run) and its agent's
    ``/memories/`` and ``/skills/``. The worker's tools and the approval preview both read them through here, so
    both resolve a path to the same owner."""
    return SqlFileSystem(session, tenant_id, agent_id, run_id, thread_id)


def one_file(session: Session, run: Run, path: str) -> OneFile:
    """A copy of the file at ``path`` as a run's tools see it, with its owner's storage use: what planning one
    change needs, for the decision service's preview. Read outside any tool call, so without a deadline's shield;
    in one statement (the content is the one row of that path the aggregate keeps)."""
    path = normalize_path(path)
    owner = _owned_by(run.tenant_id, run.agent_id, _Scratch(run.id, run.thread_id), path)
    statement = select(*_use_columns(path), func.max(File.content).filter(File.path == path)).where(owner)
    owner_bytes, file_bytes, content = session.execute(statement).one()
    return OneFile(path, content, StorageUse(int(owner_bytes), int(file_bytes)))


def find_agent_file(
    session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, path: str, *, for_update: bool = False
) -> File | None:
    """A file of one of the tenant's agents, if it exists; :class:`NotFound` when the agent is not the tenant's."""
    agent = get_agent(session, tenant_id, agent_id)
    statement = select(File).where(File.tenant_id == tenant_id, File.agent_id == agent.id, File.path == path)
    return session.scalar(statement.with_for_update() if for_update else statement)


def get_agent_file(session: Session, tenant_id: uuid.UUID, agent_id: uuid.UUID, path: str) -> File:
    """A file owned by one of the tenant's agents; :class:`NotFound` otherwise."""
    file = find_agent_file(session, tenant_id, agent_id, path)
    if file is None:
        raise NotFound(f"file {path} not found")
    return file


def get_run_file(session: Session, principal: Principal, run_id: uuid.UUID, path: str) -> File:
    """A scratch file of a run the principal may see; :class:`NotFound` otherwise."""
    run = get_run(session, principal, run_id)
    scratch = _Scratch(run.id, run.thread_id)
    file = session.scalar(select(File).where(File.tenant_id == run.tenant_id, scratch.files(), File.path == path))
    if file is None:
        raise NotFound(f"file {path} not found")
    return file
