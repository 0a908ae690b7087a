"""Agents: create and replace (owner, admin), read (everyone in the tenant)."""

from __future__ import annotations

import uuid
from typing import Any

import marshmallow as ma
from marshmallow import fields

from hango.agent.config import AgentConfig
from hango.agent.interrupts import effective_config
from hango.agent.spec import AgentSpec
from hango.api import examples
from hango.api.audit import audit_target, audited
from hango.api.context import principal, services
from hango.api.parsing import Blueprint
from hango.api.schemas import ListArgs, list_of, page_request
from hango.kernel.models import Agent as AgentRow
from hango.kernel.pagination import Page
from hango.services import agents

blp = Blueprint("agents", __name__, url_prefix="/v1", description="Agent definitions")


class Agent(AgentConfig):
    id = fields.UUID(required=True, metadata={"description": "the agent's id"})
    effective_interrupt_on = fields.Method(
        "_effective", metadata={"description": "every interrupt rule after merging the defaults, true expanded"}
    )
    created_by = fields.UUID(required=True, metadata={"description": "the user who created the agent"})
    created_at = fields.DateTime(required=True, metadata={"description": "when the agent was created"})
    updated_at = fields.DateTime(
        required=True, metadata={"description": "when its configuration was last saved (created or replaced)"}
    )

    def _effective(self, agent: AgentRow | agents.SavedAgent) -> dict[str, Any]:
        row = agent.agent if isinstance(agent, agents.SavedAgent) else agent
        mcp_defaults = agents.mcp_default_rules(services().runtime, row.tenant_id, AgentSpec.of_agent(row))
        return effective_config(row.interrupt_on, mcp_defaults)


AgentList = list_of(Agent, "AgentList")


class RuleWarning(ma.Schema):
    """Something the saved agent's rules no longer cover."""

    tool = fields.String(required=True, metadata={"description": "the tool the warning is about"})
    message = fields.String(
        required=True,
        metadata={
            "description": 'what is no longer interrupted, in words, e.g. "write_file to /memories/ and /skills/ '
            'is no longer interrupted except where file_path equals /memories/q.md"'
        },
    )


class SavedAgent(Agent):
    """An agent as its creation or replacement answers it: with what its rules no longer cover."""

    warnings = fields.List(
        fields.Nested(RuleWarning),
        required=True,
        metadata={
            "description": "one for each default interrupt rule the agent's own entries (or a subagent's own "
            "interrupt_on) replace or lift, and one for each tool it names that can write and that no rule "
            "interrupts; empty when there is nothing to say. The agent is saved all the same."
        },
    )

    def get_attribute(self, obj: agents.SavedAgent, attr: str, default: Any) -> Any:
        """The warnings from the save, every other field from the agent."""
        if attr == "warnings":
            return obj.warnings
        return super().get_attribute(obj.agent, attr, default)


def _audit(saved: agents.SavedAgent) -> agents.SavedAgent:
    agent = saved.agent
    audit_target("agent", agent.id, name=agent.name)
    for override in agents.log_overrides(agent):
        where = {} if override.subagent is None else {"subagent": override.subagent}
        audit_target("agent", agent.id, action="agent.interrupt_default_overridden", tool=override.tool, **where)
    return saved


@blp.route("/agents", methods=["POST"])
@blp.problems(403, 409)
@blp.arguments(AgentConfig, example=examples.AGENT_CONFIG)
@blp.response(201, SavedAgent, example=examples.SAVED_AGENT)
@audited("agent.create", "agent")
def create_agent(body: dict[str, Any]) -> agents.SavedAgent:
    """Create an agent (owner, admin).

    The body is the whole configuration: the model, the prompt, the tools, the interrupt rules and the subagents.
    It is checked completely before anything is stored: an unknown tool or provider, a provider whose SDK is not
    installed, a malformed rule or a deadline over HANGO_APPROVAL_MAX_TTL is a 400 naming each field, and a name
    the tenant already uses a 409. A member gets a 403. The answer shows effective_interrupt_on, the rules after
    merging the defaults, and warnings: what the agent's own rules no longer cover. Audited as agent.create, and
    each rule that replaces or lifts a default rule also as agent.interrupt_default_overridden.
    """
    runtime = services().runtime
    return _audit(
        agents.create_agent(
            runtime.db,
            runtime.tools,
            principal(),
            body,
            max_ttl=runtime.settings.approval_max_ttl,
            operator_servers=runtime.mcp.operator,
        )
    )


@blp.route("/agents", methods=["GET"])
@blp.arguments(ListArgs, location="query")
@blp.response(200, AgentList, example=examples.AGENTS)
def list_agents(args: dict[str, Any]) -> Page[AgentRow]:
    """The tenant's agents.

    Everyone in the tenant may list them, oldest first, a page at a time (?limit=, ?cursor=), each as GET
    /v1/agents/{agent_id} shows it.
    """
    return agents.list_agents(services().db, principal(), page_request(args))


@blp.route("/agents/<uuid:agent_id>", methods=["GET"])
@blp.problems(404)
@blp.response(200, Agent, example=examples.AGENT)
def get_agent(agent_id: uuid.UUID) -> AgentRow:
    """One agent.

    Its configuration as last saved, with effective_interrupt_on. Everyone in the tenant may read it; an agent of
    another tenant is a 404.
    """
    return agents.get_agent(services().db, principal(), agent_id)


@blp.route("/agents/<uuid:agent_id>", methods=["PUT"])
@blp.problems(403, 404, 409)
@blp.arguments(AgentConfig, example=examples.AGENT_CONFIG)
@blp.response(200, SavedAgent, example=examples.SAVED_AGENT)
@audited("agent.replace", "agent", target_arg="agent_id")
def replace_agent(body: dict[str, Any], agent_id: uuid.UUID) -> agents.SavedAgent:
    """Replace an agent's whole configuration (owner, admin); existing runs keep their snapshot.

    The body is the same as for creating one, and replaces everything: a member omitted takes its default. A run
    already created keeps the configuration it started with, its rules included; the next runs use this one. The
    checks, refusals and warnings are those of POST /v1/agents, plus a 404 for an agent outside the tenant.
    Audited as agent.replace (and agent.interrupt_default_overridden per overridden default).
    """
    runtime = services().runtime
    return _audit(
        agents.replace_agent(
            runtime.db,
            runtime.tools,
            principal(),
            agent_id,
            body,
            max_ttl=runtime.settings.approval_max_ttl,
            operator_servers=runtime.mcp.operator,
        )
    )
