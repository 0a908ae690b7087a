"""What the OpenAPI document says beyond what each marshmallow field says.

apispec turns a field's type and validators into JSON Schema; a rule checked elsewhere is invisible to it: a
``validates_schema`` hook (a model's options by provider, a decision's by kind), a service (interrupt rules,
``when`` matchers, durations) or a setting (the longest ``ttl``, the registered tools). :class:`Rules` adds those to
the component schemas as they are registered, so that a client generator, and the schemathesis run of the suite, see
what the server enforces. What JSON Schema cannot state (which calls a run has, the role of the last message, names
unique within a list) is said in the descriptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import marshmallow as ma
from apispec import APISpec, BasePlugin
from apispec.ext.marshmallow.common import resolve_schema_cls
from marshmallow import fields

from hango.agent.config import AgentConfig, ModelConfig, SubagentConfig
from hango.agent.interrupts import (
    EXPIRY_ACTIONS,
    MATCHERS,
    MAX_APPROVALS_REQUIRED,
    MAX_DESCRIPTION_CHARS,
    QUORUM_DECISIONS,
    REVIEWER_ROLES,
)
from hango.api.decision_requests import DecisionSchema, RememberSchema
from hango.api.grants import GrantCreate
from hango.api.mcp_servers import McpServerCreate, McpServerUpdate
from hango.api.patterns import NOT_BLANK, duration_pattern
from hango.api.runs import RunCreate
from hango.api.threads import ThreadRunCreate
from hango.api.webhooks import WebhookCreate
from hango.kernel.config import Settings, spelt_duration
from hango.kernel.models import DECISIONS

JsonSchema = dict[str, Any]
DESCRIPTION = (
    "hango's HTTP API. Besides what each schema says: every string of a body or a query (keys and values, at any "
    "depth of a free-form value) may not contain U+0000 or an unpaired surrogate; a body nested deeper than "
    "HANGO_MAX_JSON_DEPTH is a 400 naming `body`, and one over HANGO_MAX_BODY_BYTES a 413. Every refusal is an "
    "RFC 9457 problem document; a 400 names each invalid field in `errors`. While PostgreSQL or Redis cannot be "
    "reached, any operation may answer 503 `urn:hango:problem:unavailable` with `Retry-After`: try again "
    "then (`GET /readyz` names the dependency that is down)."
)
Refinement = Callable[[JsonSchema], None]
# What each path parameter names; the same name means the same thing on every route.
PATH_PARAMETERS = {
    "agent_id": "the agent's id",
    "approval_id": "the approval's id",
    "delivery_id": "the delivery's id, one of this webhook's",
    "grant_id": "the grant's id",
    "name": "the MCP server's name ([a-z0-9-]{1,32}); any other is a 404",
    "path": "the file's path without its leading / (memories/AGENTS.md for /memories/AGENTS.md); only files under "
    "/memories/ and /skills/ are served, any other path is a 404",
    "run_id": "the run's id",
    "thread_id": "the thread's id; another member's thread (for a member) or another tenant's is a 404",
    "token_id": "the token's id, as POST /v1/users/{user_id}/tokens returned it",
    "user_id": "the user's id",
    "webhook_id": "the webhook's id",
}


def _duration(maximum: timedelta, setting: str) -> JsonSchema:
    return {
        "type": "string",
        "pattern": duration_pattern(maximum),
        "description": f"a duration such as 90s, 15m, 4h or 2d (a plain number is seconds), above zero and at most "
        f"{setting} ({spelt_duration(maximum)} here)",
    }


def _only(name: str, value: JsonSchema) -> JsonSchema:
    return {"type": "object", "required": [name], "additionalProperties": False, "properties": {name: value}}


MATCHER: JsonSchema = {
    "description": f"exactly one of {', '.join(MATCHERS)}",
    "oneOf": [
        _only("equals", {"description": "exact JSON equality, no coercion"}),
        _only(
            "prefix",
            {
                "description": "the value starts with this text, or with any of these; a path argument is normalised "
                "first, and a directory prefix also matches the directory itself",
                "oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "string"}}],
            },
        ),
        _only("size_over", {"type": "integer", "minimum": 0, "description": "UTF-8 bytes, written without a fraction"}),
    ],
}
WHEN_SIZE = "at most HANGO_GRANT_MAX_WHEN_BYTES as compact JSON"
REVIEWERS: JsonSchema = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "roles": {
            "type": "array",
            "items": {"type": "string", "enum": list(REVIEWER_ROLES)},
            "description": "roles whose holders may decide",
        },
        "users": {
            "type": "array",
            "items": {"type": "string", "format": "uuid"},
            "description": "ids of users who may decide, whatever their role",
        },
    },
    "anyOf": [
        {"required": ["roles"], "properties": {"roles": {"minItems": 1}}},
        {"required": ["users"], "properties": {"users": {"minItems": 1}}},
    ],
    "description": "who may decide: at least one role or user",
}


def when_schema(description: str) -> JsonSchema:
    """A ``when`` clause: argument names mapped to matchers, or null."""
    return {"type": ["object", "null"], "minProperties": 1, "additionalProperties": MATCHER, "description": description}


def interrupt_rule(max_ttl: timedelta) -> JsonSchema:
    """One tool's entry of ``interrupt_on``: ``true``, ``false`` or a rule object."""
    ttl = _duration(max_ttl, "HANGO_APPROVAL_MAX_TTL")
    rule = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "allowed_decisions": {
                "type": ["array", "null"],
                "minItems": 1,
                "items": {"type": "string", "enum": list(DECISIONS)},
                "description": "the decisions a reviewer may take; omitted or null: all four",
            },
            "when": when_schema("every listed argument must match for the call to be interrupted"),
            "reviewers": REVIEWERS,
            "approvals_required": {
                "type": "integer",
                "minimum": 2,
                "maximum": MAX_APPROVALS_REQUIRED,
                "description": f"distinct reviewers who must approve before the call runs, 2 to "
                f"{MAX_APPROVALS_REQUIRED}, written without a fraction (3, not 3.0); one reject is final",
            },
            "ttl": {**ttl, "description": f"the calls' deadline instead of HANGO_APPROVAL_TTL: {ttl['description']}"},
            "on_expiry": {
                "description": 'what the deadline does: "fail" the run (the default), "reject" the call and let the '
                "run go on, or hand the call once to other reviewers for a second deadline that fails the run",
                "oneOf": [
                    {"type": "string", "enum": list(EXPIRY_ACTIONS)},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["escalate", "ttl"],
                        "properties": {
                            "escalate": {**REVIEWERS, "description": "who may decide after the first deadline"},
                            "ttl": {
                                **ttl,
                                "description": f"the second deadline, after the first: {ttl['description']}",
                            },
                        },
                    },
                ],
            },
            "description": {
                "type": "string",
                "maxLength": MAX_DESCRIPTION_CHARS,
                "pattern": NOT_BLANK,
                "description": f"why the calls wait, shown to their reviewers; not blank, at most "
                f"{MAX_DESCRIPTION_CHARS} characters",
            },
        },
        # A quorum counts approvals and rejections only.
        "if": {"required": ["approvals_required"]},
        "then": {"properties": {"allowed_decisions": {"items": {"enum": list(QUORUM_DECISIONS)}}}},
    }
    return {"oneOf": [{"type": "boolean"}, rule]}


class Rules(BasePlugin):
    """apispec plugin adding the rules marshmallow does not state to the schemas they belong to."""

    def __init__(self, settings: Settings, tool_names: Iterable[str]) -> None:
        self._settings = settings
        self._tools = sorted(tool_names)
        self._refinements: dict[type[ma.Schema], Refinement] = {
            AgentConfig: self._agent,
            SubagentConfig: self._subagent,
            ModelConfig: _model,
            DecisionSchema: _decision,
            RememberSchema: self._remember,
            RunCreate: _run,
            ThreadRunCreate: _run,
            GrantCreate: self._grant,
            WebhookCreate: self._webhook,
            McpServerCreate: self._mcp_server,
            McpServerUpdate: self._mcp_server,
        }

    def init_spec(self, spec: APISpec) -> None:
        """Let every ``Dict`` field document its keys (apispec documents only its values)."""
        super().init_spec(spec)
        for plugin in spec.plugins:
            converter = getattr(plugin, "converter", None)
            if converter is not None:
                converter.add_attribute_function(_property_names)

    def path_helper(
        self,
        path: str | None = None,
        operations: dict[Any, Any] | None = None,
        parameters: list[dict[Any, Any]] | None = None,
        **kwargs: Any,
    ) -> str | None:
        """Describe each path parameter (flask-smorest documents only its type)."""
        for parameter in parameters or []:
            if isinstance(parameter, dict) and parameter.get("in") == "path" and parameter["name"] in PATH_PARAMETERS:
                parameter.setdefault("description", PATH_PARAMETERS[parameter["name"]])
        return path

    def schema_helper(self, name: str, definition: JsonSchema, **kwargs: Any) -> JsonSchema | None:
        """Refine a component schema in place (apispec passes the definition being built)."""
        schema = kwargs.get("schema")
        cls = resolve_schema_cls(schema) if schema is not None else None
        refinement = self._refinements.get(cls) if isinstance(cls, type) else None
        if refinement is not None:
            refinement(definition)
        return None

    @property
    def grant_ttl(self) -> JsonSchema:
        """A standing approval's ``ttl``."""
        return _duration(self._settings.grant_max_ttl, "HANGO_GRANT_MAX_TTL")

    def _agent(self, definition: JsonSchema) -> None:
        properties = definition["properties"]
        properties["tools"]["items"]["enum"] = self._tools
        properties["interrupt_on"]["additionalProperties"] = interrupt_rule(self._settings.approval_max_ttl)

    def _subagent(self, definition: JsonSchema) -> None:
        properties = definition["properties"]
        properties["tools"]["items"]["enum"] = self._tools
        properties["interrupt_on"]["additionalProperties"] = interrupt_rule(self._settings.approval_max_ttl)

    def _grant(self, definition: JsonSchema) -> None:
        properties = definition["properties"]
        properties["ttl"].update(self.grant_ttl)
        properties["tool_name"]["pattern"] = NOT_BLANK
        properties["when"] = when_schema(f"{properties['when']['description']}; {WHEN_SIZE}")
        properties["run_id"]["description"] = "only this run, which must be one of the agent's (400 otherwise)"

    def _webhook(self, definition: JsonSchema) -> None:
        definition["properties"]["url"] = _url(
            self._settings.webhook_max_url_length, "HANGO_WEBHOOK_ALLOW_PRIVATE_URLS"
        )

    def _mcp_server(self, definition: JsonSchema) -> None:
        url = _url(self._settings.mcp_max_url_length, "HANGO_MCP_ALLOW_PRIVATE_URLS")
        definition["properties"]["url"] = {
            **url,
            "description": f"the server's streamable HTTP endpoint: {url['description']}",
        }

    def _remember(self, definition: JsonSchema) -> None:
        properties = definition["properties"]
        properties["ttl"].update({**self.grant_ttl, "description": properties["ttl"]["description"]})
        properties["when"] = when_schema(f"{properties['when']['description']}; {WHEN_SIZE}")


def _property_names(self: Any, field: fields.Field, **_: Any) -> JsonSchema:  # type: ignore[type-arg]
    """``propertyNames`` of a ``Dict`` whose keys are validated (their length, their pattern)."""
    if not isinstance(field, fields.Dict) or field.key_field is None:
        return {}
    names = {key: value for key, value in self.field2property(field.key_field).items() if key != "type"}
    return {"propertyNames": names} if names else {}


def _model(definition: JsonSchema) -> None:
    script = definition["properties"]["script"]
    script["description"] = f"{script['description']}; the ids its calls give are unique in it"
    definition["oneOf"] = [
        {"title": "scripted", "properties": {"provider": {"const": "scripted"}}, "not": {"required": ["name"]}},
        {
            "title": "hosted",
            "properties": {"provider": {"enum": ["anthropic", "openai"]}},
            "required": ["name"],
            "not": {"required": ["script"]},
        },
    ]


def _decision(definition: JsonSchema) -> None:
    """One object per kind of decision, each with only the members that kind takes."""
    properties = definition.pop("properties")
    definition.pop("required", None)
    definition.pop("additionalProperties", None)
    common = {name: properties[name] for name in ("tool_call_id", "approval_id", "arguments_sha256")}

    def kind(title: str, decision: JsonSchema, **members: JsonSchema) -> JsonSchema:
        return {
            "title": title,
            "type": "object",
            "additionalProperties": False,
            "required": ["decision", *(name for name in members if name != "remember")],
            "properties": {**common, "decision": {**properties["decision"], **decision}, **members},
        }

    message = {**properties["message"], "pattern": NOT_BLANK}
    definition["description"] = (
        "one call's decision: it names a call of the run (tool_call_id or approval_id), once per request (400 "
        "otherwise), that call's rule must allow it, and an edit's args must suit the call's tool"
    )
    definition["anyOf"] = [{"required": ["tool_call_id"]}, {"required": ["approval_id"]}]
    definition["oneOf"] = [
        kind("approve", {"const": "approve"}, remember=properties["remember"]),
        kind("edit: args replace the arguments whole", {"const": "edit"}, args=properties["args"]),
        kind("reject or respond, with a message", {"enum": ["reject", "respond"]}, message=message),
    ]


def _run(definition: JsonSchema) -> None:
    definition["oneOf"] = [{"title": "input", "required": ["input"]}, {"title": "messages", "required": ["messages"]}]


def _url(max_length: int, allow_private: str) -> JsonSchema:
    # The host is a name, an IPv4 address or a bracketed IPv6 one; no credentials; a port from 1 to 65535.
    port = "(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
    host = r"(?:[A-Za-z0-9._~!$&'()*+,;=%-]+|\[[0-9A-Fa-f:.]+\])"
    return {
        "type": "string",
        "maxLength": max_length,
        "pattern": f"^[Hh][Tt][Tt][Pp][Ss]?://{host}(?::{port})?(?:[/?#].*)?$",
        "description": f"an https URL; plain http only to a private address, when {allow_private} allows those. "
        "The name must resolve, and to public addresses unless private ones are allowed (400).",
    }
