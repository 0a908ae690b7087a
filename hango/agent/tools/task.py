"""The ``task`` tool: delegate a piece of work to a subagent, which runs as a child loop of the same run."""

from __future__ import annotations

from typing import Any, Protocol

from hango.agent.tools.base import Tool, ToolContext, ToolError

RUNNER_KEY = "subagents"
GENERAL_PURPOSE = "general-purpose"


class SubagentRunner(Protocol):
    """Runs (or resumes) the child loop of one ``task`` call and returns its final text."""

    def __call__(self, tool_call_id: str, subagent_type: str, description: str) -> str:
        """Raise :class:`ToolError` for an unusable request, or the loop's ``SuspendBatch`` when the child waits."""
        ...


def _task(context: ToolContext, args: dict[str, Any]) -> str:
    runner: SubagentRunner | None = context.extras.get(RUNNER_KEY)
    if runner is None:
        raise ToolError("subagents are not available in this context")
    return runner(context.tool_call_id, args["subagent_type"], args["description"])


TASK_TOOL_NAME = "task"
TASK_TOOL = Tool(
    name=TASK_TOOL_NAME,
    description=(
        "Delegate a self-contained piece of work to a subagent and get its final answer back. "
        f"subagent_type is one of the agent's declared subagents, or '{GENERAL_PURPOSE}' (same tools and prompt "
        "as you). description must say everything the subagent needs: it sees nothing of this conversation. "
        "Several task calls in one turn run as one batch."
    ),
    parameters={
        "type": "object",
        "properties": {
            "subagent_type": {"type": "string", "minLength": 1},
            "description": {"type": "string", "minLength": 1},
        },
        "required": ["subagent_type", "description"],
        "additionalProperties": False,
    },
    handler=_task,
    delegates=True,
    # Running it again resumes the child loop where it stopped: its own calls carry their own guarantees.
    idempotent=True,
)
