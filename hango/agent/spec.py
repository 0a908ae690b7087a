"""An agent's configuration as one typed value, and the snapshot a run keeps of it.

A run is judged for its whole life by the configuration its agent had when the run was created, kept as JSON in
``runs.agent_snapshot`` (:func:`snapshot`), whatever later edits do to the agent. Every reader — the worker's loops
and subagents, the decision service, the grants service, the interrupt rule sets — reads it once into an
:class:`AgentSpec` (:meth:`AgentSpec.of_snapshot`, or :meth:`AgentSpec.of_agent` for an agent as it stands), so
the snapshot's keys are spelled here and nowhere else.

A snapshot is read as leniently as it was before this type existed: a missing key takes its default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hango.kernel.models import Agent

# The agent's columns a snapshot copies, besides its id.
SNAPSHOT_FIELDS = (
    "name",
    "system_prompt",
    "model",
    "tools",
    "interrupt_on",
    "subagents",
    "max_turns",
    "max_tokens",
    "history",
)
DEFAULT_MAX_TURNS = 50


@dataclass(frozen=True)
class SubagentSpec:
    """A declared subagent the model may delegate to through the ``task`` tool."""

    name: str
    system_prompt: str = ""
    model: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    # None: the rules of the loop that starts it.
    interrupt_on: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> SubagentSpec:
        """A declared subagent as the configuration stores it."""
        return cls(
            name=item.get("name") or "",
            system_prompt=item.get("system_prompt") or "",
            model=item.get("model") or {},
            tools=tuple(item.get("tools") or ()),
            interrupt_on=item.get("interrupt_on"),
        )


@dataclass(frozen=True)
class AgentSpec:
    """An agent's configuration: its model, prompt, tools, interrupt rules, subagents and limits."""

    name: str = ""
    system_prompt: str = ""
    model: Mapping[str, Any] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    interrupt_on: Mapping[str, Any] | None = None
    subagents: tuple[SubagentSpec, ...] = ()
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int | None = None
    # How many of a thread's last messages the model sees (``history.max_messages``); ``None``: all of them.
    history_window: int | None = None

    @classmethod
    def of_snapshot(cls, snapshot: Mapping[str, Any]) -> AgentSpec:
        """The configuration a run keeps (``runs.agent_snapshot``), or any configuration of the same shape."""
        return cls(
            name=snapshot.get("name") or "",
            system_prompt=snapshot.get("system_prompt") or "",
            model=snapshot.get("model") or {},
            tools=tuple(snapshot.get("tools") or ()),
            interrupt_on=snapshot.get("interrupt_on"),
            subagents=tuple(SubagentSpec.of(item) for item in snapshot.get("subagents") or ()),
            max_turns=int(snapshot.get("max_turns") or DEFAULT_MAX_TURNS),
            max_tokens=snapshot.get("max_tokens"),
            history_window=(snapshot.get("history") or {}).get("max_messages"),
        )

    @classmethod
    def of_agent(cls, agent: Agent) -> AgentSpec:
        """An agent's configuration as it stands."""
        return cls.of_snapshot(snapshot(agent))

    def all_tools(self) -> list[str]:
        """Every tool name the agent and its subagents name, the agent's first."""
        return [*self.tools, *(name for subagent in self.subagents for name in subagent.tools)]

    def subagent(self, name: str) -> SubagentSpec | None:
        """The declared subagent of that name, if any."""
        return next((item for item in self.subagents if item.name == name), None)

    def loop_rules(self, lineage: Sequence[str]) -> Mapping[str, Any] | None:
        """The ``interrupt_on`` a loop applies, for the subagent types from the top loop's child down to it: a
        declared subagent's own rules when it has them, else its parent loop's (``general-purpose`` declares
        none)."""
        rules = self.interrupt_on
        for kind in lineage:
            declared = self.subagent(kind)
            if declared is not None and declared.interrupt_on is not None:
                rules = declared.interrupt_on
        return rules


@dataclass(frozen=True)
class LoopSpec:
    """What a loop is made of: the parts of an agent (or subagent) configuration the loop needs."""

    system_prompt: str
    model: Mapping[str, Any]
    tools: tuple[str, ...]
    interrupt_on: Mapping[str, Any] | None
    max_turns: int
    max_tokens: int | None = None
    replays_parent: bool = False
    name: str = ""
    history_window: int | None = None

    @classmethod
    def of_agent(cls, agent: AgentSpec) -> LoopSpec:
        """The spec of a run's own loop."""
        return cls(
            system_prompt=agent.system_prompt,
            model=agent.model,
            tools=agent.tools,
            interrupt_on=agent.interrupt_on,
            max_turns=agent.max_turns,
            max_tokens=agent.max_tokens,
            name=agent.name,
            history_window=agent.history_window,
        )

    def of_subagent(self, subagent: SubagentSpec) -> LoopSpec:
        """The spec of a declared subagent's loop, started by this one: its own rules, else this loop's."""
        own = subagent.interrupt_on
        return replace(
            self,
            system_prompt=subagent.system_prompt,
            model=subagent.model,
            tools=subagent.tools,
            interrupt_on=self.interrupt_on if own is None else own,
            name=subagent.name,
            history_window=None,  # a child sees its own conversation, whole
        )


def snapshot(agent: Agent) -> dict[str, Any]:
    """The configuration a run is judged by for its whole life, as ``runs.agent_snapshot`` stores it."""
    return {name: getattr(agent, name) for name in SNAPSHOT_FIELDS} | {"id": str(agent.id)}
