"""What the remote commands print for a human: an event in one line, a server's warnings, a problem document."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx
import pytest

from hango.client import Event, ProblemError
from hango.processes.cli_agents import warning_lines
from hango.processes.cli_remote import report_problem
from hango.processes.cli_runs import TEXT_WIDTH, event_line, pause_hint

AT = datetime(2026, 1, 2, 3, 4, 5)


def _line(kind: str, data: Any) -> str:
    return event_line(Event(id="7", type=kind, data=data), AT)


def _message(role: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"seq": 1, "role": role, "content": list(blocks), "subagent_call_id": None}


def test_each_event_is_its_time_type_and_what_matters_of_it() -> None:
    call = {"tool_call_id": "c1", "tool_name": "write_file"}
    assert _line("run.queued", {}) == "03:04:05  run.queued"
    assert _line("tool.started", call) == "03:04:05  tool.started            write_file (c1)"
    assert _line("tool.finished", {**call, "is_error": True}).endswith("write_file (c1)  error")
    requested = {**call, "approval_id": "a1", "arguments": {"content": "x" * 5000}}
    assert _line("approval.requested", requested).endswith("write_file (c1)  approval a1")
    decided = {**call, "approval_id": "a1", "decision": "reject", "decided_by": "u1"}
    assert _line("approval.decided", decided).endswith("approval a1  reject by u1")
    assert _line("run.awaiting_approval", {"pending": ["a1", "a2"]}).endswith("2 call(s) wait for a reviewer")
    assert _line("run.finished", {"state": "succeeded", "error": None}).endswith("run.finished            succeeded")
    assert _line("run.finished", {"state": "failed", "error": "approval expired"}).endswith("failed: approval expired")
    assert _line("subagent.started", {"subagent_call_id": "s1", "subagent_type": "researcher"}).endswith(
        "researcher (s1)"
    )


def test_a_message_shows_its_role_its_first_line_and_its_calls_and_a_cut_is_marked() -> None:
    text = {"type": "text", "text": "Saving your note.\nOne moment."}
    use = {"type": "tool_use", "id": "c1", "name": "write_file", "input": {"content": "x" * 5000}}
    assert _line("message.created", _message("assistant", text, use)).endswith(
        "assistant: Saving your note. …  calls write_file"
    )
    result = {"type": "tool_result", "tool_use_id": "c1", "content": "done", "is_error": False}
    assert _line("message.created", _message("tool", result)).endswith("tool: results c1 ok")
    long = "word " * 100
    line = _line("message.created", _message("user", {"type": "text", "text": long}))
    shown = line.split("user: ", 1)[1]
    assert shown.endswith("…")
    assert len(shown) == TEXT_WIDTH
    assert long.startswith(shown[:-1])


def test_an_event_of_another_type_is_its_data_cut_with_a_mark() -> None:
    line = _line("something.new", {"key": "v" * 500})
    assert line.startswith('03:04:05  something.new           {"key":"vvv')
    assert line.endswith("…")
    assert _line("something.new", {"a": 1}).endswith('{"a":1}')


def test_a_pause_names_the_inbox_page_and_the_command_that_decides_the_approval() -> None:
    requested = {"tool_name": "write_file", "tool_call_id": "c1", "allowed_decisions": ["approve", "reject"]}
    hint = pause_hint("a1", requested, "http://hango.example").splitlines()
    assert hint[0].strip() == "waiting for a reviewer: write_file (c1)"
    assert hint[1].strip() == "inbox:  http://hango.example/inbox/approvals/a1"
    assert hint[2].strip() == "or:     hango approvals decide a1 --approve   (or --reject --message M)"


def test_the_servers_warnings_are_one_line_each_naming_the_tool() -> None:
    agent: Any = {
        "id": "a",
        "name": "n",
        "warnings": [
            {"tool": "write_file", "message": "write_file to /memories/ and /skills/ is no longer interrupted"},
            {"tool": "mcp__git__push", "message": "can write and no rule covers it"},
        ],
    }
    assert warning_lines(agent) == [
        "warning: write_file: write_file to /memories/ and /skills/ is no longer interrupted",
        "warning: mcp__git__push: can write and no rule covers it",
    ]
    assert warning_lines({"id": "a", "name": "n", "warnings": []}) == []
    assert warning_lines({"id": "a", "name": "n"}) == []


def _problem(body: dict[str, Any]) -> ProblemError:
    return ProblemError.from_response(httpx.Response(body["status"], json=body))


@pytest.mark.parametrize(
    "detail",
    [
        "decisions[0].tool_call_id: no pending call",
        "The request is not valid: decisions[0].tool_call_id: no pending call",
    ],
)
def test_a_field_error_the_detail_repeats_is_printed_once(capsys: pytest.CaptureFixture[str], detail: str) -> None:
    error = {"field": "decisions[0].tool_call_id", "message": "no pending call"}
    report_problem(_problem({"status": 400, "title": "Invalid request", "detail": detail, "errors": [error]}))
    assert capsys.readouterr().err == "error: 400 Invalid request\n  decisions[0].tool_call_id: no pending call\n"


def test_a_problem_without_field_errors_keeps_its_detail(capsys: pytest.CaptureFixture[str]) -> None:
    report_problem(_problem({"status": 404, "title": "Not found", "detail": "run x not found"}))
    assert capsys.readouterr().err == "error: 404 Not found: run x not found\n"
