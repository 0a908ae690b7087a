"""The filesystem the agent core works on: what a run's tools and middlewares may do with its files.

The core names only this protocol; :class:`hango.store.files.SqlFileSystem` keeps the files in PostgreSQL, and the
unit tests use an in-memory double that behaves the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hango.agent.paths import normalize_path


@dataclass(frozen=True)
class FileInfo:
    """A file's path, size in UTF-8 bytes and last change."""

    path: str
    size: int
    updated_at: datetime


@dataclass(frozen=True)
class StorageUse:
    """What the owner of a path stores, in UTF-8 bytes of paths and contents: all its files, and the file at that
    path (0 if none)."""

    owner_bytes: int
    file_bytes: int


class FileSystem(Protocol):
    """One run's view of the filesystem: its scratch files plus its agent's files, within one tenant.

    Every path is normalised by the implementation (:func:`hango.agent.paths.normalize_path`, whose
    :class:`~hango.agent.paths.PathError` it raises for a relative or escaping path). ``/memories/…`` and
    ``/skills/…`` resolve to the agent, so they persist across the agent's runs; every other path resolves to the
    run. Neither is visible to another agent, run or tenant.
    """

    def read(self, path: str, *, for_update: bool = False) -> str | None:
        """The file's content, or ``None`` when it does not exist; ``for_update`` locks it until commit."""
        ...

    def write(self, path: str, content: str) -> None:
        """Create or replace a file."""
        ...

    def list_files(self, prefix: str = "/") -> list[FileInfo]:
        """Every visible file whose path starts with ``prefix`` (a plain string prefix), sorted by path."""
        ...

    def storage(self, path: str) -> StorageUse:
        """The bytes (paths and contents) stored by the owner of ``path`` (the run's scratch or the agent) and by it."""
        ...


@dataclass(frozen=True)
class OneFile:
    """A read-only copy of one file and of its owner's storage use: all that planning one call's change reads.

    The decision service plans the change of a call it approves on one of these, read from the store beforehand,
    so the planning, which is the agent core's, never calls back up into the store. Any other path is a
    :class:`LookupError`, and writing is refused: a copy that answered for files it does not hold would plan
    another change than the tool makes.
    """

    path: str
    content: str | None
    use: StorageUse

    def read(self, path: str, *, for_update: bool = False) -> str | None:
        """The file's content, or ``None`` when it does not exist (nothing is locked: it is a copy)."""
        return self.content if self._held(path) else None

    def write(self, path: str, content: str) -> None:
        """Refused: the copy is read-only."""
        raise PermissionError(f"a copy of {self.path} cannot be written")

    def list_files(self, prefix: str = "/") -> list[FileInfo]:
        """Refused: the copy holds one file, not a listing."""
        raise LookupError(f"a copy of {self.path} lists no files")

    def storage(self, path: str) -> StorageUse:
        """The storage use of the file's owner, as read with it."""
        self._held(path)
        return self.use

    def _held(self, path: str) -> bool:
        if normalize_path(path) != self.path:
            raise LookupError(f"a copy of {self.path} holds nothing of {path}")
        return True
