"""A custom tool: ``open_ticket`` files a ticket in the agent's memory, under ``/memories/tickets/``.

Register it on the API and on every worker (both read ``TOOLS`` from the module), from the repository root::

    PYTHONPATH=. HANGO_TOOL_MODULES=examples.tools.tickets hango standalone

A tool is a typed value: a name, a description the model reads, a JSON Schema its arguments are checked against
before the handler runs, and the handler. Two declarations matter to reviewers:

- ``writes=True``: the tool changes something that outlasts the call. Saving an agent that names it without an
  interrupt rule answers with a warning, since its calls would run without review.
- ``idempotent=True``: running it again after a worker died mid-call is safe. It is here, because the ticket is
  written through the run's filesystem view and so commits with the call's result; a tool that calls another system
  would pass ``context.idempotency_key`` on to it instead.

A handler's ``ToolError`` becomes an error result the model reads (and can recover from), and so does a write over
the byte budgets (``HANGO_MAX_FILE_BYTES`` and the others), checked as ``write_file`` checks them.
"""

from __future__ import annotations

import re
from typing import Any

from hango.agent.tools.base import Tool, ToolContext, ToolError
from hango.agent.tools.filesystem import plan_write

TICKETS = "/memories/tickets/"
PRIORITIES = ["low", "normal", "high"]


def _open_ticket(context: ToolContext, args: dict[str, Any]) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", args["title"].lower()).strip("-")[:60]
    if not slug:
        raise ToolError("the title needs at least one letter or digit")
    path = f"{TICKETS}{slug}.md"
    if context.files.read(path) is not None:
        raise ToolError(f"a ticket {path} is already open; read it, or choose another title")
    text = f"# {args['title']}\n\npriority: {args['priority']}\n\n{args['body']}\n"
    # Planned as write_file plans a write: the same per-file and storage budgets apply.
    change = plan_write(context.files, context.limits, {"file_path": path, "content": text})
    context.files.write(change.path, change.after)
    return f"opened {change.path}"


OPEN_TICKET = Tool(
    name="open_ticket",
    description=(
        "Open a ticket for work a person has to do. It is saved as a Markdown file under /memories/tickets/, "
        "which you can list and read later."
    ),
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "One line."},
            "body": {"type": "string", "maxLength": 4000, "description": "What is to be done, and why."},
            "priority": {"enum": PRIORITIES, "default": "normal"},
        },
        "required": ["title", "body"],
        "additionalProperties": False,
    },
    handler=_open_ticket,
    writes=True,
    idempotent=True,
)

TOOLS = [OPEN_TICKET]
