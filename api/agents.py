"""Agents: create and replace (owner, admin), read (everyone in the tenant)."""

from __future__ import annotations

import uuid
from typing import Any

from marshmallow import fields

from hango.agent.config import AgentConfig
from hango.agent.interrupts import effective_config
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

    def _effective(self, agent: AgentRow) -> dict[str, Any]:
        return effective_config(agent.interrupt_on)


AgentList = list_of(Agent, "AgentList")


def _audit(agent: AgentRow) -> AgentRow:
    audit_target("agent", agent.id, name=agent.name)
    for override in agents.log_overrides(agent):
        where = {} if override.subagent is None else {"subagent": override.subagent}
        audit_target("agent", agent.id, action="agent.interrupt_default_overridden", tool=override.tool, **where)
    return agent


@blp.route("/agents", methods=["POST"])
@blp.problems(403, 409)
@blp.arguments(AgentConfig)
@blp.response(201, Agent)
@audited("agent.create", "agent")
def create_agent(body: dict[str, Any]) -> AgentRow:
    """Create an agent (owner, admin)."""
    runtime = services().runtime
    return _audit(
        agents.create_agent(runtime.db, runtime.tools, principal(), body, max_ttl=runtime.settings.approval_max_ttl)
    )


@blp.route("/agents", methods=["GET"])
@blp.arguments(ListArgs, location="query")
@blp.response(200, AgentList)
def list_agents(args: dict[str, Any]) -> Page[AgentRow]:
    """The tenant's agents."""
    return agents.list_agents(services().db, principal(), page_request(args))


@blp.route("/agents/<uuid:agent_id>", methods=["GET"])
@blp.problems(404)
@blp.response(200, Agent)
def get_agent(agent_id: uuid.UUID) -> AgentRow:
    """One agent."""
    return agents.get_agent(services().db, principal(), agent_id)


@blp.route("/agents/<uuid:agent_id>", methods=["PUT"])
@blp.problems(403, 404, 409)
@blp.arguments(AgentConfig)
@blp.response(200, Agent)
@audited("agent.replace", "agent", target_arg="agent_id")
def replace_agent(body: dict[str, Any], agent_id: uuid.UUID) -> AgentRow:
    """Replace an agent's whole configuration (owner, admin); existing runs keep their snapshot."""
    runtime = services().runtime
    return _audit(
        agents.replace_agent(
            runtime.db, runtime.tools, principal(), agent_id, body, max_ttl=runtime.settings.approval_max_ttl
        )
    )
