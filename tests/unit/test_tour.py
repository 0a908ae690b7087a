"""How the quickstart's tour (deploy/tour.py) prints events, messages and audit rows: one line each, never cut
without saying so."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from hango.client.types import AuditEvent, Event, Message

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tour() -> ModuleType:
    """deploy/tour.py, a script rather than a module of a package, loaded from its file."""
    spec = importlib.util.spec_from_file_location("hango_tour", ROOT / "deploy" / "tour.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_line_that_fits_is_printed_whole(tour: ModuleType) -> None:
    assert tour.one_line("event run.queued", 16) == "event run.queued"
    assert tour.one_line("a\nb", 10) == "a b"


def test_a_longer_line_is_shortened_to_the_width_and_ends_in_an_ellipsis(tour: ModuleType) -> None:
    text = "x" * 30 + "y"
    shortened = tour.one_line(text, 20)
    assert shortened == "x" * 19 + "…"
    assert len(shortened) == 20


def test_an_event_is_its_type_and_its_data_as_compact_json(tour: ModuleType) -> None:
    event: Event = {"id": "1", "type": "run.queued", "data": {"reason": "created", "note": "thé"}}
    assert tour.event_line(event, 160) == '  event run.queued: {"reason":"created","note":"thé"}'


def test_a_long_event_keeps_the_width_and_says_it_was_shortened(tour: ModuleType) -> None:
    event: Event = {"id": "4", "type": "message.created", "data": {"content": "z" * 500}}
    line = tour.event_line(event, 80)
    assert len(line) == 80
    assert line.startswith('  event message.created: {"content":"zzz')
    assert line.endswith("z…")


def test_a_message_is_its_number_role_and_content_on_one_line(tour: ModuleType) -> None:
    message: Message = {
        "seq": 2,
        "role": "assistant",
        "content": [{"type": "text", "text": "first line\nsecond line"}],
        "subagent_call_id": None,
    }
    line = tour.message_line(message, 160)
    assert line == '  2 assistant: [{"type":"text","text":"first line\\nsecond line"}]'
    assert "\n" not in line


def test_an_audit_row_is_compact_json_of_who_did_what_and_is_never_shortened(tour: ModuleType) -> None:
    row: AuditEvent = {
        "id": "a1",
        "actor_kind": "user",
        "actor_id": "u1",
        "action": "approval.decide",
        "target_kind": "pending_approval",
        "target_id": "p1",
        "outcome": "denied",
        "detail": {"decision": "approve", "refusal": "Forbidden", "tool_call_id": "c" * 300},
        "trace_id": None,
        "created_at": "2026-12-03T08:00:00+00:00",
    }
    line = tour.audit_line(row)
    assert line.startswith('  {"action":"approval.decide","outcome":"denied",')
    assert ": " not in line
    assert ", " not in line
    assert json.loads(line) == {
        "action": "approval.decide",
        "outcome": "denied",
        "actor_id": "u1",
        "target_kind": "pending_approval",
        "target_id": "p1",
        "detail": row["detail"],
    }


def test_an_mcp_call_is_shown_by_server_trust_tool_description_annotations_and_digest(tour: ModuleType) -> None:
    approval = {
        "mcp": {
            "server": "notes",
            "tool": "save_note",
            "title": "Save a note",
            "description": "Write a note.",
            "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False},
            "trusted": True,
            "definition_sha256": "ab" * 32,
        },
        "definition_sha256": "ab" * 32,
    }
    assert tour.mcp_shown(approval) == [
        "  server: notes (trusted)",
        "  tool: Save a note (save_note)",
        "  description: Write a note.",
        "  annotations: DESTRUCTIVE",
        f"  definition_sha256: {'ab' * 32}",
    ]
    untitled = {**approval["mcp"], "title": None, "trusted": False, "annotations": {"readOnlyHint": True}}
    shown = tour.mcp_shown({**approval, "mcp": untitled})
    assert shown[:2] == ["  server: notes (untrusted)", "  tool: save_note"]
    assert shown[3] == "  annotations: read-only"


def test_each_tool_result_is_one_line_named_by_the_call_it_answers(tour: ModuleType) -> None:
    messages: list[Message] = [
        {
            "seq": 2,
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Saving."},
                {"type": "tool_use", "id": "c1", "name": "mcp__notes__save_note", "input": {}},
                {"type": "tool_use", "id": "c2", "name": "mcp__notes__read_note", "input": {}},
            ],
            "subagent_call_id": None,
        },
        {
            "seq": 3,
            "role": "tool",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "saved\nto tea.md", "is_error": False},
                {"type": "tool_result", "tool_use_id": "c2", "content": "no such note", "is_error": True},
            ],
            "subagent_call_id": None,
        },
    ]
    assert tour.tool_results(messages) == [
        "  mcp__notes__save_note: saved to tea.md",
        "  mcp__notes__read_note: (error) no such note",
    ]


def test_an_answer_is_the_assistants_text_and_the_tools_it_calls_or_the_runs_end(tour: ModuleType) -> None:
    content = [
        {"type": "text", "text": "Saving a note\nto memory."},
        {"type": "tool_use", "id": "c1", "name": "write_file", "input": {}},
    ]
    said: Event = {"id": "2", "type": "message.created", "data": {"role": "assistant", "content": content}}
    assert tour.answer_lines(said) == ["  assistant: Saving a note to memory. (calls write_file)"]
    inner: Event = {**said, "data": {**said["data"], "subagent_call_id": "t1"}}
    asked: Event = {**said, "data": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}
    assert tour.answer_lines(inner) == tour.answer_lines(asked) == []
    ended: Event = {"id": "9", "type": "run.finished", "data": {"state": "failed", "error": "approval expired"}}
    assert tour.answer_lines(ended) == ["  run failed: approval expired"]
