"""The filesystem the agent core works on: what a run's tools and middlewares may do with its files.

The core names only this protocol; :class:`hango.store.files.SqlFileSystem` keeps the files in PostgreSQL, and the
unit tests use an in-memory double that behaves the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


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
