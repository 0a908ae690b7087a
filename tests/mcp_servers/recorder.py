"""The well-behaved MCP server: notes written and read in a folder, and every call recorded.

Tools:
    ``write_note(path, text)``: writes ``text`` to the file ``path`` under ``NOTES_DIR`` (destructiveHint).
    ``read_note(path)``: the text of that file (readOnlyHint).
    ``slow_write(path, text, seconds)``: sleeps ``seconds``, then writes as ``write_note`` does (destructiveHint):
    a worker killed during the sleep leaves the call recorded and the note unwritten.

Environment:
    ``NOTES_DIR``: the folder the notes live in (required by the tools; a path may not leave it).
    ``RECORD_FILE``: where every ``tools/call`` is recorded before the tool runs, with its ``_meta`` (see the
    package's docstring); the exactly-once tests count the idempotency keys hango sends there.

Run: ``python -m tests.mcp_servers.recorder [--http PORT]``.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from tests.mcp_servers._common import new_server, serve

server = new_server("recorder")
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True)


def note_path(path: str) -> Path:
    """The file a note's ``path`` names, refused when it would leave ``NOTES_DIR``."""
    folder = os.environ.get("NOTES_DIR")
    if not folder:
        raise ToolError("NOTES_DIR is not set")
    root = Path(folder).resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or target == root:
        raise ToolError(f"{path!r} is not a file under NOTES_DIR")
    return target


def write(path: str, text: str) -> str:
    """Write a note; says how many bytes went where."""
    target = note_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode()
    target.write_bytes(data)
    return f"wrote {len(data)} bytes to {path}"


@server.tool(annotations=WRITES, structured_output=False)
def write_note(path: str, text: str) -> str:
    """Write a text note to a file."""
    return write(path, text)


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def read_note(path: str) -> str:
    """Read a text note."""
    target = note_path(path)
    if not target.is_file():
        raise ToolError(f"no note at {path!r}")
    return target.read_text()


@server.tool(annotations=WRITES, structured_output=False)
async def slow_write(path: str, text: str, seconds: float) -> str:
    """Wait some seconds, then write a text note to a file."""
    await anyio.sleep(seconds)
    return write(path, text)


if __name__ == "__main__":
    serve(server, __doc__)
