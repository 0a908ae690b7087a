"""The built-in filesystem tools on real PostgreSQL, called as the loop calls them: through ``execute``.

Every test works in its own tenant, so the rows it commits never meet another test's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from sqlalchemy.orm import Session

from hango.agent.messages import ToolCall, ToolResult
from hango.agent.tools.base import ToolContext, execute
from hango.agent.tools.filesystem import BUILTIN_TOOLS, MAX_GREP_MATCHES, MAX_LINE_CHARS, builtin_registry
from hango.db import Database
from hango.models import Agent, Run, Tenant, User
from hango.store.files import FileSystem

pytestmark = pytest.mark.integration

TOOLS = {tool.name: tool for tool in BUILTIN_TOOLS}


@dataclass
class Caller:
    """Calls the built-in tools as one run of one agent."""

    context: ToolContext

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """The result of one tool call with exactly these arguments."""
        return execute(TOOLS[name], self.context, ToolCall(f"call-{uuid.uuid4().hex[:8]}", name, args))

    def ok(self, name: str, **args: Any) -> str:
        """The content of a call that must succeed."""
        result = self.call(name, args)
        assert not result.is_error, result.content
        return result.content

    def error(self, name: str, **args: Any) -> str:
        """The content of a call that must be an error result."""
        result = self.call(name, args)
        assert result.is_error, result.content
        return result.content


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
    files = FileSystem(session, run.tenant_id, run.agent_id, run.id)
    return Caller(ToolContext(run.tenant_id, run.agent_id, run.id, "call", files))


@pytest.fixture
def fs(db: Database) -> Iterator[Caller]:
    """The tools of a fresh run, inside one transaction."""
    with db.transaction() as session:
        yield _caller(session, _seed_run(session))


def _write_tree(fs: Caller) -> None:
    for path in ("/a.md", "/b.txt", "/docs/x.md", "/docs/deep/y.md", "/docs/deep/z.txt", "/memories/AGENTS.md"):
        fs.ok("write_file", file_path=path, content=f"content of {path}\n")


# The registry and the schemas


def test_registry_holds_the_six_builtins_with_strict_schemas() -> None:
    registry = builtin_registry()

    assert registry.names() == {"ls", "read_file", "write_file", "edit_file", "glob", "grep"}
    for tool in BUILTIN_TOOLS:
        Draft202012Validator.check_schema(tool.parameters)
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
        assert set(tool.parameters["required"]) <= set(tool.parameters["properties"])
        assert tool.description


def test_argument_names_match_the_contract() -> None:
    properties = {tool.name: set(tool.parameters["properties"]) for tool in BUILTIN_TOOLS}
    required = {tool.name: set(tool.parameters["required"]) for tool in BUILTIN_TOOLS}

    assert properties == {
        "ls": {"path"},
        "read_file": {"file_path", "offset", "limit"},
        "write_file": {"file_path", "content"},
        "edit_file": {"file_path", "old_string", "new_string", "replace_all"},
        "glob": {"pattern", "path"},
        "grep": {"pattern", "path", "glob"},
    }
    assert required == {
        "ls": {"path"},
        "read_file": {"file_path"},
        "write_file": {"file_path", "content"},
        "edit_file": {"file_path", "old_string", "new_string"},
        "glob": {"pattern"},
        "grep": {"pattern"},
    }


@pytest.mark.parametrize(
    ("name", "args", "field"),
    [
        ("read_file", {}, "file_path"),
        ("read_file", {"file_path": "/a.md", "offset": -1}, "offset"),
        ("read_file", {"file_path": "/a.md", "limit": 0}, "limit"),
        ("read_file", {"file_path": "/a.md", "offset": "3"}, "offset"),
        ("read_file", {"file_path": 7}, "file_path"),
        ("write_file", {"file_path": "/a.md", "content": "x", "mode": "append"}, "mode"),
        ("write_file", {"file_path": "/a.md", "content": 5}, "content"),
        ("write_file", {"file_path": "/a.md"}, "content"),
        ("edit_file", {"file_path": "/a.md", "old_string": "", "new_string": "x"}, "old_string"),
        (
            "edit_file",
            {"file_path": "/a.md", "old_string": "a", "new_string": "b", "replace_all": "yes"},
            "replace_all",
        ),
        ("ls", {}, "path"),
        ("glob", {"pattern": ""}, "pattern"),
        ("grep", {"pattern": "x", "glob": 3}, "glob"),
    ],
)
def test_schema_violations_are_error_results(fs: Caller, name: str, args: dict[str, Any], field: str) -> None:
    result = fs.call(name, args)

    assert result.is_error
    assert result.content.startswith(f"invalid arguments for {name}:")
    assert field in result.content


def test_invalid_arguments_do_not_run_the_handler(fs: Caller) -> None:
    fs.ok("write_file", file_path="/a.md", content="one\n")

    assert fs.call("write_file", {"file_path": "/new.md", "content": "x", "mode": "append"}).is_error
    assert fs.call("write_file", {"file_path": "/a.md", "content": "two\n", "overwrite": True}).is_error
    assert fs.call(
        "edit_file", {"file_path": "/a.md", "old_string": "one", "new_string": "1", "replace_all": 1}
    ).is_error

    assert fs.error("read_file", file_path="/new.md") == "file not found: /new.md"
    assert fs.ok("read_file", file_path="/a.md") == "     1\tone"


# ls


def test_ls_lists_files_and_derived_directories(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("ls", path="/") == "/a.md\n/b.txt\n/docs/\n/memories/"
    assert fs.ok("ls", path="/docs") == "/docs/deep/\n/docs/x.md"
    assert fs.ok("ls", path="/docs/") == "/docs/deep/\n/docs/x.md"
    assert fs.ok("ls", path="/memories/") == "/memories/AGENTS.md"


def test_ls_of_a_prefix_that_is_not_a_directory_lists_nothing(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("ls", path="/doc") == "no files under /doc/"
    assert fs.ok("ls", path="/skills/") == "no files under /skills/"


def test_ls_of_a_file_is_an_error(fs: Caller) -> None:
    _write_tree(fs)

    assert "/docs/x.md is a file" in fs.error("ls", path="/docs/x.md")


def test_ls_of_an_empty_filesystem(fs: Caller) -> None:
    assert fs.ok("ls", path="/") == "no files under /"


# read_file


def test_read_file_numbers_lines_like_cat_n(fs: Caller) -> None:
    fs.ok("write_file", file_path="/poem.txt", content="alpha\n  beta\ngamma\n")

    assert fs.ok("read_file", file_path="/poem.txt") == "     1\talpha\n     2\t  beta\n     3\tgamma"


def test_read_file_offset_and_limit_page_through_the_file(fs: Caller) -> None:
    fs.ok("write_file", file_path="/ten.txt", content="".join(f"line {n}\n" for n in range(1, 11)))

    page = fs.ok("read_file", file_path="/ten.txt", offset=3, limit=2)
    last = fs.ok("read_file", file_path="/ten.txt", offset=9)
    first = fs.ok("read_file", file_path="/ten.txt", limit=1)

    assert page == "     4\tline 4\n     5\tline 5\n(showing lines 4-5 of 10; pass offset=5 to read on)"
    assert last == "    10\tline 10"
    assert first.splitlines()[0] == "     1\tline 1"
    assert "pass offset=1" in first


def test_read_file_accepts_an_integral_float_offset(fs: Caller) -> None:
    fs.ok("write_file", file_path="/ten.txt", content="".join(f"line {n}\n" for n in range(1, 11)))

    assert fs.ok("read_file", file_path="/ten.txt", offset=8.0, limit=1.0).startswith("     9\tline 9\n")


def test_read_file_offset_past_the_end_is_a_clear_error(fs: Caller) -> None:
    fs.ok("write_file", file_path="/three.txt", content="a\nb\nc")

    message = fs.error("read_file", file_path="/three.txt", offset=3)

    assert message == "offset 3 is past the end of /three.txt, which has 3 lines"


def test_read_file_of_a_missing_file_is_an_error(fs: Caller) -> None:
    assert fs.error("read_file", file_path="/nope.md") == "file not found: /nope.md"


def test_read_file_of_an_empty_file(fs: Caller) -> None:
    fs.ok("write_file", file_path="/empty.md", content="")

    assert fs.ok("read_file", file_path="/empty.md") == "/empty.md is empty"


def test_read_file_cuts_very_long_lines(fs: Caller) -> None:
    fs.ok("write_file", file_path="/min.js", content="x" * (MAX_LINE_CHARS + 10))

    shown = fs.ok("read_file", file_path="/min.js")

    assert shown.startswith("     1\t" + "x" * MAX_LINE_CHARS + "…")
    assert f"{MAX_LINE_CHARS + 10} characters" in shown


# write_file


def test_write_file_creates_then_overwrites(fs: Caller) -> None:
    created = fs.ok("write_file", file_path="/notes.md", content="first\nsecond\n")
    overwritten = fs.ok("write_file", file_path="/notes.md", content="only\n")

    assert "/notes.md" in created
    assert "/notes.md" in overwritten
    assert fs.ok("read_file", file_path="/notes.md") == "     1\tonly"
    assert fs.ok("ls", path="/") == "/notes.md"


@pytest.mark.parametrize("path", ["/", "/docs/", "/memories/"])
def test_write_file_refuses_directory_paths(fs: Caller, path: str) -> None:
    assert "directory" in fs.error("write_file", file_path=path, content="x")
    assert fs.ok("ls", path="/") == "no files under /"


def test_nul_characters_are_refused_without_breaking_the_transaction(fs: Caller) -> None:
    fs.ok("write_file", file_path="/kept.md", content="kept\n")

    assert "NUL" in fs.error("write_file", file_path="/bad.md", content="a\x00b")
    assert "NUL" in fs.error("edit_file", file_path="/kept.md", old_string="kept", new_string="\x00")
    assert fs.ok("ls", path="/") == "/kept.md"
    assert fs.ok("read_file", file_path="/kept.md") == "     1\tkept"


# edit_file


def test_edit_file_replaces_a_unique_string(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="x = 1\ny = 2\n")

    assert fs.ok("edit_file", file_path="/app.py", old_string="y = 2", new_string="y = 3") == (
        "made 1 replacement in /app.py"
    )
    assert fs.ok("read_file", file_path="/app.py") == "     1\tx = 1\n     2\ty = 3"


def test_edit_file_refuses_an_ambiguous_string_and_says_how_often_it_occurs(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="a = 0\na = 0\na = 0\n")

    message = fs.error("edit_file", file_path="/app.py", old_string="a = 0", new_string="a = 1")

    assert "3 times" in message
    assert "replace_all" in message
    assert fs.ok("grep", pattern="a = 1") == "no matches for 'a = 1' under /"


def test_edit_file_replace_all_replaces_every_occurrence(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="a = 0\na = 0\na = 0\n")

    result = fs.ok("edit_file", file_path="/app.py", old_string="0", new_string="1", replace_all=True)

    assert result == "made 3 replacements in /app.py"
    assert fs.ok("read_file", file_path="/app.py") == "     1\ta = 1\n     2\ta = 1\n     3\ta = 1"


def test_edit_file_can_delete_text_across_lines(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="keep\ndrop 1\ndrop 2\nkeep too\n")

    fs.ok("edit_file", file_path="/app.py", old_string="drop 1\ndrop 2\n", new_string="")

    assert fs.ok("read_file", file_path="/app.py") == "     1\tkeep\n     2\tkeep too"


def test_edit_file_when_the_string_is_missing_is_an_error(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="x = 1\n")

    assert "old_string not found in /app.py" in fs.error(
        "edit_file", file_path="/app.py", old_string="x = 2", new_string="x = 3"
    )
    assert fs.ok("read_file", file_path="/app.py") == "     1\tx = 1"


def test_edit_file_of_a_missing_file_is_an_error(fs: Caller) -> None:
    assert fs.error("edit_file", file_path="/nope.py", old_string="a", new_string="b") == "file not found: /nope.py"


def test_edit_file_with_identical_strings_is_an_error(fs: Caller) -> None:
    fs.ok("write_file", file_path="/app.py", content="x = 1\n")

    assert "identical" in fs.error("edit_file", file_path="/app.py", old_string="x", new_string="x")


# glob


def test_glob_double_star_matches_at_any_depth(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("glob", pattern="**/*.md") == "/a.md\n/docs/deep/y.md\n/docs/x.md\n/memories/AGENTS.md"
    assert fs.ok("glob", pattern="/docs/**/y.md") == "/docs/deep/y.md"
    assert fs.ok("glob", pattern="docs/**") == "/docs/deep/y.md\n/docs/deep/z.txt\n/docs/x.md"


def test_glob_single_star_stays_within_one_directory(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("glob", pattern="*.md") == "/a.md"
    assert fs.ok("glob", pattern="*.md", path="/docs") == "/docs/x.md"
    assert fs.ok("glob", pattern="/memories/*.md") == "/memories/AGENTS.md"
    assert fs.ok("glob", pattern="/*/*.md") == "/docs/x.md\n/memories/AGENTS.md"


def test_glob_absolute_pattern_ignores_path(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("glob", pattern="/memories/*.md", path="/docs") == "/memories/AGENTS.md"


def test_glob_character_classes_and_question_mark(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("glob", pattern="[ab].*") == "/a.md\n/b.txt"
    assert fs.ok("glob", pattern="**/?.txt") == "/b.txt\n/docs/deep/z.txt"


def test_glob_without_matches_says_so(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("glob", pattern="**/*.py") == "no files match '**/*.py' under /"


def test_glob_with_many_double_stars_terminates(fs: Caller) -> None:
    # Naive backtracking over 30 "**" segments against a 30-deep path would not finish.
    fs.ok("write_file", file_path="/" + "d/" * 30 + "f.txt", content="x")

    assert fs.ok("glob", pattern="**/" * 30 + "nothing") == f"no files match {'**/' * 30 + 'nothing'!r} under /"


# grep


def test_grep_prints_path_line_number_and_line(fs: Caller) -> None:
    fs.ok("write_file", file_path="/b.py", content="import os\n# TODO: tidy\nx = 1\n")
    fs.ok("write_file", file_path="/a.md", content="# Notes\n\nTODO write more\n")

    assert fs.ok("grep", pattern=r"TODO") == "/a.md:3:TODO write more\n/b.py:2:# TODO: tidy"


def test_grep_path_narrows_to_a_directory_or_one_file(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.ok("grep", pattern="content", path="/docs/deep") == (
        "/docs/deep/y.md:1:content of /docs/deep/y.md\n/docs/deep/z.txt:1:content of /docs/deep/z.txt"
    )
    assert fs.ok("grep", pattern="content", path="/docs/x.md") == "/docs/x.md:1:content of /docs/x.md"
    assert fs.ok("grep", pattern="content", path="/doc") == "no matches for 'content' under /doc"


def test_grep_glob_filters_files(fs: Caller) -> None:
    _write_tree(fs)

    by_name = fs.ok("grep", pattern="content", glob="*.txt")
    by_path = fs.ok("grep", pattern="content", glob="docs/*.md")
    relative = fs.ok("grep", pattern="content", path="/docs", glob="deep/*")

    assert by_name == "/b.txt:1:content of /b.txt\n/docs/deep/z.txt:1:content of /docs/deep/z.txt"
    assert by_path == "/docs/x.md:1:content of /docs/x.md"
    assert relative == "/docs/deep/y.md:1:content of /docs/deep/y.md\n/docs/deep/z.txt:1:content of /docs/deep/z.txt"


def test_grep_invalid_regex_is_an_error(fs: Caller) -> None:
    _write_tree(fs)

    assert fs.error("grep", pattern="(unclosed").startswith("invalid regular expression '(unclosed'")


def test_grep_caps_the_output_and_says_so(fs: Caller) -> None:
    fs.ok("write_file", file_path="/big.log", content="hit\n" * (MAX_GREP_MATCHES + 100))

    lines = fs.ok("grep", pattern="hit").splitlines()

    assert len(lines) == MAX_GREP_MATCHES + 1
    assert lines[MAX_GREP_MATCHES - 1] == f"/big.log:{MAX_GREP_MATCHES}:hit"
    assert lines[-1].startswith(f"(truncated after {MAX_GREP_MATCHES} matches")


def test_grep_exactly_at_the_cap_is_not_truncated(fs: Caller) -> None:
    fs.ok("write_file", file_path="/big.log", content="hit\n" * MAX_GREP_MATCHES)

    lines = fs.ok("grep", pattern="hit").splitlines()

    assert len(lines) == MAX_GREP_MATCHES
    assert "truncated" not in lines[-1]


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
        files = FileSystem(session, other_tenant.id, run.agent_id, run.id)
        stranger = Caller(ToolContext(other_tenant.id, run.agent_id, run.id, "call", files))

        assert stranger.ok("ls", path="/") == "no files under /"
        assert stranger.error("read_file", file_path="/memories/AGENTS.md") == "file not found: /memories/AGENTS.md"
        assert stranger.error("read_file", file_path="/scratch.md") == "file not found: /scratch.md"
        assert stranger.ok("grep", pattern="secret") == "no matches for 'secret' under /"


# Path normalisation


def test_equivalent_spellings_of_a_path_are_the_same_file(fs: Caller) -> None:
    fs.ok("write_file", file_path="/memories/../memories//AGENTS.md", content="one\n")
    fs.ok("edit_file", file_path="/memories/./AGENTS.md", old_string="one", new_string="two")

    assert fs.ok("read_file", file_path="/memories/AGENTS.md") == "     1\ttwo"
    assert fs.ok("ls", path="/memories/") == "/memories/AGENTS.md"
    assert fs.ok("glob", pattern="**") == "/memories/AGENTS.md"


def test_ownership_follows_the_normalised_path(db: Database) -> None:
    with db.transaction() as session:
        first = _seed_run(session)
        # Spelled from scratch space, but it resolves into /memories/, so it belongs to the agent.
        _caller(session, first).ok("write_file", file_path="/tmp/../memories/x.md", content="kept\n")
        second = _caller(session, _run(session, session.get_one(Agent, first.agent_id)))

        assert second.ok("read_file", file_path="/memories/x.md") == "     1\tkept"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"file_path": "/../etc/passwd"}),
        ("write_file", {"file_path": "/../etc/passwd", "content": "x"}),
        ("edit_file", {"file_path": "/../etc/passwd", "old_string": "a", "new_string": "b"}),
        ("ls", {"path": "/../etc"}),
        ("glob", {"pattern": "*", "path": "/../etc"}),
        ("glob", {"pattern": "../etc/*"}),
        ("grep", {"pattern": "root", "path": "/../etc/passwd"}),
        ("read_file", {"file_path": "notes.md"}),
        ("write_file", {"file_path": "notes.md", "content": "x"}),
        ("ls", {"path": "memories"}),
        ("grep", {"pattern": "x", "path": "./"}),
    ],
)
def test_escaping_and_relative_paths_are_error_results(fs: Caller, name: str, args: dict[str, Any]) -> None:
    result = fs.call(name, args)

    assert result.is_error
    spelled = args.get("file_path") or args.get("path") or args["pattern"]
    assert result.content.startswith("invalid path" if spelled != args.get("pattern") else "invalid glob pattern")
    assert repr(spelled) in result.content
    assert fs.ok("ls", path="/") == "no files under /"
