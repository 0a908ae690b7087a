"""One contract, two filesystems: the in-memory double of the unit tests and the SQL store on real PostgreSQL.

Every case runs against both, so that the double the tools' unit tests rely on cannot drift from the store the
workers use: path normalisation, who owns and who sees a path, listing order and prefixes, sizes and storage totals,
and what either refuses.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

import pytest
from sqlalchemy.orm import Session

from hango.agent.files import FileSystem
from hango.agent.paths import PathError
from hango.kernel.models import Agent, Tenant
from hango.platform.db import Database
from hango.store.files import SqlFileSystem
from tests.integration.test_filesystem_tools import _agent, _run, _tenant
from tests.unit.fakes import FileTable

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Ids:
    """Whose view of the files: a run of an agent of a tenant."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    run_id: uuid.UUID


class Store(Protocol):
    """Makes tenants, agents and runs, and the filesystem view of any of them."""

    def new_run(self, *, agent_of: Ids | None = None) -> Ids:
        """A run of a new agent in a new tenant, or of the agent of ``agent_of``."""
        ...

    def new_agent(self, tenant_of: Ids) -> Ids:
        """A run of a new agent of the tenant of ``tenant_of``."""
        ...

    def new_tenant(self) -> uuid.UUID:
        """A new tenant."""
        ...

    def view(self, ids: Ids) -> FileSystem:
        """The filesystem of the run ``ids`` names."""
        ...

    def refusing(self) -> AbstractContextManager[object]:
        """Where a refused write may be made without ending the test's transaction."""
        ...


@dataclass
class MemoryStore:
    """:class:`Store` on the unit tests' :class:`FileTable`."""

    table: FileTable = field(default_factory=FileTable)

    def new_run(self, *, agent_of: Ids | None = None) -> Ids:
        if agent_of is None:
            return Ids(uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
        return Ids(agent_of.tenant_id, agent_of.agent_id, uuid.uuid4())

    def new_agent(self, tenant_of: Ids) -> Ids:
        return Ids(tenant_of.tenant_id, uuid.uuid4(), uuid.uuid4())

    def new_tenant(self) -> uuid.UUID:
        return uuid.uuid4()

    def view(self, ids: Ids) -> FileSystem:
        return self.table.view(ids.tenant_id, ids.agent_id, ids.run_id)

    def refusing(self) -> AbstractContextManager[object]:
        return nullcontext()


@dataclass
class SqlStore:
    """:class:`Store` on real rows of the test database, in one transaction."""

    session: Session

    def new_run(self, *, agent_of: Ids | None = None) -> Ids:
        if agent_of is None:
            tenant, user = _tenant(self.session)
            agent = _agent(self.session, tenant, user)
        else:
            agent = self.session.get_one(Agent, agent_of.agent_id)
        run = _run(self.session, agent)
        return Ids(run.tenant_id, run.agent_id, run.id)

    def new_agent(self, tenant_of: Ids) -> Ids:
        creator = self.session.get_one(Agent, tenant_of.agent_id).created_by
        tenant = self.session.get_one(Tenant, tenant_of.tenant_id)
        agent = Agent(
            id=uuid.uuid4(),
            tenant_id=tenant.id,
            name=f"agent-{uuid.uuid4().hex[:8]}",
            model={"provider": "scripted"},
            created_by=creator,
        )
        self.session.add(agent)
        self.session.flush()
        run = _run(self.session, agent)
        return Ids(run.tenant_id, run.agent_id, run.id)

    def new_tenant(self) -> uuid.UUID:
        tenant, _ = _tenant(self.session)
        return tenant.id

    def view(self, ids: Ids) -> FileSystem:
        return SqlFileSystem(self.session, ids.tenant_id, ids.agent_id, ids.run_id)

    def refusing(self) -> AbstractContextManager[object]:
        # As the loop isolates each tool call: a failed statement rolls back its savepoint, not the transaction.
        return self.session.begin_nested()


@pytest.fixture(params=["memory", "sql"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    """Each implementation in turn."""
    if request.param == "memory":
        yield MemoryStore()
        return
    db: Database = request.getfixturevalue("db")
    with db.transaction() as session:
        yield SqlStore(session)


def test_a_file_is_read_back_and_replaced_whole(store: Store) -> None:
    files = store.view(store.new_run())

    assert files.read("/notes.md") is None
    files.write("/notes.md", "first\n")
    files.write("/notes.md", "second\n")

    assert files.read("/notes.md") == "second\n"
    assert files.read("/notes.md", for_update=True) == "second\n"
    assert [info.path for info in files.list_files()] == ["/notes.md"]


def test_paths_are_normalised_and_relative_ones_refused(store: Store) -> None:
    files = store.view(store.new_run())
    files.write("/memories/../memories//a.md", "one")
    files.write("/tmp/../memories/./b.md", "two")

    assert files.read("/memories/a.md") == "one"
    assert [info.path for info in files.list_files("/memories/x/../")] == ["/memories/a.md", "/memories/b.md"]
    assert files.storage("//memories/a.md").file_bytes == len("/memories/a.md") + 3
    for escaping in ("notes.md", "/../etc/passwd"):
        with pytest.raises(PathError):
            files.read(escaping)
        with pytest.raises(PathError):
            files.write(escaping, "x")
        with pytest.raises(PathError):
            files.list_files(escaping)
        with pytest.raises(PathError):
            files.storage(escaping)


def test_listing_is_sorted_by_code_point_and_filters_by_a_plain_prefix(store: Store) -> None:
    files = store.view(store.new_run())
    paths = ["/b", "/B", "/a/b", "/a-b", "/A", "/a.md", "/a_b", "/a%b", "/axb", "/é", "/memories/z", "/skills/s.md"]
    for path in paths:
        files.write(path, "")

    assert [info.path for info in files.list_files()] == sorted(paths)
    assert [info.path for info in files.list_files("/a")] == ["/a%b", "/a-b", "/a.md", "/a/b", "/a_b", "/axb"]
    # LIKE's wildcards are literal characters in a prefix.
    assert [info.path for info in files.list_files("/a_")] == ["/a_b"]
    assert [info.path for info in files.list_files("/a%")] == ["/a%b"]
    assert files.list_files("/nothing/") == []


def test_sizes_are_utf8_bytes_of_the_content(store: Store) -> None:
    files = store.view(store.new_run())
    files.write("/é.txt", "né\n")
    files.write("/empty", "")

    assert {info.path: info.size for info in files.list_files()} == {"/empty": 0, "/é.txt": 4}


def test_agent_paths_persist_across_the_agents_runs_and_scratch_does_not(store: Store) -> None:
    first = store.new_run()
    store.view(first).write("/memories/AGENTS.md", "memory")
    store.view(first).write("/skills/deploy/SKILL.md", "skill")
    store.view(first).write("/scratch.md", "scratch")
    second = store.view(store.new_run(agent_of=first))

    assert second.read("/memories/AGENTS.md") == "memory"
    assert second.read("/scratch.md") is None
    assert [info.path for info in second.list_files()] == ["/memories/AGENTS.md", "/skills/deploy/SKILL.md"]
    second.write("/memories/AGENTS.md", "edited")
    second.write("/scratch.md", "second's own")
    assert store.view(first).read("/memories/AGENTS.md") == "edited"
    assert store.view(first).read("/scratch.md") == "scratch"


def test_other_agents_and_other_tenants_see_nothing(store: Store) -> None:
    mine = store.new_run()
    store.view(mine).write("/memories/AGENTS.md", "mine")
    store.view(mine).write("/scratch.md", "mine")
    theirs = store.view(store.new_agent(mine))
    # A view whose tenant disagrees with its agent and run must still be confined to its tenant.
    stranger = store.view(Ids(store.new_tenant(), mine.agent_id, mine.run_id))

    for other in (theirs, stranger):
        assert other.list_files() == []
        assert other.read("/memories/AGENTS.md") is None
        assert other.read("/scratch.md") is None
        assert other.storage("/memories/AGENTS.md") == other.storage("/scratch.md")
        assert other.storage("/scratch.md").owner_bytes == 0
    theirs.write("/memories/AGENTS.md", "theirs")
    assert store.view(mine).read("/memories/AGENTS.md") == "mine"


def test_storage_sums_paths_and_contents_per_owner(store: Store) -> None:
    first = store.new_run()
    files = store.view(first)
    files.write("/a.txt", "aaa")
    files.write("/dir/b.txt", "é")
    files.write("/memories/m.md", "mm")
    store.view(store.new_run(agent_of=first)).write("/skills/s.md", "s")
    store.view(store.new_run(agent_of=first)).write("/other-run.txt", "not mine")

    scratch = files.storage("/a.txt")
    agent = files.storage("/memories/new.md")

    assert scratch.owner_bytes == len("/a.txt") + 3 + len("/dir/b.txt") + 2
    assert scratch.file_bytes == len("/a.txt") + 3
    assert files.storage("/missing.txt") == type(scratch)(scratch.owner_bytes, 0)
    assert agent.owner_bytes == len("/memories/m.md") + 2 + len("/skills/s.md") + 1
    assert agent.file_bytes == 0


@pytest.mark.parametrize(("content", "refusal"), [("a\x00b", ValueError), ("\ud800", UnicodeEncodeError)])
def test_contents_postgresql_cannot_hold_are_refused(store: Store, content: str, refusal: type[Exception]) -> None:
    files = store.view(store.new_run())
    files.write("/kept.md", "kept")

    with pytest.raises(refusal), store.refusing():
        files.write("/bad.md", content)

    assert files.read("/bad.md") is None
    assert [info.path for info in files.list_files()] == ["/kept.md"]
