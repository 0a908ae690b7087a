"""Memory: the agent's ``/memories/AGENTS.md`` injected into the system prompt of every model call."""

from __future__ import annotations

import dataclasses

from hango.agent.messages import AssistantTurn
from hango.agent.middleware.base import Middleware, ModelCall, ModelHandler

MEMORY_PATH = "/memories/AGENTS.md"


class Memory(Middleware):
    """Read the memory file fresh for every call, so a write earlier in the run is seen by the next turn."""

    name = "memory"

    def wrap_model_call(self, call: ModelCall, handler: ModelHandler) -> AssistantTurn:
        """Append the memory file, when present, to the system prompt."""
        with call.scope.services.files() as files:
            memory = files.read(MEMORY_PATH)
        if not memory:
            return handler(call)
        section = f'<agent_memory path="{MEMORY_PATH}">\n{memory}\n</agent_memory>'
        system = f"{call.request.system}\n\n{section}" if call.request.system else section
        return handler(dataclasses.replace(call, request=dataclasses.replace(call.request, system=system)))
