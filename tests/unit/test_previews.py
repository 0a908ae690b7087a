"""The approval preview on the in-memory filesystem: it says what the tool itself does with the same call (the
path it writes, its owner, its refusal, the content it leaves), and its diff, applied, gives that content."""

from __future__ import annotations

import copy
import random
import re
from dataclasses import replace
from typing import Any

import pytest

from hango.agent.messages import ToolCall
from hango.agent.tools.base import DEFAULT_LIMITS, Tool, ToolContext, ToolRegistry, execute
from hango.agent.tools.filesystem import BUILTIN_TOOLS, WRITE_FILE, builtin_registry
from hango.services.previews import DiffLimits, Preview, file_diff, preview_call
from tests.unit.fakes import MemoryFiles

TOOLS = {tool.name: tool for tool in BUILTIN_TOOLS}
ROOMY = DiffLimits(max_lines=100_000, max_bytes=10_000_000)
NOTES = "# Notes\nkept\nold line\nsame\nsame\n"


def _files() -> MemoryFiles:
    files = MemoryFiles()
    files.write("/memories/AGENTS.md", NOTES)
    files.write("/scratch/plan.md", "one\ntwo\n")
    return files


def _preview(files: MemoryFiles, tool: str, args: dict[str, Any], limits: DiffLimits = ROOMY) -> Preview:
    return preview_call(builtin_registry(), files, DEFAULT_LIMITS, limits, tool, args)


def _run(files: MemoryFiles, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
    """What the tool answers when the same call runs on ``files``."""
    context = ToolContext(files.tenant_id, files.agent_id, files.run_id, "call", files)
    result = execute(TOOLS[tool], context, ToolCall("call", tool, args))
    return result.content, result.is_error


def _apply(before: str, diff: str) -> str:
    """``before`` patched by a unified diff (as ``patch`` would), to check the diff says what changes."""
    old = before.split("\n")
    old = [line + "\n" for line in old[:-1]] + ([old[-1]] if old[-1] else [])
    out: list[str] = []
    at = 0
    lines = diff.split("\n")[2:]  # the --- and +++ lines
    for index, line in enumerate(lines):
        hunk = re.match(r"@@ -(\d+)(?:,(\d+))? ", line)
        if hunk:
            start = int(hunk[1]) - (0 if hunk[2] == "0" else 1)
            out += old[at:start]
            at = start
            continue
        if not line or line.startswith("\\"):
            continue
        text = line[1:] + ("" if index + 1 < len(lines) and lines[index + 1].startswith("\\") else "\n")
        if line[0] in " -":
            assert old[at] == text, (old[at], text)
            at += 1
        if line[0] in " +":
            out.append(text)
    return "".join(out + old[at:])


# The same call, through the tool and through the preview.
CALLS = [
    ("write_file", {"file_path": "/memories/notes.md#/../AGENTS.md", "content": "# Notes\nnew\n"}),
    ("write_file", {"file_path": "//memories/AGENTS.md", "content": "replaced"}),
    ("write_file", {"file_path": "/scratch/../plan.md", "content": "fresh\n"}),
    ("write_file", {"file_path": "/scratch//plan.md", "content": "one\nthree\n"}),
    ("edit_file", {"file_path": "/memories/./AGENTS.md", "old_string": "old line", "new_string": "new line"}),
    ("edit_file", {"file_path": "/memories/AGENTS.md", "old_string": "same", "new_string": "x", "replace_all": True}),
    ("edit_file", {"file_path": "/memories/AGENTS.md", "old_string": "same", "new_string": "x"}),
    ("edit_file", {"file_path": "/memories/AGENTS.md", "old_string": "absent", "new_string": "x"}),
    ("edit_file", {"file_path": "/memories/AGENTS.md", "old_string": "kept", "new_string": "kept"}),
    ("edit_file", {"file_path": "/memories/none.md", "old_string": "a", "new_string": "b"}),
    ("edit_file", {"file_path": "/scratch/plan.md", "old_string": "two", "new_string": "2"}),
    ("write_file", {"file_path": "/../etc/passwd", "content": "x"}),
    ("write_file", {"file_path": "relative.md", "content": "x"}),
    ("write_file", {"file_path": "/memories", "content": "x"}),
    ("write_file", {"file_path": "/memories/a.md", "content": 7}),
    ("write_file", {"file_path": "/memories/a.md"}),
    ("edit_file", {"file_path": "/memories/AGENTS.md", "old_string": "", "new_string": "x"}),
    ("write_file", {"file_path": "/memories/n.md", "content": "a\u0000b"}),
    ("write_file", {"file_path": "/memories/big.md", "content": "x" * (DEFAULT_LIMITS.max_file_bytes + 1)}),
]


@pytest.mark.parametrize(("tool", "args"), CALLS, ids=[f"{tool}:{args.get('file_path')}" for tool, args in CALLS])
def test_the_preview_says_what_the_tool_does_with_the_same_call(tool: str, args: dict[str, Any]) -> None:
    files = _files()
    stored = {key: row.content for key, row in files.table.rows.items()}
    preview = _preview(files, tool, args)
    assert {key: row.content for key, row in files.table.rows.items()} == stored  # the preview wrote nothing
    before = files.read(preview.path) if preview.path else None
    ran = copy.deepcopy(files)
    answer, refused = _run(ran, tool, args)
    if refused:
        assert preview.error == answer
        assert preview.diff is None
        return
    assert preview.error is None
    assert preview.path is not None
    assert f" {preview.path}" in answer  # the tool names the file it wrote: the preview's path
    assert preview.storage == ("agent" if preview.path.startswith(("/memories/", "/skills/")) else "run")
    assert preview.exists is (before is not None)
    assert preview.diff is not None
    assert _apply(before or "", preview.diff) == ran.read(preview.path)


def test_a_path_spelled_otherwise_is_said_to_differ() -> None:
    preview = _preview(_files(), "write_file", {"file_path": "/memories/notes.md#/../AGENTS.md", "content": "x"})
    assert (preview.file_path, preview.path, preview.path_differs) == (
        "/memories/notes.md#/../AGENTS.md",
        "/memories/AGENTS.md",
        True,
    )
    assert (preview.storage, preview.exists) == ("agent", True)
    same = _preview(_files(), "write_file", {"file_path": "/memories/AGENTS.md", "content": "x"})
    assert same.path_differs is False
    refused = _preview(_files(), "write_file", {"file_path": "/../x", "content": "x"})
    assert (refused.path, refused.path_differs, refused.storage, refused.exists) == (None, False, None, None)


def test_a_tool_that_is_not_the_built_in_file_tool_has_no_preview() -> None:
    registry = builtin_registry()
    registry.add(replace(WRITE_FILE, handler=lambda context, args: "wrote it elsewhere"))
    args = {"file_path": "/memories/AGENTS.md", "content": "x"}
    replaced = preview_call(registry, _files(), DEFAULT_LIMITS, ROOMY, "write_file", args)
    assert (replaced.kind, replaced.diff, replaced.path) == ("none", None, None)
    for name in ("read_file", "grep", "mcp__git__commit", "nope"):
        assert preview_call(registry, _files(), DEFAULT_LIMITS, ROOMY, name, {}).kind == "none"
    empty = ToolRegistry([Tool("write_file", "", {}, lambda context, args: "")])
    assert preview_call(empty, _files(), DEFAULT_LIMITS, ROOMY, "write_file", args).kind == "none"


def test_a_diff_marks_a_last_line_without_a_newline_and_a_new_file_comes_from_dev_null() -> None:
    assert file_diff("/m/a.md", "a\nb", "a\nc", ROOMY).text == (
        "--- a/m/a.md\n+++ b/m/a.md\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n"
        "\\ No newline at end of file\n"
    )
    assert file_diff("/n.md", None, "x\n", ROOMY).text == "--- /dev/null\n+++ b/n.md\n@@ -0,0 +1 @@\n+x\n"
    assert file_diff("/n.md", "same\n", "same\n", ROOMY).text == ""


def test_only_the_changed_part_counts_against_the_limits() -> None:
    big = "".join(f"line {n}\n" for n in range(10_000))
    limits = DiffLimits(max_lines=10, max_bytes=200)
    one_line = file_diff("/big.md", big, big.replace("line 5000\n", "LINE 5000\n"), limits)
    assert one_line.too_large is None
    assert one_line.text is not None
    assert one_line.text.splitlines()[2] == "@@ -4998,7 +4998,7 @@"
    rewritten = file_diff("/big.md", big, big.upper(), limits)
    assert rewritten.text is None
    assert rewritten.too_large is not None
    assert "20,000 lines" in rewritten.too_large
    assert "HANGO_PREVIEW_MAX_LINES" in rewritten.too_large
    long_line = file_diff("/big.md", "a\n", "b" * 300 + "\n", limits)
    assert long_line.too_large is not None
    assert "HANGO_PREVIEW_MAX_BYTES" in long_line.too_large


def test_a_preview_over_the_limits_is_too_large_with_a_note_and_no_diff() -> None:
    files = _files()
    preview = _preview(
        files, "write_file", {"file_path": "/memories/AGENTS.md", "content": "x\n" * 50}, DiffLimits(10, 10**6)
    )
    assert (preview.too_large, preview.diff, preview.error) == (True, None, None)
    assert preview.note is not None
    assert preview.note.startswith("too large to preview")


def test_random_diffs_patch_the_old_content_into_the_new() -> None:
    rng = random.Random(22)
    for _ in range(500):
        old = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        new = list(old)
        for _ in range(rng.randrange(0, 5)):
            at = rng.randrange(0, len(new) + 1)
            if rng.random() < 0.5 or not new:
                new.insert(at, rng.choice("abcxyz"))
            else:
                del new[min(at, len(new) - 1)]
        before = "\n".join(old) + rng.choice(["", "\n"])
        after = "\n".join(new) + rng.choice(["", "\n"])
        diff = file_diff("/r.md", before, after, ROOMY).text
        assert diff is not None
        if diff:
            assert _apply(before, diff) == after, (before, after, diff)
        else:
            assert before == after
