"""The built-in filesystem tools on the in-memory filesystem, called as the loop calls them: through ``execute``.

What only PostgreSQL can show (tenant scoping, persistence across transactions, a refused write leaving the
transaction usable) stays in tests/integration/test_filesystem_tools.py; tests/integration/test_file_system_contract.py
keeps this double and the SQL store alike.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from hango.agent.messages import ToolCall, ToolResult
from hango.agent.tools.base import ToolContext, ToolLimits, execute
from hango.agent.tools.filesystem import (
    BUILTIN_TOOLS,
    MAX_GREP_MATCHES,
    MAX_LINE_CHARS,
    MAX_PATH_CHARS,
    builtin_registry,
)
from tests.unit.fakes import MemoryFiles

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


def memory_caller(files: MemoryFiles) -> Caller:
    """The tools of the run whose view ``files`` is."""
    return Caller(ToolContext(files.tenant_id, files.agent_id, files.run_id, "call", files))


@pytest.fixture
def fs() -> Caller:
    """The tools of a fresh run on an empty in-memory filesystem."""
    return memory_caller(MemoryFiles())


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


# Path normalisation


def test_equivalent_spellings_of_a_path_are_the_same_file(fs: Caller) -> None:
    fs.ok("write_file", file_path="/memories/../memories//AGENTS.md", content="one\n")
    fs.ok("edit_file", file_path="/memories/./AGENTS.md", old_string="one", new_string="two")

    assert fs.ok("read_file", file_path="/memories/AGENTS.md") == "     1\ttwo"
    assert fs.ok("ls", path="/memories/") == "/memories/AGENTS.md"
    assert fs.ok("glob", pattern="**") == "/memories/AGENTS.md"


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


# Tool budgets (api.md "Tool budgets"): sizes and storage totals under small limits, and linear-time patterns


LIMITS = ToolLimits(max_file_bytes=32_000, max_run_storage_bytes=80_000, max_agent_storage_bytes=50_000, timeout=2)


class CountingFiles(MemoryFiles):
    """The in-memory filesystem view, counting the contents it reads."""

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


def _context(files: MemoryFiles, limits: ToolLimits = LIMITS) -> ToolContext:
    return ToolContext(files.tenant_id, files.agent_id, files.run_id, "call", files, limits=limits)


@pytest.fixture
def tools() -> ToolContext:
    """The tools of a fresh run with small limits, counting the contents they read."""
    return _context(CountingFiles())


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

    assert "the scratch files of this run" in message
    assert "HANGO_MAX_RUN_STORAGE_BYTES" in message
    # Overwriting a file counts its new size instead of its old one, not both.
    _ok(tools, "write_file", file_path="/a.txt", content="a" * 31_000)


def test_shrinking_a_file_is_allowed_even_over_the_limit() -> None:
    files = MemoryFiles()
    _grow(_context(files), "/a.txt", "a", 100)
    tight = _context(files, replace(LIMITS, max_run_storage_bytes=10_000))

    assert "HANGO_MAX_RUN_STORAGE_BYTES" in _error(tight, "write_file", file_path="/a.txt", content="a" * 30_001)
    _ok(tight, "write_file", file_path="/a.txt", content="a" * 20_000)


def test_the_agent_limit_spans_the_agents_runs() -> None:
    first = MemoryFiles()
    _grow(_context(first), "/memories/one.md", "m", 100)
    _grow(_context(first), "/skills/s/SKILL.md", "s", 50)
    second = _context(first.table.view(first.tenant_id, first.agent_id, uuid.uuid4()))

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
