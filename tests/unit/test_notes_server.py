"""The quickstart's demo MCP server (examples/mcp/notes_server.py), spoken to over the MCP SDK's in-memory
transport: what it lists decides hango's default rule for its tools, and a note never lands outside its folder."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import anyio
import pytest
from mcp import Client

from hango.agent.mcp import PinnedTool

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@pytest.fixture(scope="module")
def notes_server() -> ModuleType:
    """examples/mcp/notes_server.py, a script rather than a module of a package, loaded from its file."""
    spec = importlib.util.spec_from_file_location("hango_notes_server", ROOT / "examples" / "mcp" / "notes_server.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _with_client(server: Any, use: Callable[[Client], Awaitable[T]]) -> T:
    async def session() -> T:
        async with Client(server) as client:
            return await use(client)

    return anyio.run(session)


def test_save_note_waits_for_a_reviewer_and_read_note_does_not_as_the_trusted_operators_tools(
    notes_server: ModuleType, tmp_path: Path
) -> None:
    async def listed(client: Client) -> list[dict[str, Any]]:
        page = await client.list_tools()
        return [tool.model_dump(mode="json", by_alias=True, exclude_unset=True) for tool in page.tools]

    tools = {tool["name"]: tool for tool in _with_client(notes_server.make_server(tmp_path), listed)}
    assert set(tools) == {"save_note", "read_note"}
    save = PinnedTool.of_listing("notes", tools["save_note"], trusted=True)
    read = PinnedTool.of_listing("notes", tools["read_note"], trusted=True)
    assert save.annotations["destructiveHint"] is True
    assert save.waits_by_default
    assert not read.waits_by_default
    # An untrusted server's word is not taken: the same read-only tool would wait.
    assert PinnedTool.of_listing("notes", tools["read_note"], trusted=False).waits_by_default


def test_a_saved_note_is_a_file_of_the_folder_and_the_answer_names_the_idempotency_key(
    notes_server: ModuleType, tmp_path: Path
) -> None:
    async def save_then_read(client: Client) -> tuple[Any, Any]:
        arguments = {"name": "tea.md", "text": "Green tea."}
        saved = await client.call_tool("save_note", arguments, meta={"io.hango/idempotency-key": "approval-1"})
        return saved, await client.call_tool("read_note", {"name": "tea.md"})

    saved, read = _with_client(notes_server.make_server(tmp_path), save_then_read)
    assert not saved.is_error
    assert (tmp_path / "tea.md").read_text() == "Green tea."
    assert saved.content[0].text.endswith("(idempotency key approval-1)")
    assert read.content[0].text == "Green tea."


@pytest.mark.parametrize("name", ["../escaped.md", "{tmp}/escaped.md", "sub/escaped.md", ".hidden", ""])
def test_a_name_that_is_not_one_plain_file_name_is_an_error_result_and_writes_nothing(
    notes_server: ModuleType, tmp_path: Path, name: str
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()

    async def save(client: Client) -> Any:
        return await client.call_tool("save_note", {"name": name.format(tmp=tmp_path), "text": "x"})

    result = _with_client(notes_server.make_server(folder), save)
    assert result.is_error
    assert "is not a note name" in result.content[0].text
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == [Path("notes")]
