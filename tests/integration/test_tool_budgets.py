"""Tool budgets (api.md "Tool budgets"): sizes, storage totals, linear-time patterns and the per-call timeout.

The first tests call the tools as the loop does, through ``execute``, on real PostgreSQL with small limits. The
last one runs hostile scripts on a real worker of its own queue, next to another tenant's ordinary run: every
budget the scripts break is an error result, their leases are never lost, and the ordinary run still succeeds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from hango.agent.messages import ToolCall, ToolResult, user_message
from hango.agent.tools.base import ToolContext, ToolLimits, ToolTimeout, execute
from hango.agent.tools.filesystem import BUILTIN_TOOLS, MAX_GREP_MATCHES, MAX_PATH_CHARS
from hango.auth import Principal
from hango.config import Settings
from hango.db import Database
from hango.models import Agent, Run, RunEvent
from hango.run import service
from hango.run.runtime import Runtime
from hango.store.files import FileSystem
from tests.integration.conftest import TenantFixture, create_agent
from tests.integration.test_filesystem_tools import _run, _seed_run
from tests.support.processes import wait_until, worker
from tests.support.tools import TOOLS as TEST_TOOLS

pytestmark = pytest.mark.integration

TOOLS = {tool.name: tool for tool in [*BUILTIN_TOOLS, *TEST_TOOLS]}
LIMITS = ToolLimits(max_file_bytes=32_000, max_run_storage_bytes=80_000, max_agent_storage_bytes=50_000, timeout=2)


class CountingFiles(FileSystem):
    """The real filesystem view, counting the contents it reads."""

    reads = 0

    def read(self, path: str, *, for_update: bool = False) -> str | None:
        self.reads += 1
        return super().read(path, for_update=for_update)


def _call(context: ToolContext, name: str, **args: Any) -> ToolResult:
    return execute(TOOLS[name], context, ToolCall(f"call-{uuid.uuid4().hex[:8]}", name, args))


def _ok(context: ToolContext, name: str, **args: Any) -> str:
    result = _call(context, name, **args)
    assert not result.is_error, result.content
    return result.content


def _error(context: ToolContext, name: str, **args: Any) -> str:
    result = _call(context, name, **args)
    assert result.is_error, result.content
    return result.content


def _context(session: Session, run: Run, limits: ToolLimits = LIMITS) -> ToolContext:
    files = CountingFiles(session, run.tenant_id, run.agent_id, run.id)
    return ToolContext(run.tenant_id, run.agent_id, run.id, "call", files, limits=limits)


@pytest.fixture
def tools(db: Database) -> Iterator[ToolContext]:
    """The tools of a fresh run with small limits, inside one transaction."""
    with db.transaction() as session:
        yield _context(session, _seed_run(session))


def _grow(context: ToolContext, path: str, char: str, times: int) -> None:
    """Make ``path`` hold ``300 * times`` copies of ``char`` with small arguments: a write, then an edit."""
    _ok(context, "write_file", file_path=path, content=char * 300)
    _ok(context, "edit_file", file_path=path, old_string=char, new_string=char * times, replace_all=True)


# Size limits


def test_a_write_over_the_file_limit_is_an_error_naming_the_setting(tools: ToolContext) -> None:
    message = _error(tools, "write_file", file_path="/big.txt", content="z" * 32_001)

    assert "32,001 bytes" in message
    assert "HANGO_MAX_FILE_BYTES" in message
    assert _ok(tools, "ls", path="/") == "no files under /"


def test_the_file_limit_counts_utf8_bytes_not_characters(tools: ToolContext) -> None:
    assert "HANGO_MAX_FILE_BYTES" in _error(tools, "write_file", file_path="/e.txt", content="é" * 16_001)
    _ok(tools, "write_file", file_path="/e.txt", content="é" * 16_000)


def test_replace_all_growth_is_refused_before_the_new_content_is_built(tools: ToolContext) -> None:
    _grow(tools, "/grow.txt", "a", 100)

    # 30,000 "a" each becoming 10,000 characters would be 300 MB; only the arithmetic may know that.
    message = _error(
        tools, "edit_file", file_path="/grow.txt", old_string="a", new_string="a" * 10_000, replace_all=True
    )

    assert "300,000,000 bytes" in message
    assert "HANGO_MAX_FILE_BYTES" in message
    assert _ok(tools, "glob", pattern="*") == "/grow.txt"
    assert tools.files.storage("/grow.txt").file_bytes == len("/grow.txt") + 30_000


def test_a_single_edit_counts_one_replacement(tools: ToolContext) -> None:
    _ok(tools, "write_file", file_path="/one.txt", content="x" * 31_000 + "Y")

    assert "HANGO_MAX_FILE_BYTES" in _error(
        tools, "edit_file", file_path="/one.txt", old_string="Y", new_string="Y" * 1_001
    )
    _ok(tools, "edit_file", file_path="/one.txt", old_string="Y", new_string="Y" * 1_000)


def test_scratch_files_share_the_run_limit_and_agent_files_do_not_count(tools: ToolContext) -> None:
    _grow(tools, "/memories/m.md", "m", 100)
    _grow(tools, "/a.txt", "a", 100)
    _grow(tools, "/b.txt", "b", 80)

    message = _error(tools, "write_file", file_path="/c.txt", content="c" * 27_000)

    assert "this run's scratch files" in message
    assert "HANGO_MAX_RUN_STORAGE_BYTES" in message
    # Overwriting a file counts its new size instead of its old one, not both.
    _ok(tools, "write_file", file_path="/a.txt", content="a" * 31_000)


def test_shrinking_a_file_is_allowed_even_over_the_limit(db: Database) -> None:
    with db.transaction() as session:
        run = _seed_run(session)
        _grow(_context(session, run), "/a.txt", "a", 100)
        tight = _context(session, run, replace(LIMITS, max_run_storage_bytes=10_000))

        assert "HANGO_MAX_RUN_STORAGE_BYTES" in _error(tight, "write_file", file_path="/a.txt", content="a" * 30_001)
        _ok(tight, "write_file", file_path="/a.txt", content="a" * 20_000)


def test_the_agent_limit_spans_the_agents_runs(db: Database) -> None:
    with db.transaction() as session:
        first = _seed_run(session)
        _grow(_context(session, first), "/memories/one.md", "m", 100)
        _grow(_context(session, first), "/skills/s/SKILL.md", "s", 50)
        second = _context(session, _run(session, session.get_one(Agent, first.agent_id)))

        message = _error(second, "write_file", file_path="/memories/two.md", content="t" * 6_000)

        assert "/memories/ and /skills/" in message
        assert "HANGO_MAX_AGENT_STORAGE_BYTES" in message
        _ok(second, "write_file", file_path="/scratch.txt", content="t" * 6_000)


def test_a_path_longer_than_the_limit_is_refused(tools: ToolContext) -> None:
    path = "/" + "d" * MAX_PATH_CHARS

    assert f"at most {MAX_PATH_CHARS:,}" in _error(tools, "write_file", file_path=path, content="")


# Linear-time patterns


def test_a_catastrophic_pattern_runs_in_linear_time(tools: ToolContext) -> None:
    # (a+)+b over a line of "a"s backtracks for longer than the universe's age in Python's re.
    _grow(tools, "/big.txt", "a", 100)

    assert _ok(tools, "grep", pattern="(a+)+b", path="/big.txt") == "no matches for '(a+)+b' under /big.txt"
    assert (
        _ok(tools, "grep", pattern="^(a|aa)+$") == "/big.txt:1:" + "a" * 2000 + "… [line truncated, 30000 characters]"
    )


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)", "(?<!a)b"])
def test_patterns_re2_cannot_run_are_clear_errors(tools: ToolContext, pattern: str) -> None:
    message = _error(tools, "grep", pattern=pattern)

    assert message.startswith(f"invalid regular expression {pattern!r}")
    assert "RE2" in message


def test_a_pattern_compiling_to_a_huge_program_is_refused(tools: ToolContext) -> None:
    message = _error(tools, "grep", pattern="[a-z]{1,1000}[a-z]{1,1000}b")

    assert "RE2 instructions" in message


def test_a_hostile_glob_is_linear(tools: ToolContext) -> None:
    _ok(tools, "write_file", file_path="/" + "a" * 4000, content="")

    assert _ok(tools, "glob", pattern="*a" * 40 + "b").startswith("no files match")
    assert "RE2 instructions" in _error(tools, "glob", pattern="*a" * 1000 + "b")


# grep streams


def test_grep_reads_one_file_at_a_time_and_stops_at_the_cap(tools: ToolContext) -> None:
    for index in range(5):
        _ok(tools, "write_file", file_path=f"/log{index}.txt", content="hit\n" * 300)
    assert isinstance(tools.files, CountingFiles)
    tools.files.reads = 0

    lines = _ok(tools, "grep", pattern="hit").splitlines()

    assert len(lines) == MAX_GREP_MATCHES + 1
    assert tools.files.reads == 2, "grep read files it did not need"


def test_grep_filters_paths_before_reading_contents(tools: ToolContext) -> None:
    for index in range(5):
        _ok(tools, "write_file", file_path=f"/f{index}.txt", content="hit\n")
    _ok(tools, "write_file", file_path="/only.md", content="hit\n")
    assert isinstance(tools.files, CountingFiles)
    tools.files.reads = 0

    assert _ok(tools, "grep", pattern="hit", glob="*.md") == "/only.md:1:hit"
    assert tools.files.reads == 1


# The per-call timeout


@pytest.mark.parametrize(("name", "args"), [("sleep", {"seconds": 60}), ("spin", {"seconds": 600})])
def test_a_call_past_the_timeout_is_stopped_and_named(tools: ToolContext, name: str, args: dict[str, Any]) -> None:
    quick = replace(tools, limits=replace(LIMITS, timeout=0.2))

    with pytest.raises(ToolTimeout) as raised:
        _call(quick, name, **args)

    assert f"{name} did not finish within 0.2s" in str(raised.value)
    assert "HANGO_TOOL_TIMEOUT" in str(raised.value)


# Hostile scripts on a real worker


def _hostile_script() -> list[dict[str, Any]]:
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("w_big", "write_file", {"file_path": "/big.txt", "content": "a" * 300}),
        (
            "e_big",
            "edit_file",
            {"file_path": "/big.txt", "old_string": "a", "new_string": "a" * 100, "replace_all": True},
        ),
        ("g_cat", "grep", {"pattern": "(a+)+b", "path": "/big.txt"}),
        ("g_ref", "grep", {"pattern": r"(a)\1"}),
        (
            "e_grow",
            "edit_file",
            {"file_path": "/big.txt", "old_string": "a", "new_string": "a" * 1000, "replace_all": True},
        ),
        ("w_huge", "write_file", {"file_path": "/huge.txt", "content": "z" * 40_000}),
        ("w_m1", "write_file", {"file_path": "/memories/m1.md", "content": "m" * 300}),
        (
            "e_m1",
            "edit_file",
            {"file_path": "/memories/m1.md", "old_string": "m", "new_string": "m" * 100, "replace_all": True},
        ),
        ("w_m2", "write_file", {"file_path": "/memories/m2.md", "content": "n" * 300}),
        (
            "e_m2",
            "edit_file",
            {"file_path": "/memories/m2.md", "old_string": "n", "new_string": "n" * 100, "replace_all": True},
        ),
        ("w_s2", "write_file", {"file_path": "/s2.txt", "content": "b" * 300}),
        (
            "e_s2",
            "edit_file",
            {"file_path": "/s2.txt", "old_string": "b", "new_string": "b" * 100, "replace_all": True},
        ),
        ("w_s3", "write_file", {"file_path": "/s3.txt", "content": "c" * 300}),
        (
            "e_s3",
            "edit_file",
            {"file_path": "/s3.txt", "old_string": "c", "new_string": "c" * 100, "replace_all": True},
        ),
        ("spin", "spin", {"seconds": 600}),
        ("scribble", "scribble", {"file_path": "/half.txt", "seconds": 600}),
        ("r_half", "read_file", {"file_path": "/half.txt"}),
        ("sleep", "sleep", {"seconds": 60}),
    ]
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"id": id_, "name": name, "args": args}]} for id_, name, args in calls
    ]
    return [*turns, {"text": "survived"}]


# What each call of the hostile script must answer: an error naming the limit, or None for a success.
HOSTILE_ERRORS = {
    "w_big": None,
    "e_big": None,
    "g_cat": None,
    "g_ref": "RE2",
    "e_grow": "HANGO_MAX_FILE_BYTES",
    "w_huge": "HANGO_MAX_FILE_BYTES",
    "w_m1": None,
    "e_m1": None,
    "w_m2": None,
    "e_m2": "HANGO_MAX_AGENT_STORAGE_BYTES",
    "w_s2": None,
    "e_s2": None,
    "w_s3": None,
    "e_s3": "HANGO_MAX_RUN_STORAGE_BYTES",
    "spin": "HANGO_TOOL_TIMEOUT",
    "scribble": "HANGO_TOOL_TIMEOUT",
    "r_half": "file not found: /half.txt",
    "sleep": "HANGO_TOOL_TIMEOUT",
}


UNPROTECTED = {"write_file": False, "edit_file": False}


@pytest.fixture
def budget_runtime(settings: Settings, db: Database) -> Runtime:
    """A runtime on a queue of its own, with the small limits of these tests."""
    own = settings.replace(
        queue=f"hango-test-{uuid.uuid4().hex[:10]}",
        max_file_bytes=LIMITS.max_file_bytes,
        max_run_storage_bytes=LIMITS.max_run_storage_bytes,
        max_agent_storage_bytes=LIMITS.max_agent_storage_bytes,
        tool_timeout=timedelta(seconds=LIMITS.timeout),
    )
    return Runtime.build(own, db=db)


def _owner(tenant: TenantFixture) -> Principal:
    return Principal(tenant.id, tenant.owner.user_id, "owner")


def _final(db: Database, run_id: uuid.UUID) -> Run | None:
    with db.transaction() as session:
        run = session.get(Run, run_id)
        return run if run is not None and run.state in {"succeeded", "failed", "cancelled"} else None


def _event_types(db: Database, run_id: uuid.UUID) -> list[str]:
    with db.transaction() as session:
        return list(session.scalars(select(RunEvent.type).where(RunEvent.run_id == run_id).order_by(RunEvent.seq)))


def _results(client: FlaskClient, tenant: TenantFixture, run_id: uuid.UUID) -> dict[str, dict[str, Any]]:
    messages = client.get(f"/v1/runs/{run_id}/messages?limit=200", headers=tenant.owner.headers).json["items"]
    return {block["tool_use_id"]: block for m in messages if m["role"] == "tool" for block in m["content"]}


def test_hostile_runs_meet_every_budget_without_stalling_other_tenants(
    client: FlaskClient, make_tenant: Any, db: Database, budget_runtime: Runtime
) -> None:
    hostile, ordinary = make_tenant("hostile"), make_tenant("ordinary")
    allowed = ["read_file", "write_file", "edit_file", "glob", "grep", "spin", "scribble", "sleep"]
    hostile_runs = [
        service.create_run(
            budget_runtime,
            _owner(hostile),
            uuid.UUID(
                # Memories are protected by default; these scripts test budgets, not approvals.
                create_agent(client, hostile.owner, _hostile_script(), tools=allowed, interrupt_on=UNPROTECTED)
            ),
            [user_message("go")],
        )
        for _ in range(2)
    ]
    polite = [{"tool_calls": [{"id": "w", "name": "write_file", "args": {"file_path": "/n.md", "content": "hi\n"}}]}]
    ordinary_agent = uuid.UUID(create_agent(client, ordinary.owner, [*polite, {"text": "fine"}], tools=allowed))
    # Two hostile runs take both worker processes; the ordinary run needs one of them to be given back.
    ordinary_run = service.create_run(budget_runtime, _owner(ordinary), ordinary_agent, [user_message("go")])

    with worker(budget_runtime.settings, concurrency=2, beat=True, name="budgets"):
        finals = [wait_until(lambda run=run: _final(db, run.id), timeout=120) for run in [*hostile_runs, ordinary_run]]

    *hostile_finals, ordinary_final = finals
    assert ordinary_final.state == "succeeded", ordinary_final.error
    for run, final in zip(hostile_runs, hostile_finals, strict=True):
        assert final.state == "succeeded", final.error
        results = _results(client, hostile, run.id)
        for call_id, expected in HOSTILE_ERRORS.items():
            result = results[call_id]
            if expected is None:
                assert not result["is_error"], (call_id, result["content"])
            else:
                assert result["is_error"], (call_id, result["content"])
                assert expected in result["content"], (call_id, result["content"])
        assert results["g_cat"]["content"] == "no matches for '(a+)+b' under /big.txt"
        # The lease was never lost: one start, no reclaim, no second attempt.
        events = _event_types(db, run.id)
        assert events.count("run.started") == 1
        assert "run.queued" not in events[events.index("run.started") :]
        assert final.attempts == run.attempts
