"""What an approval's call would change, worked out by the server for the file the tool will really write.

A reviewer decides on what the card shows, so the card must show what the tool will do. A model can spell a path
so that it reads as one file and normalises to another (``/memories/notes.md#/../AGENTS.md`` is
``/memories/AGENTS.md``), or so that it looks like the run's scratch space but is the agent's
(``//memories/AGENTS.md``). A page that reads the path as written diffs the wrong file. The preview therefore runs
the tool's own planning (:data:`hango.agent.tools.filesystem.FILE_CHANGES`) on the run's view of the files: the
same normalisation, the same owner, the same edit, the same refusal. It writes nothing.

Diffing is quadratic at worst, and it runs inside an API request: only the part of the file that changes is
diffed (the common head and tail are skipped in linear time), and only up to :class:`DiffLimits`.

Once the call has run, its file holds what the call wrote, and a preview worked out then diffs the file against
itself. The decision service therefore works out the preview of each approve and edit at decision time, with the
arguments that will run, and keeps it with the approval (:func:`kept_preview`); a decided approval's preview is
then that one (:func:`from_kept`, ``as_of`` ``decision``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from hango.agent.files import FileSystem
from hango.agent.paths import is_agent_path
from hango.agent.tools.base import ToolError, ToolLimits, ToolRegistry
from hango.agent.tools.filesystem import BUILTIN_TOOLS, FILE_CHANGES, FileChange
from hango.agent.tools.filesystem import file_path as tool_path
from hango.kernel.config import Settings

Storage = Literal["agent", "run"]
PreviewKind = Literal["file", "none"]
# Whether a preview was worked out now, on the files as they are, or kept from the decision.
AsOf = Literal["now", "decision"]

# Lines of unchanged text shown around each change, as ``diff -u`` and git show them.
CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file\n"
_BUILTIN = {tool.name: tool for tool in BUILTIN_TOOLS}


@dataclass(frozen=True)
class DiffLimits:
    """The most a preview diffs: lines and UTF-8 bytes of the changed part, before and after together."""

    max_lines: int
    max_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> DiffLimits:
        """The limits these settings set (``HANGO_PREVIEW_MAX_LINES``, ``HANGO_PREVIEW_MAX_BYTES``)."""
        return cls(max_lines=settings.preview_max_lines, max_bytes=settings.preview_max_bytes)


@dataclass(frozen=True)
class Diff:
    """A unified diff, or ``None`` with the reason it was not made (the change is too large to diff here)."""

    text: str | None
    too_large: str | None = None


@dataclass(frozen=True)
class Preview:
    """What a call would do to its file, as the tool itself would do it.

    ``kind`` is ``none`` for a tool that changes no file the server can show (``note`` says so). For ``file``:
    the path as written and as the tool normalises it, whose storage it is, whether the file exists, and either the
    tool's refusal (``error``) or the diff (``None`` with a ``note`` when too large to diff).
    """

    kind: PreviewKind
    tool_name: str
    file_path: str | None = None
    path: str | None = None
    storage: Storage | None = None
    exists: bool | None = None
    error: str | None = None
    diff: str | None = None
    too_large: bool = False
    note: str | None = None
    as_of: AsOf = "now"

    @property
    def path_differs(self) -> bool:
        """Whether the tool writes another spelling of the path than the call wrote."""
        return self.path is not None and self.path != self.file_path


def planned_path(tools: ToolRegistry, tool_name: str, arguments: dict[str, Any]) -> str | None:
    """The normalised path whose file a call of ``tool_name`` would change, as the tool writes it; ``None`` for a
    tool that changes no file hango can show, or a path the tool refuses (the call then writes nothing)."""
    if not _previewable(tools, tool_name):
        return None
    raw = arguments.get("file_path")
    path, _ = _normalised(raw if isinstance(raw, str) else None)
    return path


def _previewable(tools: ToolRegistry, tool_name: str) -> bool:
    # A deployment may register a tool of its own under a built-in's name: its effect is not the built-in's.
    tool = tools.get(tool_name)
    return tool_name in FILE_CHANGES and tool is not None and tool is _BUILTIN[tool_name]


def preview_call(
    tools: ToolRegistry,
    files: FileSystem,
    limits: ToolLimits,
    diff_limits: DiffLimits,
    tool_name: str,
    arguments: dict[str, Any],
) -> Preview:
    """What a call of ``tool_name`` with ``arguments`` would make of its file in ``files``; nothing is written."""
    if not _previewable(tools, tool_name):
        return Preview("none", tool_name, note=f"{tool_name} calls change no file hango can show: read the arguments")
    plan, tool = FILE_CHANGES[tool_name], _BUILTIN[tool_name]
    raw = arguments.get("file_path")
    written = raw if isinstance(raw, str) else None
    path, error = _normalised(written)
    error = tool.argument_refusal(arguments) or error
    storage: Storage | None = None if path is None else ("agent" if is_agent_path(path) else "run")
    before = None if path is None else files.read(path)
    shown = Preview("file", tool_name, written, path, storage, None if path is None else before is not None)
    if error is not None:
        return replace(shown, error=error)
    try:
        # The arguments as the handler reads them (execute fills in the schema's defaults).
        change = plan(files, limits, tool.with_defaults(arguments), lock=False)
    except ToolError as exc:
        return replace(shown, error=str(exc))
    return _with_diff(shown, before, change, diff_limits)


def kept_preview(
    tools: ToolRegistry,
    files: FileSystem,
    limits: ToolLimits,
    diff_limits: DiffLimits,
    tool_name: str,
    arguments: dict[str, Any],
) -> dict[str, Any] | None:
    """What a decision keeps of the preview of a call about to run with ``arguments``, worked out on ``files`` (a
    :class:`~hango.agent.files.OneFile` of :func:`planned_path` will do): the preview's fields as JSON, or ``None``
    for a tool that changes no file the server can show (there is nothing to keep)."""
    shown = preview_call(tools, files, limits, diff_limits, tool_name, arguments)
    if shown.kind != "file":
        return None
    kept = asdict(shown)
    del kept["as_of"]
    return kept


def from_kept(kept: dict[str, Any]) -> Preview:
    """The preview a decision kept (:func:`kept_preview`), marked ``as_of`` ``decision``."""
    known = {item.name for item in fields(Preview)} - {"as_of"}
    return Preview(**{name: value for name, value in kept.items() if name in known}, as_of="decision")


def _normalised(written: str | None) -> tuple[str | None, str | None]:
    """The path the tool writes for ``written`` and ``None``, or ``None`` and the tool's refusal of it."""
    if written is None:
        return None, None  # the schema's refusal says what is wrong
    try:
        return tool_path(written), None
    except ToolError as exc:
        return None, str(exc)


def _with_diff(preview: Preview, before: str | None, change: FileChange, limits: DiffLimits) -> Preview:
    # An edit's diff is against the content the edit was applied to (read again by the plan).
    now = change.before if change.before is not None else before
    diff = file_diff(change.path, now, change.after, limits)
    return replace(preview, diff=diff.text, too_large=diff.too_large is not None, note=diff.too_large)


def file_diff(path: str, before: str | None, after: str, limits: DiffLimits) -> Diff:
    """The unified diff of ``path`` from ``before`` (``None``: no such file) to ``after``, lines split on ``\\n``
    as the file tools count them; ``too_large`` when the changed part is over ``limits``."""
    old, new = _lines(before or ""), _lines(after)
    head, tail = _common_ends(old, new)
    changed = [*old[head : len(old) - tail], *new[head : len(new) - tail]]
    size = sum(len(line.encode("utf-8", "surrogatepass")) for line in changed)
    if len(changed) > limits.max_lines or size > limits.max_bytes:
        return Diff(None, _too_large(len(changed), size, limits))
    # Only the changed part, with its context, is diffed; hunks then start ``start`` lines into the file.
    start = max(0, head - CONTEXT_LINES)
    keep = min(tail, CONTEXT_LINES)
    hunks = "".join(_hunks(old[start : len(old) - tail + keep], new[start : len(new) - tail + keep], start))
    if not hunks:
        return Diff("")
    label = path.lstrip("/")
    return Diff(f"--- {'a/' + label if before is not None else '/dev/null'}\n+++ b/{label}\n{hunks}")


def _lines(text: str) -> list[str]:
    """``text``'s lines, each with its ``\\n``; a last line without one is kept without."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _common_ends(old: Sequence[str], new: Sequence[str]) -> tuple[int, int]:
    """How many lines the two begin with and end with in common (never counting a line twice)."""
    most = min(len(old), len(new))
    head = 0
    while head < most and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < most - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail


def _too_large(lines: int, size: int, limits: DiffLimits) -> str:
    return (
        f"too large to preview: the change spans {lines:,} lines ({size:,} bytes) of the file as it is now and as "
        f"the call would make it; a preview diffs at most {limits.max_lines:,} lines (HANGO_PREVIEW_MAX_LINES) "
        f"and {limits.max_bytes:,} bytes (HANGO_PREVIEW_MAX_BYTES)"
    )


def _hunks(old: Sequence[str], new: Sequence[str], offset: int) -> Iterator[str]:
    """The hunks of ``difflib.unified_diff`` from ``old`` to ``new``, numbered from ``offset`` lines into the file,
    and saying when a line has no newline at its end (the file's last line), as ``diff -u`` does."""
    matcher = difflib.SequenceMatcher(None, old, new)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1] + offset, last[2] + offset)} +{_range(first[3] + offset, last[4] + offset)} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (_line(" ", line) for line in old[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from (_line("-", line) for line in old[i1:i2])
            if tag in ("replace", "insert"):
                yield from (_line("+", line) for line in new[j1:j2])


def _range(start: int, stop: int) -> str:
    """A hunk's line range as ``unified_diff`` writes it: ``first,count``; ``first`` alone for one line."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _line(mark: str, line: str) -> str:
    return mark + line if line.endswith("\n") else f"{mark}{line}\n{NO_NEWLINE}"
