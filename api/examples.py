"""Examples for the OpenAPI document: one small, consistent story (a notes agent, a run that waits on a write to its
memory, an owner who approves it) told in the shapes the API reads and answers.

The ids and times agree across examples, so that a reader can follow one resource from request to response; the
derived values (an approval's ``arguments_sha256``, an agent's ``effective_interrupt_on``) are computed by the
server's own code. ``tests/unit/test_openapi_docs.py`` checks every example against its schema.
"""

from __future__ import annotations

from typing import Any

from hango.agent.interrupts import effective_config, rule_warnings
from hango.agent.mcp import definition_sha256
from hango.agent.spec import AgentSpec
from hango.kernel.canonical import sha256_hex

Json = dict[str, Any]

TENANT_ID = "3f6d2a10-8c4e-4b7a-9e21-5d0c7b9a4e13"
OWNER_ID = "0d9e8f7a-6b5c-4d3e-8f2a-1b0c9d8e7f6a"
MEMBER_ID = "8a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
AGENT_ID = "6f1c2b7e-3d4a-4b8e-9c1d-2e3f4a5b6c7d"
RUN_ID = "b4e7c9a2-1d3f-4e6a-8b5c-7d9e0f1a2b3c"
APPROVAL_ID = "c5f8d0b3-2e4a-4f7b-9c6d-8e0f1a2b3c4d"
TOKEN_ID = "e2a4c6e8-0b1d-4f3a-8c5e-7a9b1c3d5e7f"  # noqa: S105 (an id, not a secret)
WEBHOOK_ID = "f1e2d3c4-b5a6-4978-8a6b-5c4d3e2f1a0b"
DELIVERY_ID = "a9b8c7d6-e5f4-4a3b-9c2d-1e0f9a8b7c6d"
GRANT_ID = "d7c6b5a4-9382-4716-a5b4-c3d2e1f0a9b8"
TOKEN = "hango_q8Jc2vR0xYkT5nW3pL7mZ1aB9dF4gH6sU0eI2oK8rNt"  # noqa: S105 (made up for the document)


def page(*items: Json, next_cursor: str | None = None) -> Json:
    """A list response: ``items`` and the cursor of the next page."""
    return {"items": list(items), "next_cursor": next_cursor}


def problem(status: int, kind: str, title: str, detail: str, **extra: Any) -> Json:
    """A problem document as the server writes it."""
    return {"type": f"urn:hango:problem:{kind}", "title": title, "status": status, "detail": detail, **extra}


# Users and tokens.
USER_CREATE: Json = {"email": "ana@example.com", "role": "member"}
USER_CREATED: Json = {"id": MEMBER_ID, "email": "ana@example.com", "role": "member", "token": TOKEN}
USERS = page(
    {"id": OWNER_ID, "email": "owner@example.com", "role": "owner", "created_at": "2025-03-03T08:00:00Z"},
    {"id": MEMBER_ID, "email": "ana@example.com", "role": "member", "created_at": "2025-03-03T08:05:12Z"},
)
ME: Json = {"user_id": OWNER_ID, "email": "owner@example.com", "tenant_id": TENANT_ID, "role": "owner"}
TOKEN_CREATED: Json = {"id": TOKEN_ID, "token": TOKEN}

# Agents.
MEMORY_RULE: Json = {
    "when": {"file_path": {"prefix": ["/memories/", "/skills/"]}},
    "allowed_decisions": ["approve", "edit", "reject"],
    "reviewers": {"roles": ["owner"]},
    "ttl": "4h",
    "on_expiry": "reject",
    "description": "The agent's memory outlives the run: an owner reads what it keeps.",
}
AGENT_CONFIG: Json = {
    "name": "notes-bot",
    "system_prompt": "You keep the team's notes in /memories/ and answer questions from them.",
    "model": {"provider": "anthropic", "name": "claude-sonnet-4-5", "max_tokens": 4096},
    "tools": ["ls", "read_file", "write_file", "edit_file", "grep", "task"],
    "interrupt_on": {"write_file": MEMORY_RULE},
    "subagents": [
        {
            "name": "researcher",
            "description": "Searches the notes and reports what it found.",
            "system_prompt": "Answer only from the files you can read.",
            "tools": ["ls", "read_file", "grep"],
            "model": {"provider": "anthropic", "name": "claude-haiku-4-5"},
            "interrupt_on": None,
        }
    ],
    "max_turns": 30,
    "max_tokens": None,
}
AGENT: Json = {
    "id": AGENT_ID,
    **AGENT_CONFIG,
    "effective_interrupt_on": effective_config(AGENT_CONFIG["interrupt_on"]),
    "created_by": OWNER_ID,
    "created_at": "2025-03-03T08:10:00Z",
    "updated_at": "2025-03-04T09:00:00Z",
}
AGENTS = page(AGENT)
# What saving that configuration answers: its rule on write_file replaces the default one.
SAVED_AGENT: Json = {
    **AGENT,
    "warnings": [
        {"tool": item.tool, "message": item.message}
        for item in rule_warnings(AgentSpec.of_snapshot(AGENT_CONFIG), ("write_file", "edit_file"))
    ],
}

# Files.
FILE_WRITE: Json = {"content": "# Team notes\n\n- Standup moves to 09:30 from Monday.\n"}
FILE: Json = {"path": "/memories/AGENTS.md", **FILE_WRITE, "updated_at": "2025-03-04T09:20:41Z"}
FILES = page(
    {"path": "/memories/AGENTS.md", "size": len(FILE_WRITE["content"].encode()), "updated_at": "2025-03-04T09:20:41Z"},
    {"path": "/skills/summarise.md", "size": 318, "updated_at": "2025-03-03T08:12:09Z"},
)

# Runs.
RUN_CREATE_INPUT: Json = {"agent_id": AGENT_ID, "input": "Note that standup moves to 09:30 from Monday."}
RUN_CREATE_MESSAGES: Json = {
    "agent_id": AGENT_ID,
    "messages": [
        {"role": "user", "content": "When is standup?"},
        {"role": "assistant", "content": [{"type": "text", "text": "At 09:00."}]},
        {"role": "user", "content": "It moves to 09:30 from Monday: note it."},
    ],
}
_RUN: Json = {
    "id": RUN_ID,
    "agent_id": AGENT_ID,
    "thread_id": None,
    "created_by": MEMBER_ID,
    "created_at": "2025-03-04T09:15:00Z",
    "started_at": None,
    "finished_at": None,
    "awaiting_since": None,
    "error": None,
}
RUN_QUEUED: Json = {**_RUN, "state": "queued", "turn": 0, "usage": {"input_tokens": 0, "output_tokens": 0}}
RUN_AWAITING: Json = {
    **_RUN,
    "state": "awaiting_approval",
    "started_at": "2025-03-04T09:15:01Z",
    "awaiting_since": "2025-03-04T09:15:04Z",
    "turn": 1,
    "usage": {"input_tokens": 1840, "output_tokens": 96},
}
RUN_CANCELLED: Json = {
    **RUN_AWAITING,
    "state": "cancelled",
    "awaiting_since": None,
    "finished_at": "2025-03-04T09:31:27Z",
}
RUN_RESUMED: Json = {**RUN_AWAITING, "state": "queued", "awaiting_since": None}
RUNS = page(RUN_AWAITING, next_cursor="1741079700000000_b4e7c9a21d3f4e6a8b5c7d9e0f1a2b3c")

WRITE_ARGUMENTS: Json = {"file_path": "/memories/AGENTS.md", "content": FILE_WRITE["content"]}
MESSAGES = page(
    {
        "seq": 1,
        "role": "user",
        "content": [{"type": "text", "text": RUN_CREATE_INPUT["input"]}],
        "subagent_call_id": None,
    },
    {
        "seq": 2,
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll add it to the notes."},
            {"type": "tool_use", "id": "toolu_01", "name": "write_file", "input": WRITE_ARGUMENTS},
        ],
        "subagent_call_id": None,
    },
)

# Approvals.
APPROVAL: Json = {
    "id": APPROVAL_ID,
    "run_id": RUN_ID,
    "thread_id": None,
    "tool_call_id": "toolu_01",
    "tool_name": "write_file",
    "arguments": WRITE_ARGUMENTS,
    "arguments_sha256": sha256_hex(WRITE_ARGUMENTS),
    "allowed_decisions": MEMORY_RULE["allowed_decisions"],
    "state": "pending",
    "subagent_call_id": None,
    "created_at": "2025-03-04T09:15:04Z",
    "expires_at": "2025-03-04T13:15:04Z",
    "decision": None,
    "decision_args": None,
    "decision_message": None,
    "decided_by": None,
    "decided_at": None,
    "execution": "not_started",
    "grant_id": None,
    "on_expiry": "reject",
    "escalated_at": None,
    "description": MEMORY_RULE["description"],
    "reviewers": MEMORY_RULE["reviewers"],
    "approvals_required": 1,
    "votes": [],
    "mcp": None,
    "definition_sha256": None,
}
MCP_LISTED: Json = {
    "name": "create_issue",
    "title": "Create an issue",
    "description": "Open an issue in the tracker.",
    "inputSchema": {
        "type": "object",
        "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["title"],
    },
    "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
}
MCP_ARGUMENTS: Json = {"title": "Flaky test in CI", "body": "test_durability fails one run in fifty."}
MCP_APPROVAL: Json = {
    **APPROVAL,
    "id": "3f1e0a52-6c1d-4b8e-9f57-0b1a2c3d4e5f",
    "tool_call_id": "toolu_02",
    "tool_name": "mcp__tracker__create_issue",
    "arguments": MCP_ARGUMENTS,
    "arguments_sha256": sha256_hex(MCP_ARGUMENTS),
    "allowed_decisions": ["approve", "edit", "reject", "respond"],
    "on_expiry": "fail",
    "description": "Calls to tools of MCP server tracker need a reviewer: the server is not trusted.",
    "reviewers": None,
    "mcp": {
        "server": "tracker",
        "tool": "create_issue",
        "title": "Create an issue",
        "description": "Open an issue in the tracker.",
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True},
        "trusted": False,
    },
    "definition_sha256": definition_sha256(MCP_LISTED),
}
APPROVALS = page(APPROVAL, MCP_APPROVAL)
DECISIONS: dict[str, Json] = {
    "approve": {
        "summary": "Approve the call, bound to the arguments the reviewer read",
        "value": {
            "decisions": [
                {"approval_id": APPROVAL_ID, "decision": "approve", "arguments_sha256": APPROVAL["arguments_sha256"]}
            ]
        },
    },
    "approve-and-remember": {
        "summary": "Approve, and let the agent write under /memories/ for 8 hours without asking",
        "value": {
            "decisions": [
                {
                    "tool_call_id": "toolu_01",
                    "decision": "approve",
                    "remember": {"ttl": "8h", "when": {"file_path": {"prefix": "/memories/"}}},
                }
            ]
        },
    },
    "edit": {
        "summary": "Run the call with other arguments",
        "value": {
            "decisions": [
                {
                    "tool_call_id": "toolu_01",
                    "decision": "edit",
                    "args": {"file_path": "/memories/standup.md", "content": "Standup: 09:30 from Monday.\n"},
                }
            ]
        },
    },
    "reject": {
        "summary": "Refuse the call; the model reads why",
        "value": {
            "decisions": [{"tool_call_id": "toolu_01", "decision": "reject", "message": "Keep AGENTS.md for rules."}]
        },
    },
}
DECISION_RESULT: Json = {
    "run": RUN_RESUMED,
    "approvals": [
        {
            **APPROVAL,
            "state": "decided",
            "decision": "approve",
            "decided_by": OWNER_ID,
            "decided_at": "2025-03-04T09:18:30Z",
            "remembered_grant_id": None,
        }
    ],
}
PREVIEW: Json = {
    "approval_id": APPROVAL_ID,
    "tool_name": "write_file",
    "kind": "file",
    "file_path": "/memories/AGENTS.md",
    "path": "/memories/AGENTS.md",
    "path_differs": False,
    "storage": "agent",
    "exists": True,
    "error": None,
    "diff": "--- a/memories/AGENTS.md\n+++ b/memories/AGENTS.md\n@@ -1,3 +1,3 @@\n # Team notes\n \n"
    "-- Standup is at 09:00.\n+- Standup moves to 09:30 from Monday.\n",
    "too_large": False,
    "note": None,
    "as_of": "now",
}

# Event streams: one event's data each (the stream sends `id:`, `event:` and `data:` lines).
RUN_EVENTS: dict[str, Json] = {
    "run.queued": {"summary": "event: run.queued", "value": {"reason": "created"}},
    "tool.finished": {
        "summary": "event: tool.finished",
        "value": {"tool_call_id": "toolu_02", "tool_name": "read_file", "is_error": False},
    },
    "run.finished": {"summary": "event: run.finished", "value": {"state": "succeeded", "error": None}},
}
APPROVAL_EVENTS: dict[str, Json] = {
    "approval.requested": {
        "summary": "event: approval.requested, data: the approval as the lists show it",
        "value": APPROVAL,
    },
}

# Audit.
AUDIT_EVENTS = page(
    {
        "id": "71c3e5a7-9b1d-4f3a-8e5c-7a9b1d3f5e7a",
        "actor_kind": "user",
        "actor_id": OWNER_ID,
        "action": "approval.decide",
        "target_kind": "pending_approval",
        "target_id": APPROVAL_ID,
        "outcome": "success",
        "detail": {
            "decided_by": OWNER_ID,
            "decision": "approve",
            "tool_name": "write_file",
            "tool_call_id": "toolu_01",
        },
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "created_at": "2025-03-04T09:18:30Z",
    }
)

# Webhooks.
WEBHOOK_CREATE: Json = {
    "url": "https://hooks.example.com/hango",
    "events": ["approval.requested", "approval.reminder"],
    "description": "Reviewers' chat channel",
}
WEBHOOK: Json = {
    "id": WEBHOOK_ID,
    **WEBHOOK_CREATE,
    "active": True,
    "created_at": "2025-03-03T08:30:00Z",
}
WEBHOOK_CREATED: Json = {**WEBHOOK, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw6Y0Kf1L2m3Q="}
WEBHOOKS = page(WEBHOOK)
DELIVERY: Json = {
    "id": DELIVERY_ID,
    "event_id": "5e7a9c1e-3b5d-4f7a-9c1e-3b5d7f9a1c3e",
    "event_type": "approval.requested",
    "attempts": 3,
    "state": "pending",
    "last_status_code": 503,
    "last_error": "HTTP 503",
    "next_attempt_at": "2025-03-04T09:16:24Z",
    "created_at": "2025-03-04T09:15:04Z",
    "delivered_at": None,
}
DELIVERIES = page(DELIVERY)

# MCP servers.
MCP_SERVER_CREATE: Json = {
    "name": "docs",
    "url": "https://mcp.docs.example.com/mcp",
    "headers": {"X-Api-Key": "YOUR-DOCS-API-KEY"},
    "trusted": True,
    "description": "The product documentation: search and read pages.",
}
MCP_SERVER_UPDATE: Json = {key: value for key, value in MCP_SERVER_CREATE.items() if key != "headers"}
MCP_SERVER: Json = {
    "name": "docs",
    "scope": "tenant",
    "transport": "streamable_http",
    "trusted": True,
    "description": MCP_SERVER_CREATE["description"],
    "url": MCP_SERVER_CREATE["url"],
    "created_by": OWNER_ID,
    "created_at": "2025-03-03T08:40:00Z",
    "updated_at": "2025-03-03T08:40:00Z",
}
MCP_SERVERS = page(
    {
        "name": "git",
        "scope": "operator",
        "transport": "stdio",
        "trusted": True,
        "description": "The team's repositories, read-only.",
    },
    MCP_SERVER,
)
_SEARCH_TOOL: Json = {
    "name": "search",
    "title": "Search the docs",
    "description": "Full-text search over the documentation; returns page paths and snippets.",
    "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    "annotations": {"readOnlyHint": True, "openWorldHint": False},
}
MCP_TOOLS: list[Json] = [
    {
        "name": _SEARCH_TOOL["name"],
        "hango_name": "mcp__docs__search",
        "title": _SEARCH_TOOL["title"],
        "description": _SEARCH_TOOL["description"],
        "input_schema": _SEARCH_TOOL["inputSchema"],
        "annotations": _SEARCH_TOOL["annotations"],
        "definition_sha256": definition_sha256(_SEARCH_TOOL),
    }
]

# Grants.
GRANT_CREATE: Json = {
    "agent_id": AGENT_ID,
    "tool_name": "write_file",
    "when": {"file_path": {"prefix": "/memories/notes/"}},
    "ttl": "8h",
}
GRANT: Json = {
    "id": GRANT_ID,
    "agent_id": AGENT_ID,
    "tool_name": "write_file",
    "when": GRANT_CREATE["when"],
    "exact": False,
    "run_id": None,
    "created_by": OWNER_ID,
    "created_at": "2025-03-04T09:00:00Z",
    "expires_at": "2025-03-04T17:00:00Z",
    "revoked_at": None,
    "revoked_by": None,
    "active": True,
}
GRANTS = page(GRANT)

# The tenant.
TENANT_UPDATE: Json = {"self_approval": False}
TENANT: Json = {"id": TENANT_ID, "name": "acme", "self_approval": False}


THREAD_ID = "5e4d3c2b-1a09-4f8e-b7d6-c5b4a3928170"
THREAD_RUN_ID = "7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d"
THREAD_CREATE: Json = {"agent_id": AGENT_ID, "metadata": {"customer": "acme", "channel": "support"}}
THREAD: Json = {
    "id": THREAD_ID,
    "agent_id": AGENT_ID,
    "created_by": MEMBER_ID,
    "created_at": "2025-03-04T10:00:00Z",
    "updated_at": "2025-03-04T10:02:10Z",
    "status": "idle",
    "metadata": {"customer": "acme", "channel": "support"},
    "last_run_id": THREAD_RUN_ID,
    "message_count": 4,
}
THREADS = page(THREAD, next_cursor=None)
THREAD_RUN_CREATE: Json = {"input": "And what did I ask you to note earlier?", "multitask_strategy": "enqueue"}
THREAD_RUN: Json = {**RUN_QUEUED, "id": THREAD_RUN_ID, "thread_id": THREAD_ID}
THREAD_MESSAGES = page(
    {
        "seq": 1,
        "run_id": RUN_ID,
        "role": "user",
        "content": [{"type": "text", "text": "Note that standup moves to 09:30 from Monday."}],
    },
    {"seq": 2, "run_id": RUN_ID, "role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
    next_cursor=None,
)
THREAD_FORK: Json = {"up_to_seq": 2}
THREAD_EVENTS: dict[str, Json] = {
    "message.created": {
        "summary": "event: message.created (id: 8589934594, the thread's second run's second event)",
        "value": {
            "seq": 3,
            "role": "user",
            "content": [{"type": "text", "text": "And what did I ask you to note earlier?"}],
            "subagent_call_id": None,
            "run_id": THREAD_RUN_ID,
        },
    },
    "run.finished": {
        "summary": "event: run.finished (the thread's stream goes on with its next run)",
        "value": {"state": "succeeded", "error": None, "run_id": THREAD_RUN_ID},
    },
}
