"""The tool registry: built-ins, third-party entry points and configured modules."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from hango.agent.tools.base import Tool, ToolRegistry
from hango.agent.tools.filesystem import BUILTIN_TOOLS, builtin_registry


def test_the_builtins_are_the_contracts_six() -> None:
    assert builtin_registry().names() == {"ls", "read_file", "write_file", "edit_file", "glob", "grep"}


def test_third_party_tools_arrive_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "weather_tools.py").write_text(
        textwrap.dedent(
            """
            from hango.agent.tools.base import Tool

            def forecast():
                return Tool("forecast", "Weather.", {"type": "object"}, lambda context, args: "sunny")
            """
        )
    )
    dist = tmp_path / "weather_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: weather-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[hango.tools]\nforecast = weather_tools:forecast\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ToolRegistry()
    registry.load_entry_points()
    tool = registry.get("forecast")
    assert tool is not None
    assert tool.handler(None, {}) == "sunny"  # type: ignore[arg-type]
    sys.modules.pop("weather_tools", None)


def test_configured_modules_contribute_their_tools_list() -> None:
    registry = ToolRegistry()
    registry.load_modules(["tests.support.tools"])
    assert {"count", "sleep", "explode"} <= registry.names()


def test_a_module_offering_something_else_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "not_tools.py").write_text("TOOLS = ['oops']\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match="not a hango Tool"):
        ToolRegistry().load_modules(["not_tools"])


def test_the_built_in_tools_are_idempotent_and_a_third_party_tool_is_not_unless_it_says_so() -> None:
    assert all(tool.idempotent for tool in BUILTIN_TOOLS)
    assert not Tool("t", "d", {"type": "object"}, lambda context, args: "").idempotent
