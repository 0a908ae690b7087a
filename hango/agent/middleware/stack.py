"""The default middleware stack: named slots in a pinned order (first = outermost)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hango.agent.interrupts import compile_rules
from hango.agent.middleware.allowlist import ToolAllowlist
from hango.agent.middleware.base import Chain, Middleware
from hango.agent.middleware.hitl import HumanInTheLoop
from hango.agent.middleware.memory import Memory
from hango.agent.middleware.metrics import Metrics
from hango.agent.middleware.repair import RepairToolCalls
from hango.agent.middleware.tracing import Tracing
from hango.agent.tools.task import TASK_TOOL_NAME

# The order matters and a test pins it. Tracing is outermost so its spans cover every inner layer. Repair's
# before_run comes next so every later hook sees a valid history. Memory
# shapes the prompt. Human-in-the-loop sits after Memory and before the allowlist, so the allowlist stays the
# innermost guard: no decision, not even an approval, can run a tool the agent is not allowed. In the plan phase
# the HITL middleware asks the inner layers first and never suspends a call they would refuse anyway. Metrics sits
# inside the guards, so it times only what the model and the tools themselves take.
SLOTS: tuple[str, ...] = (
    "tracing",
    "repair_tool_calls",
    "memory",
    "human_in_the_loop",
    "tool_allowlist",
    "metrics",
)


def default_middlewares(
    tools: Iterable[str],
    interrupt_on: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Middleware | None] | None = None,
    model: Mapping[str, Any] | None = None,
    *,
    interrupts: bool = True,
    mcp_defaults: Mapping[str, Any] | None = None,
) -> list[Middleware]:
    """The default stack for an agent allowed ``tools`` with its ``interrupt_on`` configuration.

    ``interrupts=False`` (``HANGO_INTERRUPTS_ENABLED=false``) is how interrupts are switched off: the
    human-in-the-loop slot stays and still applies stored decisions, it only stops raising new interrupts.
    ``mcp_defaults`` are the default rules of the run's pinned MCP tools (:func:`hango.agent.mcp.default_rules`).
    ``overrides`` replaces or empties slots by name. Emptying ``human_in_the_loop`` also drops the application of
    stored decisions, so it is only for loops that can have none; the worker never does it, and a worker's loop
    that carries decisions refuses a chain without the slot (``hango.run.loops``).
    """
    slots: dict[str, Middleware | None] = {
        "tracing": Tracing(dict(model or {})),
        "repair_tool_calls": RepairToolCalls(resumable=[TASK_TOOL_NAME]),
        "memory": Memory(),
        "human_in_the_loop": HumanInTheLoop(compile_rules(interrupt_on, mcp_defaults), interrupts=interrupts),
        "tool_allowlist": ToolAllowlist(tools),
        "metrics": Metrics(str((model or {}).get("provider", ""))),
    }
    for name, middleware in (overrides or {}).items():
        if name not in slots:
            raise KeyError(f"no middleware slot named {name!r}; slots are {', '.join(SLOTS)}")
        slots[name] = middleware
    return [middleware for name in SLOTS if (middleware := slots[name]) is not None]


def default_chain(
    tools: Iterable[str],
    interrupt_on: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Middleware | None] | None = None,
    model: Mapping[str, Any] | None = None,
    *,
    interrupts: bool = True,
    mcp_defaults: Mapping[str, Any] | None = None,
) -> Chain:
    """The default stack as a chain."""
    return Chain(
        default_middlewares(tools, interrupt_on, overrides, model, interrupts=interrupts, mcp_defaults=mcp_defaults)
    )
