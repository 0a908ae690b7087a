"""A tiny MCP server for the quickstart's tour: notes kept as files in one folder, spoken over stdio.

Two tools, each saying honestly what it does in its annotations (hints hango believes of an operator's server):

- ``read_note`` only reads (``readOnlyHint: true``), so hango's default rule lets it run without a reviewer;
- ``save_note`` writes, and replaces a note of the same name (``destructiveHint: true``), so its calls wait for one.

``deploy/quickstart.sh`` names it in the operator's file that ``HANGO_MCP_CONFIG`` points to, with the venv's
Python as the command and ``DATA/notes`` as the folder::

    {"mcpServers": {"notes": {"command": "/path/to/.venv/bin/python",
                              "args": ["/path/to/examples/mcp/notes_server.py", "/path/to/data/notes"]}}}

An agent then names its tools ``mcp__notes__save_note`` and ``mcp__notes__read_note`` (or ``mcp__notes__*``). Run by
hand, it waits for MCP messages on its standard input: ``python examples/mcp/notes_server.py /tmp/notes``. With
``--http PORT`` it serves streamable HTTP at ``http://127.0.0.1:PORT/mcp`` instead, as a tenant's server would (a
tenant adds it with ``POST /v1/mcp-servers``; a loopback address needs ``HANGO_MCP_ALLOW_PRIVATE_URLS=true``).

A note's name is one file name (letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit), so no
call can reach outside the folder. An approved call carries its approval id in ``_meta["io.hango/idempotency-key"]``;
``save_note`` says which key it was sent with, so the tour's reader sees the approval arrive at the server.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

IDEMPOTENCY_KEY = "io.hango/idempotency-key"
NOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_NOTE_CHARACTERS = 100_000


class NoteError(ToolError):
    """A call the server refuses: the SDK answers it with an error result carrying this message, which the model
    reads (any other exception is a crash, answered with a message that says nothing)."""


def note_path(folder: Path, name: str) -> Path:
    """The file of the note ``name``: always directly in ``folder``.

    Raises:
        NoteError: ``name`` is not one plain file name.
    """
    if not NOTE_NAME.fullmatch(name):
        raise NoteError(f"{name!r} is not a note name: use letters, digits, '.', '_' and '-' (at most 64)")
    return folder / name


def save(folder: Path, name: str, text: str, key: str | None = None) -> str:
    """Write a note, replacing one of the same name, and say where it went (and with which idempotency key)."""
    if len(text) > MAX_NOTE_CHARACTERS:
        raise NoteError(f"a note holds at most {MAX_NOTE_CHARACTERS} characters")
    path = note_path(folder, name)
    path.write_text(text, encoding="utf-8")
    sent_with = f" (idempotency key {key})" if key else ""
    return f"saved note {name} ({len(text)} characters) to {path}{sent_with}"


def read(folder: Path, name: str) -> str:
    """A note's text, or ``(no note named …)``."""
    path = note_path(folder, name)
    return path.read_text(encoding="utf-8") if path.is_file() else f"(no note named {name})"


def make_server(folder: Path) -> MCPServer:
    """The notes server for one folder, its tools annotated as a reviewer should read them."""
    server: MCPServer = MCPServer("hango-notes", instructions="Notes kept as files in one folder.")

    @server.tool(
        title="Save a note",
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False),
    )
    def save_note(name: str, text: str, context: Context) -> str:
        """Write a note to the notes folder, replacing any note of the same name."""
        meta = context.request_context.meta
        key = meta.get(IDEMPOTENCY_KEY) if meta else None
        return save(folder, name, text, str(key) if key else None)

    @server.tool(title="Read a note", annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    def read_note(name: str) -> str:
        """Read a note from the notes folder."""
        return read(folder, name)

    return server


def main() -> None:
    """Serve the folder named on the command line (created when missing) over stdio, or over HTTP on loopback."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the notes are kept")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    options = parser.parse_args()
    folder = options.folder.resolve()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    server = make_server(folder)
    if options.http is None:
        server.run()
    else:
        server.run("streamable-http", host="127.0.0.1", port=options.http)


if __name__ == "__main__":
    main()
