"""The tool type, its execution context, argument validation and the registry."""

from __future__ import annotations

import importlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from jsonschema import Draft202012Validator
from sqlalchemy.exc import SQLAlchemyError

from hango.agent import deadline
from hango.agent.files import FileSystem
from hango.agent.messages import ToolCall, ToolResult
from hango.agent.models.base import ToolSpec
from hango.kernel.config import Settings
from hango.kernel.errors import HangoError

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "hango.tools"


class ToolError(HangoError):
    """A failure the model should read as an error result (file not found, ambiguous edit...)."""


class ToolSignal(HangoError):
    """Raised by a tool to steer the loop (a child waiting for a human); never turned into a result."""


class ToolTimeout(HangoError):
    """A call ran past its deadline; the loop undoes its changes (its savepoint) and answers with this message."""


@dataclass(frozen=True)
class ToolLimits:
    """The budgets every tool call meets (api.md "Tool budgets"); each one is a setting."""

    max_file_bytes: int
    max_run_storage_bytes: int
    max_agent_storage_bytes: int
    timeout: float

    @classmethod
    def of(cls, settings: Settings) -> ToolLimits:
        """The limits these settings set."""
        return cls(
            max_file_bytes=settings.max_file_bytes,
            max_run_storage_bytes=settings.max_run_storage_bytes,
            max_agent_storage_bytes=settings.max_agent_storage_bytes,
            timeout=settings.tool_timeout.total_seconds(),
        )


# The limits of a context built without settings: the settings' own defaults.
DEFAULT_LIMITS = ToolLimits.of(Settings())


@dataclass(frozen=True)
class ToolContext:
    """What a handler may use: the ids of the run it serves, the run's filesystem view and the call's limits."""

    tenant_id: uuid.UUID
    agent_id: uuid.UUID
    run_id: uuid.UUID
    tool_call_id: str
    files: FileSystem
    subagent_call_id: uuid.UUID | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    limits: ToolLimits = DEFAULT_LIMITS
    # The approval id of a call a human (or a standing approval) approved: the same on every execution of that
    # call, so a tool that changes the world outside hango can pass it on (an ``Idempotency-Key`` header, a
    # unique column) and do the work once however often it is asked. ``None`` for a call nobody had to approve.
    idempotency_key: str | None = None


Handler = Callable[[ToolContext, dict[str, Any]], str]


@dataclass(frozen=True)
class Tool:
    """A tool: name, description, JSON Schema parameters and a handler returning the result text.

    A ``delegates`` tool runs a child loop (the ``task`` tool): it runs before the other calls of its batch, may
    suspend the batch from inside the child, and is re-driven rather than repaired after a crash.

    An ``idempotent`` tool may safely run again when a worker died in the middle of an approved call: its effects
    commit with its result (the built-in file tools), or it uses ``ToolContext.idempotency_key``. Any other tool
    that was running when its worker died is not run again; its call is answered "outcome unknown".

    A ``writes`` tool changes something that outlasts its call: a file, a record, the world outside hango. An agent
    that names one which no interrupt rule covers is warned of it when it is saved: its calls run without review.

    An ``own_deadline`` tool keeps the per-call deadline itself (an MCP call, cancelled with the protocol's
    notification and answered as timed out) instead of being interrupted by it. ``shown`` is what a reviewer of
    one of its calls is told about the tool beyond its name (an MCP tool's server, title, annotations and
    definition digest); it is kept with the approval.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    delegates: bool = False
    idempotent: bool = False
    writes: bool = False
    own_deadline: bool = False
    shown: Mapping[str, Any] | None = None

    def spec(self) -> ToolSpec:
        """What the model is told about this tool."""
        return ToolSpec(self.name, self.description, self.parameters)

    def with_defaults(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the handler reads them: each top-level ``default`` of the schema filled in where the
        call gives no value."""
        properties = self.parameters.get("properties") or {}
        defaults = {
            name: schema["default"]
            for name, schema in properties.items()
            if isinstance(schema, Mapping) and "default" in schema and name not in args
        }
        return {**args, **defaults}

    def argument_errors(self, args: Any) -> list[tuple[str, str]]:
        """``(field, message)`` for every way ``args`` violates the parameters schema; empty when valid."""
        validator = Draft202012Validator(self.parameters)
        errors = sorted(validator.iter_errors(args), key=lambda error: list(error.absolute_path))
        return [(_field(error.absolute_path), error.message) for error in errors]

    def argument_refusal(self, args: Any) -> str | None:
        """The error result a call with ``args`` gets when they violate the parameters schema; ``None`` when valid."""
        errors = self.argument_errors(args)
        if not errors:
            return None
        detail = "; ".join(f"{field or 'arguments'}: {message}" for field, message in errors)
        return f"invalid arguments for {self.name}: {detail}"


def _field(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def execute(tool: Tool, context: ToolContext, call: ToolCall) -> ToolResult:
    """Validate the arguments, run the handler, and turn any failure into an error result the model can read.

    Raises:
        ToolTimeout: when the handler ran past ``context.limits.timeout``; the caller must undo the call's changes.
    """
    refusal = tool.argument_refusal(call.input)
    if refusal is not None:
        return ToolResult(call.id, refusal, is_error=True)
    try:
        return ToolResult(call.id, _run_handler(tool, context, call))
    except ToolError as exc:
        return ToolResult(call.id, str(exc), is_error=True)
    except (ToolSignal, ToolTimeout, SQLAlchemyError):
        # A signal is for the loop; a timeout may have left half a change, and a storage error leaves the batch's
        # transaction unusable: in both cases the loop must roll back this call's savepoint.
        raise
    except Exception as exc:  # a tool is a boundary: its bug must not kill the run
        log.exception("tool %s failed", tool.name, extra={"tool": tool.name, "tool_call_id": call.id})
        return ToolResult(call.id, f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)


def _run_handler(tool: Tool, context: ToolContext, call: ToolCall) -> str:
    """The handler's result, under the per-call deadline unless the tool delegates.

    A delegating tool runs a whole child loop, whose own tool calls each get their deadline.
    """
    # The handler reads its schema's defaults from the arguments: what an exact standing approval pins
    # (``hango.agent.grant_terms.exact_call``) is then what the tool reads, whatever default its code would have
    # assumed.
    arguments = tool.with_defaults(call.input)
    if tool.delegates or tool.own_deadline:
        return tool.handler(context, arguments)
    limit = context.limits.timeout
    try:
        with deadline.within(limit):
            return tool.handler(context, arguments)
    except deadline.DeadlineExceeded:
        raise ToolTimeout(
            f"{tool.name} did not finish within {limit:g}s, the limit per tool call (HANGO_TOOL_TIMEOUT), and "
            "was stopped; its changes were undone. Narrow the call (a smaller path, a simpler pattern) or split "
            "the work."
        ) from None


class ToolRegistry:
    """Tools by name: the built-ins, the ``hango.tools`` entry points and any configured modules."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register a tool; a second tool with the same name replaces the first (logged)."""
        if tool.name in self._tools:
            log.warning("tool %s registered twice; the later one wins", tool.name)
        self._tools[tool.name] = tool

    def extended(self, tools: Iterable[Tool]) -> ToolRegistry:
        """A new registry with these tools and ``tools`` (a run's pinned MCP tools); this one is unchanged."""
        return ToolRegistry([*self._tools.values(), *tools])

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, if registered."""
        return self._tools.get(name)

    def names(self) -> set[str]:
        """Every registered tool name."""
        return set(self._tools)

    def writers(self) -> set[str]:
        """The names of the registered tools that say they write."""
        return {name for name, tool in self._tools.items() if tool.writes}

    def load_entry_points(self) -> None:
        """Add the tools third-party packages publish under the ``hango.tools`` entry-point group."""
        for entry_point in entry_points(group=ENTRY_POINT_GROUP):
            self._add_loaded(entry_point.load(), entry_point.name)

    def load_modules(self, modules: Iterable[str]) -> None:
        """Add the tools of modules named in settings; each module exposes ``TOOLS``, a list of :class:`Tool`."""
        for module_name in modules:
            self._add_loaded(getattr(importlib.import_module(module_name), "TOOLS", []), module_name)

    def _add_loaded(self, loaded: Any, origin: str) -> None:
        if callable(loaded) and not isinstance(loaded, Tool):
            loaded = loaded()
        for tool in loaded if isinstance(loaded, list | tuple) else [loaded]:
            if not isinstance(tool, Tool):
                raise TypeError(f"{origin} provided {tool!r}, not a hango Tool")
            self.add(tool)
