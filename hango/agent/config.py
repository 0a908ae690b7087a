"""Agent configuration: the schema of an agent body, validated the same way by the API and the services."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from marshmallow import ValidationError, fields, validate, validates_schema

from hango.agent.models.factory import PROVIDERS

MAX_TURNS_LIMIT = 1000


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

    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    args = fields.Dict(keys=fields.String(), load_default=dict)
    id = fields.String(validate=validate.Length(min=1, max=200))


class ScriptedTurn(ma.Schema):
    """One assistant turn of a scripted model."""

    text = fields.String()
    tool_calls = fields.List(fields.Nested(ScriptedCall), load_default=list)


class ModelConfig(ma.Schema):
    """``model``: a provider and its options."""

    provider = fields.String(required=True, validate=validate.OneOf(PROVIDERS))
    script = fields.List(fields.Nested(ScriptedTurn))
    name = fields.String(validate=validate.Length(min=1, max=200))
    max_tokens = WholeNumber(validate=validate.Range(min=1, max=1_000_000))

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

    name = fields.String(required=True, validate=validate.Length(min=1, max=100))
    description = fields.String(required=True, validate=validate.Length(max=2000))
    system_prompt = fields.String(load_default="", validate=validate.Length(max=100_000))
    tools = fields.List(fields.String(), load_default=list)
    model = fields.Nested(ModelConfig, required=True)
    interrupt_on = fields.Dict(keys=fields.String(), values=fields.Raw(), allow_none=True, load_default=None)


class AgentConfig(ma.Schema):
    """The body of ``POST /v1/agents`` and ``PUT /v1/agents/{id}``."""

    name = fields.String(required=True, validate=validate.Length(min=1, max=200))
    system_prompt = fields.String(load_default="", validate=validate.Length(max=100_000))
    model = fields.Nested(ModelConfig, required=True)
    tools = fields.List(fields.String(validate=validate.Length(min=1, max=200)), load_default=list)
    interrupt_on = fields.Dict(
        keys=fields.String(validate=validate.Length(min=1, max=200)), values=fields.Raw(), load_default=dict
    )
    subagents = fields.List(fields.Nested(SubagentConfig), load_default=list)
    max_turns = WholeNumber(load_default=50, validate=validate.Range(min=1, max=MAX_TURNS_LIMIT))
    max_tokens = WholeNumber(load_default=None, allow_none=True, validate=validate.Range(min=1, max=10_000_000))

    @validates_schema
    def _unique_subagents(self, data: dict[str, Any], **_: Any) -> None:
        names = [subagent["name"] for subagent in data.get("subagents") or []]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValidationError(f"subagent names must be unique: {', '.join(duplicates)}", "subagents")
