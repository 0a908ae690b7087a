"""Agent services: create, read, list and replace agent definitions (owners and admins write)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hango.agent.interrupts import (
    MAX_RULE_TTL,
    Override,
    RuleWarning,
    canonical_rules,
    config_overrides,
    rule_warnings,
    validate_rules,
)
from hango.agent.mcp import (
    MAX_TOOL_NAME,
    WILDCARD,
    PinnedTool,
    default_rules,
    is_mcp_name,
    parse_name,
    selects,
    servers_named,
    waiting_rule,
)
from hango.agent.models.factory import missing_sdk
from hango.agent.spec import SNAPSHOT_FIELDS, AgentSpec
from hango.agent.tools.base import ToolRegistry
from hango.kernel.auth import Principal
from hango.kernel.errors import Conflict, FieldError, InvalidInput
from hango.kernel.models import Agent
from hango.kernel.pagination import Page, PageRequest
from hango.mcp.client import McpUnavailable
from hango.platform.db import Database
from hango.platform.runtime import Runtime
from hango.run.mcp_tools import find_server
from hango.services.tenancy import require_manager
from hango.store import agents as agent_store
from hango.store import mcp_servers as server_store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedAgent:
    """An agent just created or replaced, and what its rules no longer cover, for whoever saved it."""

    agent: Agent
    warnings: list[RuleWarning]


def check_references(config: dict[str, Any], tools: ToolRegistry, servers: Collection[str] = ()) -> None:
    """Every tool an agent or subagent names must be registered, or be a tool of a configured MCP server
    (``servers``, the operator's and the tenant's), and every model's SDK installed here: each unknown tool or
    server and each provider whose SDK is missing is a 400 naming the field (and the extra to install)."""
    known = tools.names()
    errors = [
        FieldError(field, problem)
        for field, name in _named_tools(config)
        if (problem := _tool_problem(name, known, servers)) is not None
    ]
    errors += _model_errors(config)
    if errors:
        raise InvalidInput.of(errors)


def _named_tools(config: dict[str, Any]) -> list[tuple[str, str]]:
    """Every tool the configuration names, with its field: the agent's, then each subagent's."""
    named = [(f"tools[{index}]", name) for index, name in enumerate(config.get("tools", []))]
    for sub_index, subagent in enumerate(config.get("subagents", [])):
        named += [(f"subagents[{sub_index}].tools[{index}]", name) for index, name in enumerate(subagent["tools"])]
    return named


def _tool_problem(name: str, known: Collection[str], servers: Collection[str]) -> str | None:
    if not is_mcp_name(name):
        return None if name in known else f"unknown tool {name!r}"
    parsed = parse_name(name)
    if parsed is None:
        return f"{name!r} is not an MCP tool name: use mcp__<server>__<tool> or mcp__<server>__*"
    if parsed.server not in servers:
        return f"unknown MCP server {parsed.server!r}: add it first (GET /v1/mcp-servers lists those configured)"
    if len(name) > MAX_TOOL_NAME:
        return f"{name!r} is longer than {MAX_TOOL_NAME} characters, which model providers refuse"
    return None


def known_servers(db: Database, tenant_id: uuid.UUID, config: dict[str, Any], operator: Collection[str]) -> set[str]:
    """The servers the configuration may name as things stand: the operator's, and those of the tenant's it names
    (:func:`check_servers` asks again, holding them, in the transaction that saves the agent)."""
    with db.transaction() as session:
        return set(operator) | server_store.existing_names(session, tenant_id, _tenant_servers(config, operator))


def _tenant_servers(config: dict[str, Any], operator: Collection[str]) -> set[str]:
    return set(servers_named(AgentSpec.of_snapshot(config).all_tools())) - set(operator)


def check_servers(session: Session, tenant_id: uuid.UUID, config: dict[str, Any], operator: Collection[str]) -> None:
    """Every MCP server the configuration names must be the operator's or the tenant's; the tenant's are held
    ``FOR SHARE`` until the agent is saved, so a deletion of one cannot slip in between (it waits, then sees the
    agent and refuses).

    Raises:
        InvalidInput: naming each ``tools`` entry whose server is unknown.
    """
    known = set(operator) | server_store.existing_names(
        session, tenant_id, _tenant_servers(config, operator), share=True
    )
    errors = [
        FieldError(field, problem)
        for field, name in _named_tools(config)
        if is_mcp_name(name) and (problem := _tool_problem(name, (), known)) is not None
    ]
    if errors:
        raise InvalidInput.of(errors)


def _model_errors(config: dict[str, Any]) -> list[FieldError]:
    # Refused at save time: a run of such an agent could only fail, and only once a run tried it.
    models = [("model.provider", config["model"])]
    models += [
        (f"subagents[{index}].model.provider", subagent["model"])
        for index, subagent in enumerate(config.get("subagents", []))
    ]
    errors = []
    for field, model in models:
        problem = missing_sdk(model["provider"])
        if problem is not None:
            errors.append(FieldError(field, problem))
    return errors


def check_interrupts(config: dict[str, Any], max_ttl: timedelta = MAX_RULE_TTL) -> dict[str, Any]:
    """The configuration with its interrupt rules, the agent's and each subagent's, in their canonical form
    (:func:`~hango.agent.interrupts.canonical_rules`). Malformed rules are a 400 at save time; a rule's deadline
    may be at most ``max_ttl`` (``HANGO_APPROVAL_MAX_TTL``)."""
    validate_rules(config.get("interrupt_on"), max_ttl=max_ttl)
    for index, subagent in enumerate(config.get("subagents", [])):
        validate_rules(subagent.get("interrupt_on"), f"subagents[{index}].interrupt_on", max_ttl=max_ttl)
    subagents = [
        {**subagent, "interrupt_on": canonical_rules(subagent["interrupt_on"])}
        if "interrupt_on" in subagent
        else subagent
        for subagent in config.get("subagents", [])
    ]
    canonical = dict(config)
    if "interrupt_on" in config:
        canonical["interrupt_on"] = canonical_rules(config["interrupt_on"])
    if "subagents" in config:
        canonical["subagents"] = subagents
    return canonical


def log_overrides(agent: Agent) -> list[Override]:
    """Log every default interrupt rule the agent or one of its subagents replaces or removes, for the audit."""
    overrides = config_overrides(AgentSpec.of_agent(agent))
    for override in overrides:
        log.warning(
            "agent overrides a default interrupt rule",
            extra={
                "agent_id": str(agent.id),
                "tenant_id": str(agent.tenant_id),
                "tool": override.tool,
                "rule": override.rule,
                "subagent": override.subagent,
            },
        )
    return overrides


def create_agent(
    db: Database,
    tools: ToolRegistry,
    principal: Principal,
    config: dict[str, Any],
    *,
    max_ttl: timedelta = MAX_RULE_TTL,
    operator_servers: Collection[str] = (),
) -> SavedAgent:
    """Create an agent from a validated configuration."""
    require_manager(principal)
    check_references(config, tools, known_servers(db, principal.tenant_id, config, operator_servers))
    config = check_interrupts(config, max_ttl)
    agent = Agent(id=uuid.uuid4(), tenant_id=principal.tenant_id, created_by=principal.user_id, **config)
    try:
        with db.transaction() as session:
            check_servers(session, principal.tenant_id, config, operator_servers)
            session.add(agent)
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"an agent named {config['name']!r} already exists") from exc
    return SavedAgent(agent, save_warnings(config, tools))


def replace_agent(
    db: Database,
    tools: ToolRegistry,
    principal: Principal,
    agent_id: uuid.UUID,
    config: dict[str, Any],
    *,
    max_ttl: timedelta = MAX_RULE_TTL,
    operator_servers: Collection[str] = (),
) -> SavedAgent:
    """Replace an agent's whole configuration; runs already created keep their snapshot."""
    require_manager(principal)
    check_references(config, tools, known_servers(db, principal.tenant_id, config, operator_servers))
    config = check_interrupts(config, max_ttl)
    try:
        with db.transaction() as session:
            agent = agent_store.get_agent(session, principal.tenant_id, agent_id, for_update=True)
            check_servers(session, principal.tenant_id, config, operator_servers)
            for field in SNAPSHOT_FIELDS:
                setattr(agent, field, config[field])
            agent.updated_at = datetime.now(UTC)
            session.flush()
    except IntegrityError as exc:
        raise Conflict(f"an agent named {config['name']!r} already exists") from exc
    return SavedAgent(agent, save_warnings(config, tools))


def save_warnings(config: dict[str, Any], tools: ToolRegistry) -> list[RuleWarning]:
    """What a valid configuration's rules no longer cover (:func:`~hango.agent.interrupts.rule_warnings`), judged
    by the tools registered here."""
    return rule_warnings(AgentSpec.of_snapshot(config), tools.writers())


def get_agent(db: Database, principal: Principal, agent_id: uuid.UUID) -> Agent:
    """An agent of the caller's tenant."""
    with db.transaction() as session:
        return agent_store.get_agent(session, principal.tenant_id, agent_id)


def list_agents(db: Database, principal: Principal, page: PageRequest) -> Page[Agent]:
    """The tenant's agents, oldest first."""
    with db.transaction() as session:
        return agent_store.list_agents(session, principal.tenant_id, page)


# How long an agent's shown rules may rely on a server's tool list (or its failure to answer).
LISTING_MAX_AGE = 30.0


def mcp_default_rules(runtime: Runtime, tenant_id: uuid.UUID, agent: AgentSpec) -> dict[str, Any]:
    """The default rules of the MCP tools an agent names whose calls wait by default, by hango name, as its
    ``effective_interrupt_on`` shows them.

    An untrusted server's tools all wait, so naming them is enough; a trusted server's tools are listed (recently
    listed will do) to see which say they only read. A server that cannot be listed shows every name the agent
    gives it, its ``mcp__<server>__*`` included, as waiting: what a run will do is decided at its first step.
    """
    names = agent.all_tools()
    rules: dict[str, Any] = {}
    for server in servers_named(names):
        given = [name for name in names if (parsed := parse_name(name)) is not None and parsed.server == server]
        spec = find_server(runtime, tenant_id, server)
        if spec is not None and (spec.trusted or any(name.endswith(f"__{WILDCARD}") for name in given)):
            try:
                listed = runtime.mcp.recent_tools(tenant_id, spec, LISTING_MAX_AGE)
            except McpUnavailable:
                pass
            else:
                pinned = [PinnedTool.of_listing(server, tool, trusted=spec.trusted) for tool in listed]
                rules |= default_rules(tool for tool in pinned if selects(names, tool.hango_name))
                continue
        reason = "is not trusted" if spec is not None and not spec.trusted else "could not be listed"
        rules |= dict.fromkeys(given, waiting_rule(server, reason))
    return rules
