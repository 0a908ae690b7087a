"""Agent configuration: the schema of an agent body, validated the same way by the API and the services."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import ValidationError, fields, validate, validates_schema

from hango.agent.models.factory import PROVIDERS

MAX_TURNS_LIMIT = 1000
MAX_HISTORY_MESSAGES = 1_000_000


class WholeNumber(fields.Integer):
    """A JSON number without a fraction, as JSON Schema's ``integer`` (``5`` or ``5.0``): marshmallow's Integer also
    takes ``"5"`` and truncates ``5.5``."""

    def _validated(self, value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.make_error("invalid", input=value)
        return value


class ScriptedCall(ma.Schema):
    """One tool call of a scripted turn."""

    name = fields.String(
        required=True,
        validate=validate.Length(min=1, max=200),
        metadata={"description": "the name of the tool the turn calls"},
    )
    args = fields.Dict(
        keys=fields.String(),
        load_default=dict,
        metadata={"description": "the call's arguments, by the tool's argument names; default {}"},
    )
    id = fields.String(
        validate=validate.Length(min=1, max=200),
        metadata={
            "description": "the call's id, unique within the script; omitted: the server generates one unique "
            "within the run"
        },
    )


class ScriptedTurn(ma.Schema):
    """One assistant turn of a scripted model."""

    text = fields.String(metadata={"description": "what the assistant says in this turn"})
    tool_calls = fields.List(
        fields.Nested(ScriptedCall),
        load_default=list,
        metadata={"description": "the tool calls the turn makes, run as one batch; none: the turn ends the loop"},
    )


class ModelConfig(ma.Schema):
    """``model``: a provider and its options."""

    provider = fields.String(
        required=True,
        validate=validate.OneOf(PROVIDERS),
        metadata={
            "description": "scripted: a deterministic model that plays `script`, one turn per model call (once "
            "used up it answers the text done); anthropic or openai: a hosted model, whose key and base URL are "
            "the server's settings"
        },
    )
    script = fields.List(
        fields.Nested(ScriptedTurn), metadata={"description": "scripted only: the assistant turns, in order"}
    )
    name = fields.String(
        validate=validate.Length(min=1, max=200),
        metadata={
            "description": "the hosted provider's model name, 1 to 200 characters (required for anthropic and "
            "openai, refused for scripted)"
        },
    )
    max_tokens = WholeNumber(
        validate=validate.Range(min=1, max=1_000_000),
        metadata={
            "description": "hosted providers: the most output tokens of one model call when the agent's max_tokens "
            "is null, 1 to 1,000,000 (default 4096)"
        },
    )

    @validates_schema
    def _provider_options(self, data: dict[str, Any], **_: Any) -> None:
        if data["provider"] == "scripted":
            if "name" in data:
                raise ValidationError("the scripted provider takes no model name", "name")
            _check_unique_ids(data.get("script") or [])
        else:
            if "name" not in data:
                raise ValidationError(f"the {data['provider']} provider needs a model name", "name")
            if "script" in data:
                raise ValidationError("only the scripted provider takes a script", "script")


def _check_unique_ids(script: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for turn_index, turn in enumerate(script):
        for call_index, call in enumerate(turn.get("tool_calls") or []):
            call_id = call.get("id")
            if call_id is None:
                continue
            if call_id in seen:
                raise ValidationError(
                    {"script": {turn_index: {"tool_calls": {call_index: {"id": [f"{call_id!r} is used twice"]}}}}}
                )
            seen.add(call_id)


InterruptRules = fields.Dict(keys=fields.String(validate=validate.Length(min=1, max=200)), values=fields.Raw())


class SubagentConfig(ma.Schema):
    """A declarative subagent the model may delegate to through the ``task`` tool."""

    name = fields.String(
        required=True,
        validate=validate.Length(min=1, max=100),
        metadata={"description": "the subagent_type a task call names, 1 to 100 characters, unique within the agent"},
    )
    description = fields.String(
        required=True,
        validate=validate.Length(max=2000),
        metadata={"description": "what the subagent is for, in words for people, at most 2000 characters"},
    )
    system_prompt = fields.String(
        load_default="",
        validate=validate.Length(max=100_000),
        metadata={"description": "the subagent's system prompt, at most 100,000 characters; default empty"},
    )
    tools = fields.List(
        fields.String(), load_default=list, metadata={"description": "the tools the subagent may call; default none"}
    )
    model = fields.Nested(ModelConfig, required=True, metadata={"description": "the subagent's own model"})
    interrupt_on = fields.Dict(
        keys=fields.String(),
        values=fields.Raw(),
        allow_none=True,
        load_default=None,
        metadata={
            "description": "the subagent's own interrupt rules, by tool name, as the agent's; null (the default): "
            "the rules of the loop that called it"
        },
    )


class HistoryConfig(ma.Schema):
    """How much of a thread's earlier conversation the agent's runs show the model."""

    max_messages = WholeNumber(
        required=True,
        validate=validate.Range(min=1, max=MAX_HISTORY_MESSAGES),
        metadata={
            "description": f"the model sees at most this many of the thread's last messages, 1 to "
            f"{MAX_HISTORY_MESSAGES:,}, cut at a user message so that no tool result is separated from its call "
            "(stored messages never change; a run whose own messages are more sees all of its own)"
        },
    )


class AgentConfig(ma.Schema):
    """The body of ``POST /v1/agents`` and ``PUT /v1/agents/{id}``."""

    name = fields.String(
        required=True,
        validate=validate.Length(min=1, max=200),
        metadata={"description": "the agent's name, 1 to 200 characters, unique within the tenant (409 otherwise)"},
    )
    system_prompt = fields.String(
        load_default="",
        validate=validate.Length(max=100_000),
        metadata={"description": "the system prompt of every model call, at most 100,000 characters; default empty"},
    )
    model = fields.Nested(ModelConfig, required=True, metadata={"description": "the model the agent's runs call"})
    tools = fields.List(
        fields.String(validate=validate.Length(min=1, max=200)),
        load_default=list,
        metadata={
            "description": "the registered tools the model may call, by name (task delegates work to a subagent); an "
            "unknown name is a 400; default none"
        },
    )
    interrupt_on = fields.Dict(
        keys=fields.String(validate=validate.Length(min=1, max=200)),
        values=fields.Raw(),
        load_default=dict,
        metadata={
            "description": "which calls wait for a human, by tool name: true (every call, all four decisions), false "
            "(never; the only way to lift a default rule, logged and audited) or a rule object. Merged over the "
            "default rules, which hold write_file and edit_file under /memories/ and /skills/"
        },
    )
    subagents = fields.List(
        fields.Nested(SubagentConfig),
        load_default=list,
        metadata={"description": "subagents the model may start with the task tool, each name used once"},
    )
    max_turns = WholeNumber(
        load_default=50,
        validate=validate.Range(min=1, max=MAX_TURNS_LIMIT),
        metadata={
            "description": f"the most model turns one loop may take, 1 to {MAX_TURNS_LIMIT} (default 50): the run "
            "fails when its own loop reaches it, and a subagent call that reaches it answers the model an error"
        },
    )
    max_tokens = WholeNumber(
        load_default=None,
        allow_none=True,
        validate=validate.Range(min=1, max=10_000_000),
        metadata={
            "description": "the most output tokens of each model call of the agent and its subagents, 1 to "
            "10,000,000; null (the default): the model's own max_tokens"
        },
    )

    history = fields.Nested(
        HistoryConfig,
        load_default=None,
        allow_none=True,
        metadata={
            "description": 'a thread\'s runs: {"max_messages": N} shows the model at most the last N messages of the '
            "thread; null (the default): the whole conversation"
        },
    )

    @validates_schema
    def _unique_subagents(self, data: dict[str, Any], **_: Any) -> None:
        names = [subagent["name"] for subagent in data.get("subagents") or []]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValidationError(f"subagent names must be unique: {', '.join(duplicates)}", "subagents")
