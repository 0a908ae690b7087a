"""Agent files through the API: the persistent ``/memories/`` and ``/skills/`` of an agent (owners and admins
write, everyone in the tenant reads). Run scratch files are not served here."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select

from hango.agent.paths import PathError, is_agent_path, is_storage_root, normalize_path
from hango.kernel.auth import Principal
from hango.kernel.errors import InvalidInput, NotFound
from hango.kernel.models import File
from hango.kernel.pagination import Page, PageRequest, paginate
from hango.platform.db import Database
from hango.services.tenancy import require_manager
from hango.store.agents import get_agent
from hango.store.files import find_agent_file, get_agent_file


def agent_path(raw: str) -> str:
    """The normalised agent path behind a URL path (``memories/AGENTS.md``); :class:`NotFound` for any other."""
    try:
        path = normalize_path("/" + raw.lstrip("/"))
    except PathError as exc:
        raise NotFound(f"file /{raw} not found") from exc
    if not is_agent_path(path) or path.endswith("/") or is_storage_root(path):
        raise NotFound(f"file {path} not found; only /memories/ and /skills/ files are served")
    return path


def _listing_prefix(raw: str) -> str:
    """A listing prefix normalised like every other path, so ``/memories/x/..`` lists ``/memories``."""
    try:
        return normalize_path(raw)
    except PathError as exc:
        raise InvalidInput.field("prefix", f"must be an absolute path such as /memories/: {exc}") from exc


def list_files(
    db: Database, principal: Principal, agent_id: uuid.UUID, prefix: str | None, page: PageRequest
) -> Page[File]:
    """An agent's files, by path, optionally under a prefix."""
    if prefix is not None:
        prefix = _listing_prefix(prefix)
    with db.transaction() as session:
        agent = get_agent(session, principal.tenant_id, agent_id)
        statement = select(File).where(File.tenant_id == principal.tenant_id, File.agent_id == agent.id)
        if prefix:
            statement = statement.where(File.path.startswith(prefix, autoescape=True))
        return paginate(session, statement, [File.path], page)


def read_file(db: Database, principal: Principal, agent_id: uuid.UUID, raw_path: str) -> File:
    """One agent file."""
    path = agent_path(raw_path)
    with db.transaction() as session:
        return get_agent_file(session, principal.tenant_id, agent_id, path)


def write_file(db: Database, principal: Principal, agent_id: uuid.UUID, raw_path: str, content: str) -> File:
    """Create or replace an agent file (owners and admins)."""
    require_manager(principal)
    path = agent_path(raw_path)
    if "\x00" in content:
        raise InvalidInput.field("content", "may not contain NUL characters")
    with db.transaction() as session:
        file = find_agent_file(session, principal.tenant_id, agent_id, path, for_update=True)
        if file is None:
            file = File(id=uuid.uuid4(), tenant_id=principal.tenant_id, agent_id=agent_id, path=path, content=content)
            session.add(file)
        else:
            file.content, file.updated_at = content, datetime.now(UTC)
        session.flush()
        session.refresh(file)
        return file


def delete_file(db: Database, principal: Principal, agent_id: uuid.UUID, raw_path: str) -> str:
    """Delete an agent file (owners and admins); returns its path."""
    require_manager(principal)
    path = agent_path(raw_path)
    with db.transaction() as session:
        session.delete(get_agent_file(session, principal.tenant_id, agent_id, path))
    return path


def size_of(file: File) -> int:
    """A file's size in UTF-8 bytes."""
    return len(file.content.encode())
