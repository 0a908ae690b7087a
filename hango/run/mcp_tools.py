"""A run's MCP tools in the worker: pinned at the run's first step, sent to their servers, refused on drift.

**Pinning.** At a run's first step the worker lists, for every server the agent (or one of its subagents) names,
the tools it names, and stores their definitions with the run (``runs.mcp_tools``, under the run's lease). The model
sees those for the whole run, a resume included; a server that cannot be listed then fails the run with an error
naming it.

**Calls.** A call goes to the server as it is configured now (the operator's file, or the tenant's row). Before
it is sent, the server must still list the tool with the pinned ``definition_sha256``; otherwise nothing is sent,
the call's result is the error :data:`DRIFT_ERROR`, and ``mcp.definition_changed`` is audited. The check holds for
every call, not only approved ones: a trusted server's read-only tool that stops saying so no longer runs unreviewed
under the old definition. An approved call carries its approval id as ``_meta["io.hango/idempotency-key"]``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from hango.agent.loop import RunStopped
from hango.agent.mcp import MAX_TOOL_NAME, PinnedTool, definition_sha256, parse_name, pinned_of, selects, servers_named
from hango.agent.spec import AgentSpec
from hango.agent.tools.base import ToolContext, ToolError
from hango.kernel.errors import HangoError
from hango.kernel.models import Run
from hango.kernel.secret_box import SecretBox
from hango.mcp.client import McpUnavailable
from hango.mcp.config import ServerSpec
from hango.platform.runtime import Runtime
from hango.platform.work import unit_of_work
from hango.run.transitions import Lease
from hango.store import mcp_servers as server_store
from hango.store import runs as run_store
from hango.store.audit import AuditRecord, insert_audit_events

log = logging.getLogger(__name__)
DRIFT_ERROR = "tool definition changed since it was approved"


class PinFailed(HangoError):
    """A server the agent names could not be listed at the run's first step; the run fails with this message."""


def pinned_tools(runtime: Runtime, run: Run, lease: Lease, agent: AgentSpec) -> dict[str, PinnedTool]:
    """The run's pinned MCP tools by hango name: those it stored, or, at its first step, those listed now and
    stored under its lease.

    Raises:
        PinFailed: a named server is not configured, or cannot be listed.
        RunStopped: the run is no longer this worker's.
    """
    if run.mcp_tools is not None:
        return pinned_of(run.mcp_tools)
    names = agent.all_tools()
    servers = servers_named(names)
    if not servers:
        return {}
    selected = [
        tool
        for server in servers
        for tool in _listed(runtime, run.tenant_id, server)
        if selects(names, tool.hango_name)
    ]
    # A wildcard may take a tool whose name, with its server's, is longer than model providers accept.
    pinned = [tool for tool in selected if len(tool.hango_name) <= MAX_TOOL_NAME]
    if len(pinned) < len(selected):
        skipped = [tool.hango_name for tool in selected if len(tool.hango_name) > MAX_TOOL_NAME]
        log.warning("mcp tools left out: names over 64 characters", extra={"run_id": str(run.id), "tools": skipped})
    stored = [tool.to_json() for tool in pinned]
    with unit_of_work(runtime) as work:
        if run_store.advance(work.session, run.id, lease.owner, {"mcp_tools": stored}) is None:
            raise RunStopped(f"run {run.id} is no longer running under this worker")
    run.mcp_tools = stored
    log.info("mcp tools pinned", extra={"run_id": str(run.id), "tools": [tool.hango_name for tool in pinned]})
    return {tool.hango_name: tool for tool in pinned}


def _listed(runtime: Runtime, tenant_id: uuid.UUID, server: str) -> list[PinnedTool]:
    spec = find_server(runtime, tenant_id, server)
    if spec is None:
        raise PinFailed(f"MCP server {server} is not configured")
    try:
        listed = runtime.mcp.list_tools(tenant_id, spec)
    except McpUnavailable as exc:
        raise PinFailed(f"{exc}; the run's tools could not be listed") from None
    return [PinnedTool.of_listing(server, tool, trusted=spec.trusted) for tool in listed]


def find_server(runtime: Runtime, tenant_id: uuid.UUID, name: str) -> ServerSpec | None:
    """The server of that name as configured now: the operator's, else the tenant's."""
    if name in runtime.mcp.operator:
        return runtime.mcp.operator[name]
    with runtime.db.transaction() as session:
        box = SecretBox(runtime.settings.webhook_secret_keys)
        return server_store.find_server(session, tenant_id, name, runtime.mcp.operator, box)


class McpCalls:
    """Sends a run's MCP calls (the :data:`hango.agent.tools.mcp.McpCaller` of its worker)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def __call__(self, pinned: PinnedTool, context: ToolContext, arguments: dict[str, Any]) -> str:
        """Check the definition, send the call, and give its result text; an error result as :class:`ToolError`."""
        runtime = self._runtime
        started = time.monotonic()
        # The check and the call share the call's budget (HANGO_TOOL_TIMEOUT): the batch's transaction waits on both.
        limit = context.limits.timeout
        server = find_server(runtime, context.tenant_id, pinned.server)
        if server is None:
            raise ToolError(f"MCP server {pinned.server} is no longer configured")
        try:
            current = runtime.mcp.list_tools(context.tenant_id, server, timeout=limit)
        except McpUnavailable as exc:
            raise ToolError(str(exc)) from None
        if _digest_of(current, pinned.name) != pinned.definition_sha256:
            self._drifted(pinned, context)
            raise ToolError(DRIFT_ERROR)
        outcome = runtime.mcp.call_tool(
            context.tenant_id,
            server,
            pinned.name,
            arguments,
            timeout=max(limit - (time.monotonic() - started), 0.1),
            idempotency_key=context.idempotency_key,
        )
        log.info(
            "mcp tool call",
            extra={
                "mcp_server": pinned.server,
                "tool": pinned.hango_name,
                "tool_call_id": context.tool_call_id,
                "approval_id": context.idempotency_key,
                "is_error": outcome.is_error,
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        if outcome.is_error:
            raise ToolError(outcome.text)
        return outcome.text

    def _drifted(self, pinned: PinnedTool, context: ToolContext) -> None:
        log.warning(
            "mcp tool definition changed; the call was not sent",
            extra={"mcp_server": pinned.server, "tool": pinned.hango_name, "tool_call_id": context.tool_call_id},
        )
        record = AuditRecord(
            tenant_id=context.tenant_id,
            actor_kind="system",
            actor_id=None,
            action="mcp.definition_changed",
            target_kind="run",
            target_id=str(context.run_id),
            outcome="denied",
            detail={
                "server": pinned.server,
                "tool": pinned.hango_name,
                "tool_call_id": context.tool_call_id,
                "approval_id": context.idempotency_key,
                "definition_sha256": pinned.definition_sha256,
            },
        )
        # Its own transaction: the refusal stays audited whatever becomes of the batch.
        with self._runtime.db.transaction() as session:
            insert_audit_events(session, [record])


def _digest_of(listed: Sequence[dict[str, Any]], name: str) -> str | None:
    found = next((tool for tool in listed if tool.get("name") == name), None)
    return definition_sha256(found) if found is not None else None


def expand_tools(names: Sequence[str], pinned: dict[str, PinnedTool]) -> tuple[str, ...]:
    """A loop's tool names with each ``mcp__<server>__*`` replaced by that server's pinned tools, and MCP names the
    run did not pin left out."""
    expanded: dict[str, None] = {}
    for name in names:
        parsed = parse_name(name)
        if parsed is None:
            expanded.setdefault(name)
        elif parsed.wildcard:
            for tool in sorted(tool for tool in pinned if parse_name(tool) and tool.startswith(name[:-1])):
                expanded.setdefault(tool)
        elif name in pinned:
            expanded.setdefault(name)
    return tuple(expanded)
