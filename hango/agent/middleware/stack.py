"""The default middleware stack: named slots in a pinned order (first = outermost)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hango.agent.middleware.allowlist import ToolAllowlist
from hango.agent.middleware.base import Chain, Middleware
from hango.agent.middleware.memory import Memory
from hango.agent.middleware.repair import RepairToolCalls

# The order matters and a test pins it. Repair runs first so every later hook sees a valid history. Memory
# shapes the prompt. Human-in-the-loop sits after Memory and before the allowlist: an interrupt rule must see
# only calls the agent is allowed to make, and a refused call must never wait for a human.
SLOTS: tuple[str, ...] = ("repair_tool_calls", "memory", "human_in_the_loop", "tool_allowlist")


def default_middlewares(
    tools: Iterable[str], overrides: Mapping[str, Middleware | None] | None = None
) -> list[Middleware]:
    """The default stack for an agent allowed ``tools``; ``overrides`` fills or empties slots by name."""
    slots: dict[str, Middleware | None] = {
        "repair_tool_calls": RepairToolCalls(),
        "memory": Memory(),
        "human_in_the_loop": None,
        "tool_allowlist": ToolAllowlist(tools),
    }
    for name, middleware in (overrides or {}).items():
        if name not in slots:
            raise KeyError(f"no middleware slot named {name!r}; slots are {', '.join(SLOTS)}")
        slots[name] = middleware
    return [middleware for name in SLOTS if (middleware := slots[name]) is not None]


def default_chain(tools: Iterable[str], overrides: Mapping[str, Middleware | None] | None = None) -> Chain:
    """The default stack as a chain."""
    return Chain(default_middlewares(tools, overrides))
