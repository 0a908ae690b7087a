"""The built-in middlewares' observable behaviour: spans, prompts, refusals, repairs, reviews, the stack and
decisions.

Written to kill the mutants that survived mutation testing (docs/mutation-testing.md); each test drives a
middleware through its public hooks and checks what the loop, the model or an operator would see.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from hango.agent.interrupts import InterruptRule
from hango.agent.messages import AssistantTurn, Message, ToolCall, ToolResult, Usage, tool_use_block
from hango.agent.middleware import tracing
from hango.agent.middleware.allowlist import ToolAllowlist
from hango.agent.middleware.base import REFUSED, Chain, LoopScope, Middleware, ModelCall, ToolCallRequest, Verdict
from hango.agent.middleware.hitl import (
    HumanInTheLoop,
    UnappliedDecisions,
    load_decisions,
    rejection_text,
    require_decisions_applied,
)
from hango.agent.middleware.memory import MEMORY_PATH, Memory
from hango.agent.middleware.metrics import Metrics
from hango.agent.middleware.repair import INTERRUPTED, RepairToolCalls
from hango.agent.middleware.stack import SLOTS, default_chain, default_middlewares
from hango.agent.middleware.tracing import Tracing
from hango.agent.models.base import ModelRequest, ToolSpec
from hango.agent.state import AwaitingApproval, Cancelled, Decision, Done, Failed, LoopState, PendingCall
from hango.agent.tools.base import Tool, ToolContext
from hango.kernel.models import DECISIONS
from tests.unit.fakes import MemoryFiles, MemoryPort

SCHEMA = {
    "type": "object",
    "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["file_path", "content"],
}
WRITE = Tool("write_file", "Write a file.", SCHEMA, lambda context, args: "unused")
EVERY_CALL = InterruptRule(("approve", "reject"))
FILE = {"file_path": "/a", "content": "x"}


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The spans the tracing middleware records, kept apart from any process-wide tracer provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "tracer", lambda: provider.get_tracer("hango"))
    yield exporter
    provider.shutdown()


def _scope(
    messages: list[Message] | None = None,
    decisions: dict[str, Decision] | None = None,
    suspended_batch: list[str] | None = None,
) -> LoopScope:
    state = LoopState(messages or [], suspended_batch=suspended_batch or [], decisions=decisions or {})
    return LoopScope(MemoryPort(), state, [])


def _request(call: ToolCall, scope: LoopScope | None = None, tool: Tool | None = WRITE) -> ToolCallRequest:
    scope = scope or _scope([Message("assistant", [tool_use_block(call)])])
    context = ToolContext(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), call.id, MemoryFiles())  # type: ignore[arg-type]
    return ToolCallRequest(call, tool, context, scope)


def _decision(kind: str, args: dict[str, Any] | None = None, message: str = "", by: str | None = None) -> Decision:
    return Decision(kind, str(uuid.uuid4()), args, message, by)


def _decided(decisions: dict[str, Decision], *calls: ToolCall) -> LoopScope:
    return _scope([Message("assistant", [tool_use_block(c) for c in calls])], decisions)


def _ran(request: ToolCallRequest) -> ToolResult:
    return ToolResult(request.call.id, f"ran {request.call.name} with {sorted(request.call.input.items())}")


def _failed(request: ToolCallRequest) -> ToolResult:
    return ToolResult(request.call.id, "boom", is_error=True)


def _one(exporter: InMemorySpanExporter) -> ReadableSpan:
    [span] = exporter.get_finished_spans()
    return span


# Tracing


@pytest.mark.parametrize(
    ("model", "provider", "name"),
    [
        ({"provider": "anthropic", "name": "claude-x"}, "anthropic", "claude-x"),
        ({"provider": "scripted"}, "scripted", "scripted"),
        ({"provider": "openai", "name": ""}, "openai", "openai"),
        ({}, "unknown", "unknown"),
    ],
)
def test_a_model_call_is_a_chat_span_with_the_model_and_the_token_usage(
    spans: InMemorySpanExporter, model: dict[str, Any], provider: str, name: str
) -> None:
    turn = AssistantTurn("hi", usage=Usage(input_tokens=11, output_tokens=7))
    assert Tracing(model).wrap_model_call(ModelCall(ModelRequest("", []), _scope()), lambda call: turn) is turn
    span = _one(spans)
    assert span.name == f"chat {name}"
    assert span.kind == SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": name,
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 7,
    }


def test_an_executed_call_is_an_execute_tool_span_with_its_outcome(spans: InMemorySpanExporter) -> None:
    call = ToolCall("c1", "write_file", {"file_path": "/a", "content": "secret"})
    request = _request(call)
    assert Tracing({}).wrap_tool_call(request, _ran) == _ran(request)
    assert Tracing({}).wrap_tool_call(request, _failed).is_error
    ok, failed = spans.get_finished_spans()
    assert ok.name == failed.name == "execute_tool write_file"
    expected = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "c1",
        "hango.run.id": str(request.context.run_id),
    }
    assert dict(ok.attributes or {}) == {**expected, "hango.tool.outcome": "ok"}
    assert dict(failed.attributes or {}) == {**expected, "hango.tool.outcome": "error"}
    assert ok.events == failed.events == ()
    assert "secret" not in str([ok.attributes, failed.attributes])


def test_an_mcp_calls_span_names_its_server_and_its_tool(spans: InMemorySpanExporter) -> None:
    request = _request(ToolCall("c2", "mcp__git__git_log", {"repo_path": "/srv/repo"}))
    Tracing({}).wrap_tool_call(request, _ran)
    span = _one(spans)
    assert span.name == "execute_tool mcp__git__git_log"
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.tool.name"] == "mcp__git__git_log"
    assert (attributes["hango.mcp.server"], attributes["hango.mcp.tool"]) == ("git", "git_log")
    assert "/srv/repo" not in str(attributes)


@pytest.mark.parametrize(
    ("kind", "args", "changed"),
    [
        ("approve", None, False),
        ("edit", {"content": "secret"}, True),
        # The model's arguments given back as an edit (in another key order) change nothing, as the audit row says.
        ("edit", {"content": "x", "file_path": "/a"}, False),
        ("edit", {"file_path": "/a", "content": "x", "mode": 1}, True),
        ("reject", None, False),
    ],
)
def test_an_executed_decided_call_records_the_decision_without_arguments(
    spans: InMemorySpanExporter, kind: str, args: dict[str, Any] | None, changed: bool
) -> None:
    call = ToolCall("c1", "write_file", dict(FILE))
    decision = _decision(kind, args, by="someone")
    scope = _decided({"c1": decision}, call)
    Tracing({}).wrap_tool_call(_request(call, scope), _ran)
    [event] = _one(spans).events
    assert event.name == "tool.approval_decided"
    assert dict(event.attributes or {}) == {
        "hango.approval.decision": kind,
        "hango.approval.decided_by": "someone",
        "hango.approval.args_changed": changed,
    }
    assert scope.state.decisions == {"c1": decision}  # tracing reads the decision; the HITL layer consumes it


def test_a_decision_without_a_decider_records_an_empty_one(spans: InMemorySpanExporter) -> None:
    call = ToolCall("c1", "write_file", {})
    Tracing({}).wrap_tool_call(_request(call, _decided({"c1": _decision("approve")}, call)), _ran)
    [event] = _one(spans).events
    assert (event.attributes or {})["hango.approval.decided_by"] == ""


@pytest.mark.parametrize("outcome", [Done("ok"), Failed("no"), Cancelled()])
def test_a_loop_that_does_not_suspend_records_no_waiting_span(spans: InMemorySpanExporter, outcome: Any) -> None:
    Tracing({}).after_run(_scope(), outcome)
    assert spans.get_finished_spans() == ()


def test_a_suspended_loop_records_a_span_for_each_of_its_own_waiting_calls(spans: InMemorySpanExporter) -> None:
    mine = ToolCall("c1", "write_file", dict(FILE))
    childs = ToolCall("c2", "shell", {"command": "ls"})
    scope = _scope([Message("assistant", [tool_use_block(mine)])])
    outcome = AwaitingApproval(
        (PendingCall(childs, ("approve",), uuid.uuid4()), PendingCall(mine, ("approve", "edit"))), ("c1",)
    )
    Tracing({}).after_run(scope, outcome)
    span = _one(spans)
    assert span.name == "execute_tool write_file"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "c1",
        "hango.run.id": str(scope.services.run_id),
        "hango.tool.outcome": "awaiting_approval",
    }
    [event] = span.events
    assert event.name == "tool.approval_requested"
    assert dict(event.attributes or {}) == {
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.call.id": "c1",
        "hango.approval.allowed_decisions": ("approve", "edit"),
    }


def test_a_suspension_with_several_waiting_calls_records_one_span_each(spans: InMemorySpanExporter) -> None:
    calls = [ToolCall(f"c{i}", "write_file", dict(FILE)) for i in range(3)]
    outcome = AwaitingApproval(tuple(PendingCall(call, ("approve",)) for call in calls), ("c0", "c1", "c2"))
    Tracing({}).after_run(_scope(), outcome)
    ids = [(span.attributes or {})["gen_ai.tool.call.id"] for span in spans.get_finished_spans()]
    assert ids == ["c0", "c1", "c2"]


# Memory, allowlist, repair


def test_memory_is_appended_as_a_tagged_section_and_alone_without_a_system_prompt() -> None:
    seen: list[str] = []

    def model(call: ModelCall) -> AssistantTurn:
        seen.append(call.request.system)
        return AssistantTurn()

    scope = _scope()
    scope.services.files_view.write(MEMORY_PATH, "Tea.")  # type: ignore[attr-defined]
    Memory().wrap_model_call(ModelCall(ModelRequest("Be brief.", []), scope), model)
    Memory().wrap_model_call(ModelCall(ModelRequest("", []), scope), model)
    section = '<agent_memory path="/memories/AGENTS.md">\nTea.\n</agent_memory>'
    assert seen == [f"Be brief.\n\n{section}", section]
    assert MEMORY_PATH == "/memories/AGENTS.md"


def test_an_empty_memory_file_leaves_the_request_as_it_is() -> None:
    scope = _scope()
    scope.services.files_view.write(MEMORY_PATH, "")  # type: ignore[attr-defined]
    call = ModelCall(ModelRequest("Be brief.", []), scope)
    seen: list[ModelCall] = []

    def model(inner: ModelCall) -> AssistantTurn:
        seen.append(inner)
        return AssistantTurn()

    Memory().wrap_model_call(call, model)
    assert seen == [call]


def test_the_allowlist_names_the_refused_tool_and_offers_the_allowed_ones_in_order() -> None:
    offered: list[list[str]] = []

    def model(call: ModelCall) -> AssistantTurn:
        offered.append([tool.name for tool in call.request.tools])
        return AssistantTurn()

    allow = ToolAllowlist(iter(["grep", "ls"]))
    tools = [ToolSpec("ls", "", {}), ToolSpec("rm", "", {}), ToolSpec("grep", "", {})]
    allow.wrap_model_call(ModelCall(ModelRequest("", [], tools), _scope()), model)
    allow.wrap_model_call(ModelCall(ModelRequest("", [], tools), _scope()), model)
    assert offered == [["ls", "grep"], ["ls", "grep"]]
    refused = allow.wrap_tool_call(_request(ToolCall("x", "rm", {})), _ran)
    assert refused == ToolResult("x", "tool 'rm' is not available to this agent", True)
    assert allow.wrap_tool_call(_request(ToolCall("y", "ls", {})), _ran) == ToolResult("y", "ran ls with []")


def test_the_allowlists_review_refuses_exactly_the_calls_it_will_refuse() -> None:
    allow = ToolAllowlist(["ls"])
    assert allow.review_tool_call(_request(ToolCall("x", "rm", {}))) is REFUSED
    assert allow.review_tool_call(_request(ToolCall("y", "ls", {}))) is None


def test_repair_answers_dangling_calls_in_one_tool_message_and_re_drives_resumable_ones() -> None:
    calls = [ToolCall("a", "ls", {}), ToolCall("t", "task", {}), ToolCall("b", "grep", {}), ToolCall("h", "ls", {})]
    scope = _scope([Message("assistant", [tool_use_block(c) for c in calls])], suspended_batch=["h"])
    RepairToolCalls(resumable=["task"]).before_run(scope)
    blocks = [ToolResult(call_id, "tool call interrupted", is_error=True).block() for call_id in ("a", "b")]
    assert scope.added == [Message("tool", blocks)]
    assert scope.state.messages[-1] == Message("tool", blocks)
    assert INTERRUPTED == "tool call interrupted"


def test_repair_without_resumable_tools_answers_the_task_call_too() -> None:
    scope = _scope([Message("assistant", [tool_use_block(ToolCall("t", "task", {}))])])
    RepairToolCalls().before_run(scope)
    assert [block["tool_use_id"] for block in scope.added[0].content] == ["t"]


# The stack and the chain


class Named(Middleware):
    def __init__(self, name: str, log: list[str], verdict: Verdict = None) -> None:
        self.name, self.log, self.verdict = name, log, verdict

    def before_run(self, scope: LoopScope) -> None:
        self.log.append(f"before {self.name}")

    def review_tool_call(self, request: ToolCallRequest) -> Verdict:
        self.log.append(f"review {self.name}")
        self.reviewed = request
        return self.verdict

    def after_run(self, scope: LoopScope, outcome: Any) -> None:
        self.log.append(f"after {self.name}")
        self.seen = scope, outcome


def test_before_run_goes_outermost_first_and_after_run_innermost_first() -> None:
    log: list[str] = []
    middlewares = [Named("a", log), Named("b", log), Named("c", log)]
    chain, scope, outcome = Chain(middlewares), _scope(), Done("ok")
    chain.before_run(scope)
    chain.after_run(scope, outcome)
    assert log == ["before a", "before b", "before c", "after c", "after b", "after a"]
    assert all(m.seen[0] is scope and m.seen[1] is outcome for m in middlewares)


def test_a_middleware_that_overrides_nothing_passes_everything_through() -> None:
    chain, scope = Chain([Middleware()]), _scope()
    turn = AssistantTurn("x")
    assert chain.model_call(ModelCall(ModelRequest("", []), scope), lambda call: turn) is turn
    request = _request(ToolCall("c", "ls", {}))
    assert chain.tool_call(request, _ran) == _ran(request)
    assert Chain([]).tool_call(request, _failed).is_error
    assert Middleware().review_tool_call(request) is None
    assert chain.review(request) is None
    assert Chain([]).review(request) is None


def test_the_chain_review_asks_every_layer_and_returns_the_first_pending_call() -> None:
    log: list[str] = []
    request = _request(ToolCall("c", "write_file", dict(FILE)))
    first, second = PendingCall(request.call, ("approve",)), PendingCall(request.call, ("reject",))
    middlewares = [Named("a", log), Named("b", log, first), Named("c", log, second)]
    assert Chain(middlewares).review(request) is first
    assert log == ["review a", "review b", "review c"]
    assert all(m.reviewed is request for m in middlewares)


@pytest.mark.parametrize("refuser", [0, 2])
def test_a_call_any_layer_refuses_never_waits_for_a_human(refuser: int) -> None:
    request = _request(ToolCall("c", "write_file", dict(FILE)))
    verdicts: list[Verdict] = [None, PendingCall(request.call, ("approve",)), None]
    verdicts[refuser] = REFUSED
    assert Chain([Named(str(i), [], verdict) for i, verdict in enumerate(verdicts)]).review(request) is None


def test_overrides_replace_or_empty_slots_and_an_unknown_slot_is_refused() -> None:
    mine = Middleware()
    stack = default_middlewares(["ls"], overrides={"memory": mine, "tracing": None})
    assert [type(m).__name__ for m in stack] == [
        "RepairToolCalls",
        "Middleware",
        "HumanInTheLoop",
        "ToolAllowlist",
        "Metrics",
    ]
    assert stack[1] is mine
    with pytest.raises(KeyError, match=f"no middleware slot named 'audit'; slots are {', '.join(SLOTS)}"):
        default_middlewares(["ls"], overrides={"audit": None})


def test_the_default_stack_is_built_from_the_agents_tools_rules_model_and_switch() -> None:
    stack = default_middlewares(["ls"], {"shell": True}, None, {"provider": "anthropic", "name": "m"})
    tracer, repair, _, hitl, allow, metrics = stack
    assert isinstance(tracer, Tracing)
    assert (tracer.provider, tracer.model) == ("anthropic", "m")
    assert isinstance(repair, RepairToolCalls)
    assert repair.resumable == frozenset({"task"})
    assert isinstance(hitl, HumanInTheLoop)
    assert hitl.interrupts is True
    assert set(hitl.rules) == {"shell", "write_file", "edit_file"}
    assert isinstance(allow, ToolAllowlist)
    assert allow.allowed == frozenset({"ls"})
    assert isinstance(metrics, Metrics)
    assert metrics.provider == "anthropic"
    off = default_chain(["ls"], {"shell": True}, {"tracing": None}, interrupts=False)
    assert [m.name for m in off.middlewares] == list(SLOTS[1:])
    [hitl_off] = [m for m in off.middlewares if isinstance(m, HumanInTheLoop)]
    assert hitl_off.interrupts is False
    assert "shell" in hitl_off.rules
    assert default_chain(["ls"]).middlewares[0].model == "unknown"  # type: ignore[attr-defined]
    # Interrupts are on unless switched off.
    for default in (default_chain(["ls"]).middlewares, default_middlewares(["ls"])):
        assert [m.interrupts for m in default if isinstance(m, HumanInTheLoop)] == [True]


def test_the_default_chains_review_holds_an_allowed_matching_call_and_no_refused_one() -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    allowed = default_chain(["write_file"], {"write_file": {"allowed_decisions": ["approve", "reject"]}})
    assert allowed.review(_request(call)) == PendingCall(call, ("approve", "reject"))
    assert default_chain(["ls"], {"write_file": True}).review(_request(call)) is None


# Human in the loop


def test_executing_a_decided_call_consumes_only_its_own_decision() -> None:
    a, b = ToolCall("a", "write_file", dict(FILE)), ToolCall("b", "ls", {})
    decision_a, decision_b = _decision("approve"), _decision("approve")
    scope = _decided({"a": decision_a, "b": decision_b}, a, b)
    hitl = HumanInTheLoop({"write_file": EVERY_CALL})
    assert not hitl.wrap_tool_call(_request(a, scope), _ran).is_error
    assert scope.state.decisions == {"b": decision_b}
    hitl.wrap_tool_call(_request(b, scope, tool=None), _ran)
    assert scope.state.decisions == {}


def test_a_call_the_rules_do_not_cover_runs_and_keeps_other_decisions() -> None:
    other = ToolCall("o", "ls", {})
    decision = _decision("approve")
    scope = _decided({"d": decision}, other)
    hitl = HumanInTheLoop({"write_file": EVERY_CALL})
    assert hitl.review_tool_call(_request(other, scope, tool=None)) is None
    assert hitl.wrap_tool_call(_request(other, scope, tool=None), _ran) == ToolResult("o", "ran ls with []")
    assert scope.state.decisions == {"d": decision}


def test_a_call_outside_its_rules_when_runs_without_a_decision() -> None:
    scoped = InterruptRule(tuple(DECISIONS), {"file_path": {"prefix": "/memories/"}})
    call = ToolCall("w", "write_file", {"file_path": "/notes.txt", "content": "x"})
    request = _request(call)
    assert HumanInTheLoop({"write_file": scoped}).review_tool_call(request) is None
    assert HumanInTheLoop({"write_file": scoped}).wrap_tool_call(request, _ran) == _ran(request)
    inside = _request(ToolCall("m", "write_file", {"file_path": "/memories/a", "content": "x"}))
    assert HumanInTheLoop({"write_file": scoped}).review_tool_call(inside) == PendingCall(inside.call, tuple(DECISIONS))


def test_with_interrupts_off_a_matching_call_runs_but_decisions_still_apply() -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    hitl = HumanInTheLoop({"write_file": EVERY_CALL}, interrupts=False)
    request = _request(call)
    assert hitl.review_tool_call(request) is None
    assert hitl.wrap_tool_call(request, _ran) == _ran(request)
    scope = _decided({"w": _decision("reject", message="no")}, call)
    assert hitl.wrap_tool_call(_request(call, scope), _ran) == ToolResult("w", rejection_text("no"), is_error=True)


def test_an_unreviewed_matching_call_is_refused_with_a_reason() -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    result = HumanInTheLoop({"write_file": EVERY_CALL}).wrap_tool_call(_request(call), _ran)
    assert result == ToolResult("w", "this call needs a human decision and has none", is_error=True)


def test_the_review_holds_a_matching_call_only_when_it_could_run() -> None:
    hitl = HumanInTheLoop({"write_file": EVERY_CALL})
    call = ToolCall("w", "write_file", dict(FILE))
    assert hitl.review_tool_call(_request(call)) == PendingCall(call, ("approve", "reject"))
    assert hitl.review_tool_call(_request(call, tool=None)) is None  # an unknown tool: answered with an error
    bad = ToolCall("w", "write_file", {"file_path": "/a"})
    assert hitl.review_tool_call(_request(bad)) is None  # arguments that break the schema: the same
    # Such a call is not held, so it runs on to the layer that answers it.
    assert hitl.wrap_tool_call(_request(bad), _failed) == ToolResult("w", "boom", is_error=True)


def test_the_review_holds_no_decided_call_and_leaves_its_decision_in_place() -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    decision = _decision("approve")
    scope = _decided({"w": decision}, call)
    assert HumanInTheLoop({"write_file": EVERY_CALL}).review_tool_call(_request(call, scope)) is None
    assert scope.state.decisions == {"w": decision}


@pytest.mark.parametrize(
    ("decision", "result"),
    [
        (Decision("reject", "a"), ToolResult("w", rejection_text(""), is_error=True)),
        (Decision("respond", "a"), ToolResult("w", "")),
        (Decision("respond", "a", message="use /notes"), ToolResult("w", "use /notes")),
    ],
)
def test_a_decision_without_a_message_gives_an_empty_one(decision: Decision, result: ToolResult) -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    ran: list[ToolCallRequest] = []

    def inner(request: ToolCallRequest) -> ToolResult:
        ran.append(request)
        return _ran(request)

    answer = HumanInTheLoop({"write_file": EVERY_CALL}).wrap_tool_call(
        _request(call, _decided({"w": decision}, call)), inner
    )
    assert answer == result
    assert ran == []
    assert rejection_text("x") == "A human reviewer rejected this tool call: x"


def test_an_edit_without_args_runs_with_no_arguments_when_the_tool_allows_it() -> None:
    call = ToolCall("w", "ls", {"path": "/"})
    scope = _decided({"w": _decision("edit")}, call)
    seen: list[dict[str, Any]] = []

    def inner(request: ToolCallRequest) -> ToolResult:
        seen.append(request.call.input)
        return _ran(request)

    assert not HumanInTheLoop({"ls": EVERY_CALL}).wrap_tool_call(_request(call, scope, tool=None), inner).is_error
    assert seen == [{}]


def test_an_edit_is_checked_against_the_schema_and_the_scope_of_its_rule() -> None:
    scoped = InterruptRule(tuple(DECISIONS), {"file_path": {"prefix": "/memories/"}})
    call = ToolCall("w", "write_file", {"file_path": "/memories/a", "content": "x"})
    hitl = HumanInTheLoop({"write_file": scoped})
    cases = [
        ({"file_path": "/memories/b"}, "the edited arguments do not fit the tool's schema"),
        ({"file_path": "/notes", "content": "y"}, "the edited arguments leave the scope of the rule"),
    ]
    for args, message in cases:
        scope = _decided({"w": _decision("edit", args)}, call)
        assert hitl.wrap_tool_call(_request(call, scope), _ran) == ToolResult("w", message, is_error=True)
    # Without a rule for the tool, only the schema is checked.
    scope = _decided({"w": _decision("edit", {"file_path": "/notes", "content": "y"})}, call)
    result = HumanInTheLoop({}).wrap_tool_call(_request(call, scope), _ran)
    assert result == ToolResult("w", "ran write_file with [('content', 'y'), ('file_path', '/notes')]")


def test_applying_a_decision_is_logged_with_who_decided(caplog: pytest.LogCaptureFixture) -> None:
    call = ToolCall("w", "write_file", dict(FILE))
    scope = _decided({"w": _decision("approve", by="u-1")}, call)
    with caplog.at_level(logging.INFO, logger="hango.agent.middleware.hitl"):
        HumanInTheLoop({"write_file": EVERY_CALL}).wrap_tool_call(_request(call, scope), _ran)
    [record] = [r for r in caplog.records if r.getMessage() == "applying approval decision"]
    assert record.levelno == logging.INFO
    assert (record.tool, record.tool_call_id, record.decision, record.decided_by) == (  # type: ignore[attr-defined]
        "write_file",
        "w",
        "approve",
        "u-1",
    )


def test_load_decisions_keeps_only_the_calls_still_unanswered() -> None:
    a, b = ToolCall("a", "ls", {}), ToolCall("b", "ls", {})
    history = [
        Message("assistant", [tool_use_block(a), tool_use_block(b)]),
        Message("tool", [_ran(_request(a)).block()]),
    ]
    state = LoopState(history)
    decision = _decision("approve", by="u")
    load_decisions(state, {"a": decision, "b": decision, "zzz": decision})
    assert state.decisions == {"b": decision}
    answered = LoopState([history[0], Message("tool", [_ran(_request(b)).block(), _ran(_request(a)).block()])])
    load_decisions(answered, {"a": decision, "b": decision})
    assert answered.decisions == {}


def test_a_chain_without_the_human_in_the_loop_slot_refuses_a_loop_with_decisions() -> None:
    with_decisions = LoopState([], decisions={"a": _decision("reject")})
    require_decisions_applied(default_chain(["ls"]), with_decisions)
    require_decisions_applied(Chain([]), LoopState([]))
    with pytest.raises(UnappliedDecisions) as raised:
        require_decisions_applied(default_chain(["ls"], overrides={"human_in_the_loop": None}), with_decisions)
    assert str(raised.value) == (
        "the run has human decisions to apply but its middleware stack has no human_in_the_loop slot; "
        "switch interrupts off with HANGO_INTERRUPTS_ENABLED=false instead of removing the slot"
    )
