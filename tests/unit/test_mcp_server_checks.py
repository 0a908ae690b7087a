"""The MCP servers service's pure checks: header names hango's client sets itself, names given twice, a ``PUT``
naming another server; each error names its field."""

from __future__ import annotations

import pytest

from hango.kernel.errors import FieldError
from hango.services.mcp_servers import ServerCommand, command_errors, header_errors


def _command(name: str | None = "docs", headers: dict[str, str] | None = None) -> ServerCommand:
    return ServerCommand(name=name, url="https://mcp.example/mcp", trusted=False, description="", headers=headers)


@pytest.mark.parametrize("header", ["Host", "content-length", "Transfer-Encoding", "MCP-Session-Id", "Proxy-Anything"])
def test_a_header_the_client_sets_itself_is_refused_whatever_its_case(header: str) -> None:
    assert header_errors({header: "x"}) == [
        FieldError(f"headers.{header}", "is set by hango's MCP client, not by a server's headers")
    ]


def test_a_header_given_twice_in_two_cases_is_refused_once_named_by_its_second_spelling() -> None:
    errors = header_errors({"X-Api-Key": "a", "Authorization": "b", "x-api-key": "c"})
    assert errors == [FieldError("headers.x-api-key", "is given twice (header names are case-insensitive)")]


def test_ordinary_headers_pass() -> None:
    assert header_errors({"Authorization": "Bearer t", "X-Api-Key": "k"}) == []
    assert command_errors(_command(headers={"Authorization": "Bearer t"}), "docs") == []


def test_a_put_may_leave_the_name_out_or_repeat_it_but_not_name_another_server() -> None:
    assert command_errors(_command(name=None), "docs") == []
    assert command_errors(_command(name="docs"), "docs") == []
    assert [error.field for error in command_errors(_command(name="other"), "docs")] == ["name"]


@pytest.mark.parametrize("name", ["", "Docs", "my_docs", "x" * 33, "docs\n"])
def test_a_name_outside_the_grammar_is_refused(name: str) -> None:
    assert [error.field for error in command_errors(_command(name=name), name)] == ["name"]


def test_every_error_is_reported_at_once() -> None:
    errors = command_errors(_command(name="other", headers={"Host": "h", "Connection": "c"}), "docs")
    assert [error.field for error in errors] == ["name", "headers.Host", "headers.Connection"]
