"""The built-in filesystem tools on real PostgreSQL, called as the loop calls them: through ``execute``.

Only what the SQL store itself must show is here: what a tenant, an agent and a run see of each other's files,
files persisting across transactions, and a refused write leaving the transaction usable. The tools' behaviour is
tested in memory (tests/unit/test_filesystem_tools.py), on a double kept equal to this store by
tests/integration/test_file_system_contract.py.

Every test works in its own tenant, so the rows it commits never meet another test's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from hango.agent.tools.base import ToolContext
from hango.kernel.models import Agent, Run, Tenant, User
from hango.platform.db import Database
from hango.store.files import SqlFileSystem
from tests.unit.test_filesystem_tools import Caller

pytestmark = pytest.mark.integration


def _tenant(session: Session) -> tuple[Tenant, User]:
    tenant = Tenant(id=uuid.uuid4(), name=f"fs-{uuid.uuid4().hex[:8]}")
    user = User(id=uuid.uuid4(), email=f"fs-{uuid.uuid4().hex[:8]}@example.com")
    session.add_all([tenant, user])
    session.flush()
    return tenant, user


def _agent(session: Session, tenant: Tenant, user: User) -> Agent:
    agent = Agent(
        id=uuid.uuid4(),
        tenant_id=tenant.id,
        name=f"agent-{uuid.uuid4().hex[:8]}",
        model={"provider": "scripted"},
        created_by=user.id,
    )
    session.add(agent)
    session.flush()
    return agent


def _run(session: Session, agent: Agent) -> Run:
    run = Run(
        id=uuid.uuid4(), tenant_id=agent.tenant_id, agent_id=agent.id, agent_snapshot={}, created_by=agent.created_by
    )
    session.add(run)
    session.flush()
    return run


def _seed_run(session: Session) -> Run:
    """A run of a new agent in a new tenant."""
    tenant, user = _tenant(session)
    return _run(session, _agent(session, tenant, user))


def _caller(session: Session, run: Run) -> Caller:
    files = SqlFileSystem(session, run.tenant_id, run.agent_id, run.id)
    return Caller(ToolContext(run.tenant_id, run.agent_id, run.id, "call", files))


@pytest.fixture
def fs(db: Database) -> Iterator[Caller]:
    """The tools of a fresh run, inside one transaction."""
    with db.transaction() as session:
        yield _caller(session, _seed_run(session))


# A refused write


def test_nul_characters_are_refused_without_breaking_the_transaction(fs: Caller) -> None:
    fs.ok("write_file", file_path="/kept.md", content="kept\n")

    assert "NUL" in fs.error("write_file", file_path="/bad.md", content="a\x00b")
    assert "NUL" in fs.error("edit_file", file_path="/kept.md", old_string="kept", new_string="\x00")
    assert fs.ok("ls", path="/") == "/kept.md"
    assert fs.ok("read_file", file_path="/kept.md") == "     1\tkept"


# Ownership: agent files persist across runs, scratch files do not, nobody else sees either


def test_memories_and_skills_persist_across_runs_but_scratch_does_not(db: Database) -> None:
    with db.transaction() as session:
        first = _seed_run(session)
        first_fs = _caller(session, first)
        first_fs.ok("write_file", file_path="/memories/AGENTS.md", content="prefers tabs\n")
        first_fs.ok("write_file", file_path="/skills/deploy/SKILL.md", content="# Deploy\n")
        first_fs.ok("write_file", file_path="/scratch.md", content="prefers nothing\n")
        agent_id = first.agent_id

    with db.transaction() as session:
        agent = session.get_one(Agent, agent_id)
        second = _caller(session, _run(session, agent))

        assert second.ok("read_file", file_path="/memories/AGENTS.md") == "     1\tprefers tabs"
        assert second.error("read_file", file_path="/scratch.md") == "file not found: /scratch.md"
        assert second.ok("ls", path="/") == "/memories/\n/skills/"
        assert second.ok("glob", pattern="**") == "/memories/AGENTS.md\n/skills/deploy/SKILL.md"
        assert second.ok("grep", pattern="prefers") == "/memories/AGENTS.md:1:prefers tabs"


def test_a_memory_edited_in_one_run_is_seen_by_the_next(db: Database) -> None:
    with db.transaction() as session:
        first = _seed_run(session)
        _caller(session, first).ok("write_file", file_path="/memories/AGENTS.md", content="v1\n")
        second = _run(session, session.get_one(Agent, first.agent_id))

    with db.transaction() as session:
        _caller(session, second).ok("edit_file", file_path="/memories/AGENTS.md", old_string="v1", new_string="v2")

    with db.transaction() as session:
        assert _caller(session, first).ok("read_file", file_path="/memories/AGENTS.md") == "     1\tv2"


def test_another_agent_of_the_tenant_sees_neither_memories_nor_scratch(db: Database) -> None:
    with db.transaction() as session:
        tenant, user = _tenant(session)
        mine = _caller(session, _run(session, _agent(session, tenant, user)))
        theirs = _caller(session, _run(session, _agent(session, tenant, user)))
        mine.ok("write_file", file_path="/memories/AGENTS.md", content="mine\n")
        mine.ok("write_file", file_path="/scratch.md", content="mine\n")

        assert theirs.ok("ls", path="/") == "no files under /"
        assert theirs.error("read_file", file_path="/memories/AGENTS.md") == "file not found: /memories/AGENTS.md"
        assert theirs.ok("grep", pattern="mine") == "no matches for 'mine' under /"

        theirs.ok("write_file", file_path="/memories/AGENTS.md", content="theirs\n")
        assert mine.ok("read_file", file_path="/memories/AGENTS.md") == "     1\tmine"


def test_another_tenant_sees_nothing_even_with_the_same_agent_and_run_ids(db: Database) -> None:
    with db.transaction() as session:
        run = _seed_run(session)
        mine = _caller(session, run)
        mine.ok("write_file", file_path="/memories/AGENTS.md", content="secret\n")
        mine.ok("write_file", file_path="/scratch.md", content="secret\n")
        other_tenant, _ = _tenant(session)
        # A context whose tenant disagrees with its agent and run must still be confined to its tenant.
        files = SqlFileSystem(session, other_tenant.id, run.agent_id, run.id)
        stranger = Caller(ToolContext(other_tenant.id, run.agent_id, run.id, "call", files))

        assert stranger.ok("ls", path="/") == "no files under /"
        assert stranger.error("read_file", file_path="/memories/AGENTS.md") == "file not found: /memories/AGENTS.md"
        assert stranger.error("read_file", file_path="/scratch.md") == "file not found: /scratch.md"
        assert stranger.ok("grep", pattern="secret") == "no matches for 'secret' under /"


# Path normalisation


def test_ownership_follows_the_normalised_path(db: Database) -> None:
    with db.transaction() as session:
        first = _seed_run(session)
        # Spelled from scratch space, but it resolves into /memories/, so it belongs to the agent.
        _caller(session, first).ok("write_file", file_path="/tmp/../memories/x.md", content="kept\n")
        second = _caller(session, _run(session, session.get_one(Agent, first.agent_id)))

        assert second.ok("read_file", file_path="/memories/x.md") == "     1\tkept"
