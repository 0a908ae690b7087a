"""The built-in filesystem tools: ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob`` and ``grep``.

Each tool works on :attr:`ToolContext.files`, the run's view of the virtual filesystem, in which ``/memories/``
and ``/skills/`` belong to the agent and every other path to the run. The argument names are part of the public
contract (the "Built-in tools" table of the API specification).

Every tool stays within its budgets (api.md "Tool budgets"): ``grep`` patterns and globs run on RE2, in time linear
in the text and without holding the interpreter lock while matching; files and the storage of their owner are
checked against their size limits before anything is built; and the loops over files and lines check the call's
deadline, so that no call can hold a worker, or its lease heartbeat, for long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import re2

from hango.agent import deadline
from hango.agent.files import FileSystem
from hango.agent.paths import PathError, is_agent_path, is_storage_root, normalize_path
from hango.agent.tools.base import Tool, ToolContext, ToolError, ToolLimits, ToolRegistry

DEFAULT_READ_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_GLOB_RESULTS = 1000
MAX_GREP_MATCHES = 500
MAX_PATH_CHARS = 4096
# RE2 matches in time linear in the text, times the size of the compiled program when its DFA cache overflows;
# 500 instructions keep a search of a whole 1 MiB line within seconds. Ordinary patterns compile to a few dozen.
MAX_REGEX_PROGRAM = 500
GLOB_MAGIC = re.compile(r"[*?\[]")


# Paths and lines


def _normalized(raw: str) -> str:
    """``raw`` normalised, or a :class:`ToolError` naming it so that the model can correct the path."""
    try:
        return normalize_path(raw)
    except PathError as exc:
        raise ToolError(f"invalid path {raw!r}: {exc}; paths are absolute, like /notes.md") from exc


def file_path(raw: str) -> str:
    """The normalised path ``write_file`` and ``edit_file`` write for ``raw`` (the approval preview asks it too): not
    ``/`` and without a trailing ``/``; :class:`ToolError` when they refuse it."""
    path = _normalized(raw)
    if path.endswith("/") or is_storage_root(path):
        raise ToolError(f"{raw!r} names a directory; give a file path such as /notes.md")
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"the path is {len(path):,} characters long; paths may have at most {MAX_PATH_CHARS:,}")
    return path


def _directory(raw: str) -> str:
    """A normalised directory prefix ending in ``/``, so that ``/a`` never matches ``/ab``."""
    path = _normalized(raw)
    return path if path.endswith("/") else path + "/"


def _lines(content: str) -> list[str]:
    """The lines of ``content`` split on ``\\n`` only, so that numbering matches what editors and grep show."""
    lines = content.split("\n")
    # A final newline ends the last line; it does not start an empty one.
    return lines[:-1] if lines[-1] == "" else lines


def _shown(line: str) -> str:
    """A line cut to :data:`MAX_LINE_CHARS`, so one minified line cannot flood the model's context."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]}… [line truncated, {len(line)} characters]"


# Glob matching


def _re2(pattern: str, refusal: str, hint: str) -> re2._Regexp:
    """``pattern`` compiled by RE2, or a :class:`ToolError` (``refusal``: why; ``hint``) the model can act on."""
    options = re2.Options()
    options.log_errors = False  # a refused pattern is an error for the model, not a line in the worker's log
    try:
        regex = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else ""
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ToolError(f"{refusal}: {text} ({hint})") from exc
    if regex.programsize > MAX_REGEX_PROGRAM:
        raise ToolError(
            f"{refusal}: it compiles to {regex.programsize} RE2 instructions, more than the {MAX_REGEX_PROGRAM} "
            f"allowed ({hint}; use fewer or smaller counted repetitions such as {{1,1000}})"
        )
    return regex


def _codepoint(char: str) -> str:
    # Every character of a class is spelled by its code point, so that none has a meaning of its own in RE2.
    return f"\\x{{{ord(char):x}}}"


def _character_class(segment: str, start: int) -> tuple[str, int]:
    """The RE2 class for the ``[...]`` opening at ``start - 1`` and the index after it, as :mod:`fnmatch` reads it.

    ``[!...]`` negates, a ``]`` first in the class is literal, ``a-z`` is a range (an empty one such as ``z-a``
    matches nothing) and a ``[`` that is never closed is a literal ``[``.
    """
    end = start + 1 if segment[start : start + 1] == "!" else start
    end = end + 1 if segment[end : end + 1] == "]" else end
    end = segment.find("]", end)
    if end == -1:
        return re2.escape("["), start
    body = segment[start:end]
    negated = body.startswith("!")
    body = body[1:] if negated else body
    items: list[str] = []
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            low, high = body[index], body[index + 2]
            if low <= high:
                items.append(f"{_codepoint(low)}-{_codepoint(high)}")
            index += 3
        else:
            items.append(_codepoint(body[index]))
            index += 1
    if negated:
        # A negated class must still stay within one path segment.
        return f"[^/{''.join(items)}]", end + 1
    return (f"[{''.join(items)}]" if items else "[^\\x{0}-\\x{10ffff}]"), end + 1


def _segment_regex(segment: str) -> str:
    """RE2 syntax for one glob segment: ``*`` and ``?`` match within the segment, ``[...]`` is a class."""
    pieces: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        index += 1
        if char == "*":
            if not pieces or pieces[-1] != "[^/]*":
                pieces.append("[^/]*")
        elif char == "?":
            pieces.append("[^/]")
        elif char == "[":
            piece, index = _character_class(segment, index)
            pieces.append(piece)
        else:
            pieces.append(re2.escape(char))
    return "".join(pieces)


def _compiled_glob(regex: str, pattern: str) -> re2._Regexp:
    return _re2(regex, f"glob pattern {pattern!r} is refused", "simplify it")


def _path_regex(segments: list[str], pattern: str) -> re2._Regexp:
    """One RE2 regex matching whole file paths: ``**`` spans any number of directories, ``*`` and ``?`` one.

    RE2 matches in time linear in the path whatever the pattern (many ``**`` or ``*`` included), where a
    backtracking matcher, or a walk over segment positions, can take exponential or quadratic time.
    """
    pieces: list[str] = []
    for segment in segments:
        if segment == "**":
            if not pieces or pieces[-1] != "(?:/[^/]*)*":
                pieces.append("(?:/[^/]*)*")
        else:
            pieces.append("/" + _segment_regex(segment))
    return _compiled_glob("".join(pieces), pattern)


def _name_regex(pattern: str) -> re2._Regexp:
    """An RE2 regex matching file names (the last path segment) against a glob without ``/``."""
    return _compiled_glob(_segment_regex(pattern), pattern)


def _glob_matcher(pattern: str, base: str) -> tuple[str, re2._Regexp]:
    """The literal directory prefix to list and the regex full paths must match, for a pattern relative to ``base``.

    An absolute pattern ignores ``base``. The prefix is the part before the first segment holding a wildcard, so
    that only the files that could match are read from the database.
    """
    joined = pattern if pattern.startswith("/") else base + pattern
    try:
        full = normalize_path(joined)
    except PathError as exc:
        raise ToolError(f"invalid glob pattern {pattern!r} under {base}: {exc}") from exc
    # A trailing "/" leaves an empty last segment, which no file matches: files have no trailing "/".
    segments = full[1:].split("/")
    literal: list[str] = []
    for segment in segments[:-1]:
        if GLOB_MAGIC.search(segment):
            break
        literal.append(segment)
    prefix = "/" + "".join(f"{segment}/" for segment in literal)
    return prefix, _path_regex(segments, pattern)


def _matching(paths: Iterable[str], regex: re2._Regexp) -> Iterator[str]:
    """The paths ``regex`` matches whole, checking the call's deadline at each."""
    for path in paths:
        deadline.check()
        if regex.fullmatch(path) is not None:
            yield path


def _glob_paths(context: ToolContext, pattern: str, base: str) -> list[str]:
    """Every visible file path matching ``pattern`` (relative to ``base`` unless absolute), sorted."""
    prefix, regex = _glob_matcher(pattern, base)
    return list(_matching((info.path for info in context.files.list_files(prefix)), regex))


def _storable(text: str, argument: str) -> str:
    """``text`` unchanged, or a :class:`ToolError` when PostgreSQL could not store it.

    A NUL character fails the flush, and a failed flush ends the whole transaction the run's work shares, so it
    is refused here, before it reaches the database.
    """
    if "\x00" in text:
        raise ToolError(f"{argument} contains a NUL character, which files cannot hold")
    return text


# Size budgets


def _utf8_size(text: str, limit: int | None = None) -> int:
    """The UTF-8 size of ``text``, or a lower bound above ``limit`` found without encoding a huge string."""
    # A character takes at least one byte: more characters than the limit is over it, whatever they are.
    if limit is not None and len(text) > limit:
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _check_size(files: FileSystem, limits: ToolLimits, path: str, size: int) -> None:
    """A :class:`ToolError` naming the limit when ``path`` holding ``size`` bytes would exceed a storage budget.

    A file counts its path and its content towards its owner's storage, so that many empty files with long paths
    cannot fill the database either. Shrinking a file is always allowed, so a model over a budget can make room.
    """
    if size > limits.max_file_bytes:
        raise ToolError(
            f"{path} would be {size:,} bytes, over the limit of {limits.max_file_bytes:,} bytes per file "
            "(HANGO_MAX_FILE_BYTES); write less, or split the content into several files"
        )
    use = files.storage(path)
    stored = _utf8_size(path) + size
    total = use.owner_bytes - use.file_bytes + stored
    if is_agent_path(path):
        limit, setting, owner = (
            limits.max_agent_storage_bytes,
            "HANGO_MAX_AGENT_STORAGE_BYTES",
            "/memories/ and /skills/",
        )
    else:
        limit, setting, owner = (
            limits.max_run_storage_bytes,
            "HANGO_MAX_RUN_STORAGE_BYTES",
            "the scratch files of this run (of its thread, on a thread)",
        )
    if total > limit and stored > use.file_bytes:
        raise ToolError(
            f"writing {path} would bring {owner} to {total:,} bytes (paths and contents), over their limit of "
            f"{limit:,} bytes ({setting}); make room by overwriting files you no longer need with less content"
        )


# ls


def _entries(paths: Iterable[str], directory: str) -> list[str]:
    """The files directly under ``directory`` and its sub-directories (with a trailing ``/``), sorted."""
    entries: set[str] = set()
    for path in paths:
        rest = path[len(directory) :]
        if not rest:
            continue
        child, slash, _ = rest.partition("/")
        entries.add(directory + child + slash)
    return sorted(entries)


def _ls(context: ToolContext, args: dict[str, Any]) -> str:
    """List the entries directly under a directory."""
    directory = _directory(args["path"])
    entries = _entries((info.path for info in context.files.list_files(directory)), directory)
    if entries:
        return "\n".join(entries)
    if directory != "/" and context.files.read(directory.rstrip("/")) is not None:
        raise ToolError(f"{directory.rstrip('/')} is a file, not a directory; use read_file to read it")
    return f"no files under {directory}"


# read_file


def _read_file(context: ToolContext, args: dict[str, Any]) -> str:
    """Numbered lines of a file, ``cat -n`` style, from ``offset`` for ``limit`` lines."""
    path = file_path(args["file_path"])
    # JSON Schema accepts 2.0 as an integer; slicing needs a real int.
    offset = int(args.get("offset", 0))
    limit = int(args.get("limit", DEFAULT_READ_LIMIT))
    content = context.files.read(path)
    if content is None:
        raise ToolError(f"file not found: {path}")
    lines = _lines(content)
    if not lines and offset == 0:
        return f"{path} is empty"
    if offset >= len(lines):
        raise ToolError(f"offset {offset} is past the end of {path}, which has {len(lines)} lines")
    window = lines[offset : offset + limit]
    numbered = "\n".join(f"{offset + index + 1:6d}\t{_shown(line)}" for index, line in enumerate(window))
    end = offset + len(window)
    if end < len(lines):
        numbered += f"\n(showing lines {offset + 1}-{end} of {len(lines)}; pass offset={end} to read on)"
    return numbered


# write_file and edit_file
#
# Each of the two tools first works out what it would make of its file (a :class:`FileChange`), then writes it.
# The approval preview (:mod:`hango.services.previews`) calls the same planning functions on a read-only view, so what a
# reviewer sees is what the tool does: the same normalised path, the same owner, the same content, the same refusal.


@dataclass(frozen=True)
class FileChange:
    """What a ``write_file`` or ``edit_file`` call makes of one file, worked out before anything is written.

    ``before`` is the content the plan read (``edit_file`` reads it; ``write_file`` replaces the file without
    reading it, so its ``before`` is ``None``); ``result`` is what the tool answers once ``after`` is written.
    """

    path: str
    after: str
    result: str
    before: str | None = None


@dataclass(frozen=True)
class Edit:
    """An ``edit_file`` call applied to one content: how many occurrences it replaces, before any text is built.

    The new size is known from the count alone, so an edit that would blow a budget is refused without building a
    string that may be many times the file's size.
    """

    content: str
    old: str
    new: str
    count: int

    def size(self, limit: int) -> int:
        """The UTF-8 size of the edited content (a lower bound above ``limit``, as :func:`_utf8_size` gives)."""
        growth = _utf8_size(self.new, limit) - _utf8_size(self.old, limit)
        return _utf8_size(self.content, limit) + self.count * growth

    def text(self) -> str:
        """The edited content."""
        return self.content.replace(self.old, self.new, self.count)

    def result(self, path: str) -> str:
        """What the tool answers once the edit is written."""
        return f"made {self.count} replacement{'s' if self.count != 1 else ''} in {path}"


def plan_edit(path: str, content: str | None, old: str, new: str, replace_all: bool) -> Edit:
    """What an ``edit_file`` call makes of ``content`` (the file at ``path``, ``None`` when there is none).

    Pure: the tool and the approval preview both call it. Raises :class:`ToolError` with the tool's answer when the
    edit cannot apply (identical strings, no such file, ``old`` not found, or found several times without
    ``replace_all``).
    """
    if old == new:
        raise ToolError("old_string and new_string are identical; there is nothing to change")
    if content is None:
        raise ToolError(f"file not found: {path}")
    count = content.count(old)
    if count == 0:
        raise ToolError(f"old_string not found in {path}; read the file and copy the text exactly")
    if count > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {count} times in {path}; include more surrounding text to make it unique, "
            "or set replace_all to true"
        )
    return Edit(content, old, new, count if replace_all else 1)


def plan_write(files: FileSystem, limits: ToolLimits, args: dict[str, Any], *, lock: bool = True) -> FileChange:
    """What a ``write_file`` call with ``args`` (valid for its schema) would write; :class:`ToolError` when the tool
    refuses it. A write reads nothing, so there is nothing to ``lock``."""
    path = file_path(args["file_path"])
    content = _storable(args["content"], "content")
    _check_size(files, limits, path, _utf8_size(content, limits.max_file_bytes))
    return FileChange(path, content, f"wrote {len(_lines(content))} lines to {path}")


def plan_edit_file(files: FileSystem, limits: ToolLimits, args: dict[str, Any], *, lock: bool = True) -> FileChange:
    """What an ``edit_file`` call with ``args`` (valid for its schema) would write; :class:`ToolError` when the
    tool refuses it. ``lock`` locks the file's row until commit, as the tool does; a preview reads without it."""
    path = file_path(args["file_path"])
    old: str = args["old_string"]
    new = _storable(args["new_string"], "new_string")
    # Locked: two runs of one agent editing the same memory file must not overwrite each other.
    content = files.read(path, for_update=lock)
    edit = plan_edit(path, content, old, new, args.get("replace_all", False))
    _check_size(files, limits, path, edit.size(limits.max_file_bytes))
    return FileChange(path, edit.text(), edit.result(path), before=content)


class PlanChange(Protocol):
    """How a tool that changes one file works out the change: :func:`plan_write` and :func:`plan_edit_file`."""

    def __call__(
        self, files: FileSystem, limits: ToolLimits, args: dict[str, Any], *, lock: bool = True
    ) -> FileChange: ...


# The tools whose calls change one file, and how each works out the change: the approval preview's list.
FILE_CHANGES: dict[str, PlanChange] = {"write_file": plan_write, "edit_file": plan_edit_file}


def _write_file(context: ToolContext, args: dict[str, Any]) -> str:
    """Create or overwrite a file."""
    change = plan_write(context.files, context.limits, args)
    context.files.write(change.path, change.after)
    return change.result


def _edit_file(context: ToolContext, args: dict[str, Any]) -> str:
    """Replace an exact string in a file, once (it must be unique) or everywhere with ``replace_all``."""
    change = plan_edit_file(context.files, context.limits, args)
    context.files.write(change.path, change.after)
    return change.result


# glob and grep


def _glob(context: ToolContext, args: dict[str, Any]) -> str:
    """Paths of the files matching a glob pattern."""
    pattern: str = args["pattern"]
    base = _directory(args.get("path", "/"))
    paths = _glob_paths(context, pattern, base)
    if not paths:
        return f"no files match {pattern!r} under {base}"
    shown = "\n".join(paths[:MAX_GLOB_RESULTS])
    if len(paths) > MAX_GLOB_RESULTS:
        shown += f"\n(truncated: showing {MAX_GLOB_RESULTS} of {len(paths)} files; narrow the pattern)"
    return shown


def _grep_paths(context: ToolContext, raw_path: str, file_glob: str | None) -> list[str]:
    """The files grep searches: the file at ``raw_path`` or those under it, filtered by ``file_glob``.

    A filter without ``/`` matches file names (``*.md``); one with ``/`` matches paths like the glob tool does.
    Only paths are listed here; contents are read one file at a time.
    """
    path = _normalized(raw_path)
    directory = path if path.endswith("/") else path + "/"
    paths = [
        info.path for info in context.files.list_files(path) if info.path == path or info.path.startswith(directory)
    ]
    if file_glob is None:
        return paths
    if "/" not in file_glob:
        regex = _name_regex(file_glob)
        return [name for name in paths if regex.fullmatch(name.rsplit("/", 1)[-1]) is not None]
    _, regex = _glob_matcher(file_glob, directory)
    return list(_matching(paths, regex))


def _grep_regex(pattern: str) -> re2._Regexp:
    return _re2(
        pattern,
        f"invalid regular expression {pattern!r}",
        "grep takes RE2 syntax, which has no backreferences and no lookaround",
    )


def _grep_lines(context: ToolContext, paths: Iterable[str], regex: re2._Regexp) -> Iterator[str]:
    """``path:lineno:line`` for every matching line, reading one file at a time and checking the deadline."""
    for name in paths:
        content = context.files.read(name)
        if content is None:  # deleted since it was listed
            continue
        for number, line in enumerate(_lines(content), start=1):
            deadline.check()
            if regex.search(line) is not None:
                yield f"{name}:{number}:{_shown(line)}"


def _grep(context: ToolContext, args: dict[str, Any]) -> str:
    """Lines matching an RE2 regular expression, as ``path:lineno:line``."""
    regex = _grep_regex(args["pattern"])
    path: str = args.get("path", "/")
    matches: list[str] = []
    for match in _grep_lines(context, _grep_paths(context, path, args.get("glob")), regex):
        if len(matches) == MAX_GREP_MATCHES:
            return "\n".join(matches) + (
                f"\n(truncated after {MAX_GREP_MATCHES} matches; narrow the pattern, path or glob)"
            )
        matches.append(match)
    return "\n".join(matches) if matches else f"no matches for {args['pattern']!r} under {_normalized(path)}"


# The tools


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_ABSOLUTE = "Absolute path, starting with /."

LS = Tool(
    name="ls",
    description=(
        "List the files and directories directly under a directory. Directories are shown with a trailing /. "
        "Your persistent directories /memories/ and /skills/ appear under / once they hold files; every other "
        "path is scratch space for this run only."
    ),
    parameters=_schema(
        {"path": {"type": "string", "minLength": 1, "description": f"Directory. {_ABSOLUTE}"}}, ["path"]
    ),
    handler=_ls,
    idempotent=True,
)

READ_FILE = Tool(
    name="read_file",
    description=(
        "Read a text file. Lines come numbered from 1 like `cat -n` (number, tab, line); the numbers are not part "
        f"of the file. Reads {DEFAULT_READ_LIMIT} lines by default; use offset and limit to page through longer "
        f"files. Lines longer than {MAX_LINE_CHARS} characters are cut."
    ),
    parameters=_schema(
        {
            "file_path": {"type": "string", "minLength": 1, "description": f"File to read. {_ABSOLUTE}"},
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "Number of lines to skip before reading (0 starts at line 1).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_READ_LIMIT,
                "description": "Maximum number of lines to return.",
            },
        },
        ["file_path"],
    ),
    handler=_read_file,
    idempotent=True,
)

WRITE_FILE = Tool(
    name="write_file",
    description=(
        "Create a file, or overwrite it entirely with new content. Files under /memories/ and /skills/ persist "
        "across your runs; all other files last for this run only. To change part of a file, use edit_file."
    ),
    parameters=_schema(
        {
            "file_path": {"type": "string", "minLength": 1, "description": f"File to write. {_ABSOLUTE}"},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        ["file_path", "content"],
    ),
    handler=_write_file,
    idempotent=True,
    writes=True,
)

EDIT_FILE = Tool(
    name="edit_file",
    description=(
        "Replace an exact string in a file. old_string must match the file's text exactly (whitespace included, "
        "without read_file's line numbers) and occur exactly once, unless replace_all is true, which replaces "
        "every occurrence. Returns how many replacements were made."
    ),
    parameters=_schema(
        {
            "file_path": {"type": "string", "minLength": 1, "description": f"File to edit. {_ABSOLUTE}"},
            "old_string": {"type": "string", "minLength": 1, "description": "Exact text to replace."},
            "new_string": {"type": "string", "description": "Text to put in its place (may be empty)."},
            "replace_all": {
                "type": "boolean",
                "default": False,
                "description": "Replace every occurrence instead of requiring a unique one.",
            },
        },
        ["file_path", "old_string", "new_string"],
    ),
    handler=_edit_file,
    idempotent=True,
    writes=True,
)

GLOB = Tool(
    name="glob",
    description=(
        "Find files whose paths match a glob pattern, sorted by path. * and ? match within one path segment, "
        "[abc] matches one listed character, and ** matches any number of directories: '**/*.md' finds every "
        "Markdown file under path. The pattern is relative to path unless it starts with /, as in "
        "'/memories/*.md'."
    ),
    parameters=_schema(
        {
            "pattern": {"type": "string", "minLength": 1, "description": "Glob pattern, e.g. '**/*.py'."},
            "path": {
                "type": "string",
                "minLength": 1,
                "default": "/",
                "description": f"Directory the pattern is relative to. {_ABSOLUTE}",
            },
        },
        ["pattern"],
    ),
    handler=_glob,
    idempotent=True,
)

GREP = Tool(
    name="grep",
    description=(
        "Search file contents with a regular expression in RE2 syntax (no backreferences, no lookaround), line "
        "by line. Each match is printed as "
        f"path:line_number:line. At most {MAX_GREP_MATCHES} matches are shown; narrow the search with path "
        "(a directory or one file) and glob (a file filter: '*.md' matches file names, a pattern with / matches "
        "paths like the glob tool)."
    ),
    parameters=_schema(
        {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Regular expression in RE2 syntax, e.g. 'TODO|FIXME'.",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "default": "/",
                "description": f"Directory or file to search. {_ABSOLUTE}",
            },
            "glob": {"type": "string", "minLength": 1, "description": "Only search files matching this glob."},
        },
        ["pattern"],
    ),
    handler=_grep,
    idempotent=True,
)

# Every built-in tool is idempotent: a call's file changes commit in its batch's transaction, with its result, so
# a worker that dies in the middle leaves nothing behind and the call can run again.
BUILTIN_TOOLS: list[Tool] = [LS, READ_FILE, WRITE_FILE, EDIT_FILE, GLOB, GREP]


def builtin_registry() -> ToolRegistry:
    """A registry holding the six built-in filesystem tools."""
    return ToolRegistry(BUILTIN_TOOLS)
