"""The pure parts of hango's MCP support: names, pinned definitions and their digest, the default rule, the
operator's config file, and how a call's result becomes the text the model reads."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import rfc8785
from click.testing import CliRunner
from mcp_types import CallToolResult, EmbeddedResource, ImageContent, TextContent, TextResourceContents

from hango.agent.interrupts import compile_rules, effective_config
from hango.agent.mcp import PinnedTool, default_rules, definition_sha256, hango_name, parse_name, selects
from hango.kernel.errors import ConfigError
from hango.mcp.client import _outcome
from hango.mcp.config import load_operator_servers
from hango.mcp.transports import stdio_environment
from hango.processes.cli import main as cli

LISTED = {
    "name": "poke",
    "title": "Poke",
    "description": "Write a note.",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "minimum": 1.5}}},
    "annotations": {"readOnlyHint": False, "destructiveHint": True},
    "x-vendor": {"kept": [1, 2]},
}


def test_a_name_reads_one_way_and_a_wildcard_selects_every_tool_of_its_server() -> None:
    assert hango_name("git", "log") == "mcp__git__log"
    parsed = parse_name("mcp__git__log__all")
    assert parsed is not None
    assert (parsed.server, parsed.tool) == ("git", "log__all")
    for invalid in (
        "mcp__Git__log",
        "mcp__git_x__log",
        "mcp__git__",
        "mcp____log",
        "write_file",
        f"mcp__{'a' * 33}__x",
    ):
        assert parse_name(invalid) is None, invalid
    assert selects(["mcp__git__*"], "mcp__git__log")
    assert not selects(["mcp__git__*"], "mcp__gitx__log")
    assert not selects(["mcp__git__commit"], "mcp__git__log")


def test_the_definition_digest_is_anyones_sha256_of_the_rfc8785_form_of_every_member_listed() -> None:
    assert definition_sha256(LISTED) == hashlib.sha256(rfc8785.dumps(LISTED)).hexdigest()
    reordered = json.loads(json.dumps(dict(reversed(list(LISTED.items())))))
    assert definition_sha256(reordered) == definition_sha256(LISTED)
    assert definition_sha256({**LISTED, "x-vendor": {"kept": [1, 3]}}) != definition_sha256(LISTED)


@pytest.mark.parametrize(
    ("trusted", "read_only", "waits"),
    [(True, True, False), (True, False, True), (False, True, True), (False, False, True), (True, None, True)],
)
def test_a_call_waits_unless_its_server_is_trusted_and_the_tool_says_it_only_reads(
    trusted: bool, read_only: bool | None, waits: bool
) -> None:
    annotations = {} if read_only is None else {"readOnlyHint": read_only}
    tool = PinnedTool.of_listing("s", {"name": "t", "annotations": annotations}, trusted=trusted)
    assert tool.waits_by_default is waits
    assert ("mcp__s__t" in compile_rules(None, default_rules([tool]))) is waits


def test_a_user_entry_wins_over_the_mcp_default_and_false_lifts_it() -> None:
    tool = PinnedTool.of_listing("s", {"name": "t"}, trusted=False)
    defaults = default_rules([tool])
    assert "mcp__s__t" not in compile_rules({"mcp__s__t": False}, defaults)
    assert effective_config({"mcp__s__t": False}, defaults)["mcp__s__t"] is False
    narrowed = compile_rules({"mcp__s__t": {"allowed_decisions": ["approve", "reject"]}}, defaults)["mcp__s__t"]
    assert narrowed.allowed_decisions == ("approve", "reject")


def test_the_operator_file_reads_both_kinds_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "git": {"command": "uvx", "args": ["mcp-server-git", "${REPO}"], "env": {"T": "${TOKEN}"}},
                    "docs": {"url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                }
            }
        )
    )
    servers = load_operator_servers(str(config), {"REPO": "/srv/repo", "TOKEN": "s3cret"})
    assert servers["git"].args == ("mcp-server-git", "/srv/repo")
    assert servers["git"].env == {"T": "s3cret"}
    assert servers["docs"].headers == {"Authorization": "Bearer s3cret"}
    assert all(server.trusted and server.scope == "operator" for server in servers.values())
    assert "s3cret" not in repr(servers["docs"])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("not json", "is not JSON"),
        ('{"servers": {}}', '"mcpServers"'),
        ('{"mcpServers": {"Bad_Name": {"command": "x"}}}', "mcpServers.Bad_Name: a server name must match"),
        ('{"mcpServers": {"a": {"command": "x", "url": "https://x"}}}', "mcpServers.a: must have either"),
        ('{"mcpServers": {"a": {"command": "x", "headers": {}}}}', "mcpServers.a.headers: unknown field"),
        ('{"mcpServers": {"a": {"command": "x", "args": [1]}}}', "mcpServers.a.args[0]: must be a string"),
        ('{"mcpServers": {"a": {"url": "ftp://x"}}}', "mcpServers.a.url: must be an http or https URL"),
        ('{"mcpServers": {"a": {"command": "${NOPE}"}}}', "mcpServers.a.command: ${NOPE} is not set"),
        ('{"mcpServers": {"a": {"url": "https://x", "type": "sse"}}}', "mcpServers.a.type: 'sse' is not a transport"),
    ],
)
def test_a_malformed_operator_file_names_its_entry(tmp_path: Path, document: str, message: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(document)
    with pytest.raises(ConfigError, match="HANGO_MCP_CONFIG") as raised:
        load_operator_servers(str(config), {})
    assert message in str(raised.value)


def test_a_malformed_operator_file_stops_a_hango_process_with_the_entry_named(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"git": {"command": 5}}}')
    env = {
        "HANGO_MCP_CONFIG": str(config),
        "HANGO_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "HANGO_REDIS_URL": "redis://127.0.0.1:1/0",
    }
    result = CliRunner().invoke(cli, ["worker"], env=env)
    assert result.exit_code == 1
    assert "mcpServers.git.command: must be a non-empty string" in result.output


def test_a_stdio_server_gets_its_own_environment_and_only_path_home_and_lang_of_the_workers() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "HANGO_DATABASE_URL": "postgresql://secret",
        "USER": "u",
    }
    assert stdio_environment({"TOKEN": "t"}, environ) == {
        "PATH": "/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "TOKEN": "t",
    }


def test_a_result_reads_as_text_with_structured_content_only_without_text_and_is_capped() -> None:
    both = CallToolResult(
        content=[TextContent(type="text", text="a"), TextContent(type="text", text="b")], structured_content={"n": 1}
    )
    assert _outcome(both, 1000).text == "a\nb"
    structured = CallToolResult(content=[], structured_content={"n": 1, "s": "é"})
    assert _outcome(structured, 1000).text == '{"n":1,"s":"é"}'
    blocks = CallToolResult(
        content=[
            ImageContent(type="image", data="AAAA", mime_type="image/png"),
            EmbeddedResource(
                type="resource", resource=TextResourceContents(uri="file:///a", text="abc", mime_type="text/plain")
            ),
        ]
    )
    lines = _outcome(blocks, 1000).text.splitlines()
    assert lines == ["[image image/png, 3 bytes]", "[resource file:///a text/plain, 3 characters]"]
    failed = CallToolResult(content=[TextContent(type="text", text="nope")], is_error=True)
    assert _outcome(failed, 1000).is_error
    big = _outcome(CallToolResult(content=[TextContent(type="text", text="é" * 100)]), 51)
    assert big.text.startswith("é" * 25 + "\n[result cut: it had 200 bytes, over the limit of 51")


def test_the_cli_shows_a_servers_own_text_with_its_terminal_controls_escaped() -> None:
    from hango.processes.cli_mcp import _tool_row

    tool = {
        "name": "poke",
        "hango_name": "mcp__x__poke",
        "title": "Clear\x1b[2J the screen",
        "description": "",
        "input_schema": {},
        "annotations": {"destructiveHint": True},
        "definition_sha256": "0" * 64,
    }
    assert _tool_row(tool) == ("mcp__x__poke", "DESTRUCTIVE", "Clear\\x1b[2J the screen")  # type: ignore[arg-type]
