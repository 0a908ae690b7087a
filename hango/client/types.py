"""The shapes the hango API answers with, as TypedDicts: the decoded JSON itself, typed for readers and mypy."""

from __future__ import annotations

from typing import Any, Generic, Literal, NotRequired, Required, TypedDict, TypeVar

T = TypeVar("T")

Role = Literal["owner", "admin", "member"]
RunState = Literal["queued", "running", "awaiting_approval", "succeeded", "failed", "cancelled"]
ApprovalState = Literal["pending", "decided", "expired", "cancelled"]
DecisionKind = Literal["approve", "edit", "reject", "respond"]
Execution = Literal["not_started", "executing", "done", "outcome_unknown"]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt"]
"""What a run sent to a thread does while another of its runs is active: ``reject`` (a 409 ``thread-busy``
problem), ``enqueue`` (start after the earlier ones, in order) or ``interrupt`` (cancel them)."""


class Page(TypedDict, Generic[T]):
    """One page of a list: its items and the cursor of the next page (``None`` on the last)."""

    items: list[T]
    next_cursor: str | None


class User(TypedDict):
    """A member of the tenant."""

    id: str
    email: str
    role: Role
    created_at: str


class CreatedUser(TypedDict):
    """A user just created, with its first token (shown only in this answer)."""

    id: str
    email: str
    role: Role
    token: str


class Me(TypedDict):
    """The token's user: ``GET /v1/me``."""

    user_id: str
    email: str
    tenant_id: str
    role: Role


class IssuedToken(TypedDict):
    """A token just issued (its secret is shown only in this answer)."""

    id: str
    token: str


class AgentWarning(TypedDict):
    """What an agent's own interrupt rules no longer cover, in a reviewer's words: a default rule replaced or
    lifted, or a tool that can write and that no rule covers."""

    tool: str
    message: str


class Agent(TypedDict, total=False):
    """An agent definition as the API shows it, with its merged interrupt rules.

    ``warnings`` comes with the answer of a create or a replace only (``[]``: nothing to say).
    """

    id: Required[str]
    name: Required[str]
    system_prompt: str
    model: dict[str, Any]
    tools: list[str]
    interrupt_on: dict[str, Any] | None
    subagents: list[dict[str, Any]]
    max_turns: int
    max_tokens: int | None
    effective_interrupt_on: dict[str, Any]
    created_by: str
    created_at: str
    updated_at: str
    warnings: list[AgentWarning]


class Usage(TypedDict):
    """Tokens used by a run's model calls."""

    input_tokens: int
    output_tokens: int


class Run(TypedDict):
    """A run of an agent."""

    id: str
    agent_id: str
    thread_id: str | None  # the thread the run continues; None for a run of its own
    state: RunState
    created_by: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    awaiting_since: str | None
    error: str | None
    turn: int
    usage: NotRequired[Usage]


class Message(TypedDict):
    """One message of a run, by its sequence number."""

    seq: int
    role: Literal["user", "assistant", "tool"]
    content: list[dict[str, Any]]
    subagent_call_id: str | None


class Thread(TypedDict):
    """A conversation with an agent that goes on across runs, one run at a time.

    ``status``: ``busy`` while a run is queued or running, ``interrupted`` while one awaits approval, ``error`` after
    a failed last run, else ``idle``.
    """

    id: str
    agent_id: str
    created_by: str
    created_at: str
    updated_at: str
    status: ThreadStatus
    metadata: dict[str, Any]
    last_run_id: str | None
    message_count: int


class ThreadMessage(TypedDict):
    """One message of a thread's conversation, by its thread-wide sequence number, with the run that stored it."""

    seq: int
    run_id: str
    role: Literal["user", "assistant", "tool"]
    content: list[dict[str, Any]]


class Approval(TypedDict):
    """A tool call that waits for (or had) a human decision."""

    id: str
    run_id: str
    thread_id: str | None  # the run's thread; None for a run without one
    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    arguments_sha256: str  # hex SHA-256 of the arguments' RFC 8785 canonical JSON
    allowed_decisions: list[DecisionKind]
    state: ApprovalState
    subagent_call_id: str | None
    created_at: str
    expires_at: str
    decision: DecisionKind | None
    decision_args: dict[str, Any] | None
    decision_message: str | None
    decided_by: str | None
    decided_at: str | None
    execution: Execution  # where an approved call stands; outcome_unknown: its worker stopped mid-call
    on_expiry: Any  # what its deadline does: "fail", "reject" or {"escalate": {...}, "ttl": "1h"}
    escalated_at: str | None  # when its first deadline handed it to the escalation's reviewers
    grant_id: str | None  # the standing approval that approved the call without a human
    description: str | None  # why the call waits, in its rule's words (None: the rule gives none)
    reviewers: Reviewers | None  # who may decide (the rule's); None: every owner and admin
    approvals_required: int  # distinct approving reviewers the call needs; 1 is a plain decision
    votes: list[ApprovalVote]  # a quorum's votes so far, oldest first
    mcp: McpTool | None  # an MCP call's server and tool as the run pinned them; None for any other tool
    definition_sha256: str | None  # an MCP call's pinned tool definition digest; None for any other tool


class McpAnnotations(TypedDict, total=False):
    """An MCP tool's annotations, only those its server gave: hints, believed only of a trusted server."""

    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class McpTool(TypedDict):
    """The MCP server and tool of an approval's call, as the run pinned them: the server's own words (untrusted
    text when the server is), shown to the reviewer."""

    server: str
    tool: str  # the tool's own name on that server
    title: str | None
    description: str
    annotations: McpAnnotations
    trusted: bool  # whether the server was trusted when the run pinned the tool


class ApprovalPreview(TypedDict):
    """What an approval's call would make of its file, worked out by the server with the tool's own code."""

    approval_id: str
    tool_name: str
    kind: Literal["file", "none"]  # none: the tool changes no file the server can show (note says so)
    file_path: str | None  # the path as the call wrote it
    path: str | None  # the normalised path the tool will write; None when the tool refuses the path
    path_differs: bool
    storage: Literal["agent", "run"] | None  # agent: /memories/ or /skills/, persisting across runs
    exists: bool | None
    error: str | None  # the error result the tool would answer instead of changing the file
    diff: str | None  # unified diff of the file now against what the call would make it
    too_large: bool  # over HANGO_PREVIEW_MAX_LINES / _BYTES: not diffed
    note: str | None


class Reviewers(TypedDict, total=False):
    """Who may decide an approval: owners/admins by role, or users by id."""

    roles: list[Literal["owner", "admin"]]
    users: list[str]


class ApprovalVote(TypedDict):
    """One reviewer's vote on an approval of a quorum rule."""

    user_id: str
    vote: Literal["approve", "reject"]
    created_at: str


class DecidedApproval(Approval):
    """An approval as a decision request answers it."""

    remembered_grant_id: str | None  # the grant this decision's ``remember`` created


class Remember(TypedDict, total=False):
    """``remember`` on an approve: also create a standing approval of the same tool.

    ``when`` omitted covers exactly the approved call: every argument pinned, the tool's defaults included, and
    no other argument allowed; ``None`` covers every call of the tool.
    """

    ttl: Required[str]  # a duration such as "1h", at most the server's HANGO_GRANT_MAX_TTL
    when: dict[str, Any] | None


class Decision(TypedDict, total=False):
    """One decision of ``POST /v1/runs/{id}/approvals``: a call named by ``tool_call_id`` or ``approval_id``."""

    tool_call_id: str
    approval_id: str
    decision: Required[DecisionKind]
    args: dict[str, Any]
    message: str
    arguments_sha256: str  # the approval's, as the decider saw it: another is a 409 stale-approval
    remember: Remember  # approve only


class DecisionResult(TypedDict):
    """The run as the decisions committed it (``queued``), and the approvals they decided."""

    run: Run
    approvals: list[DecidedApproval]


class Grant(TypedDict):
    """A standing approval: calls of an agent's tool that a rule would suspend and ``when`` matches run without a
    human until ``expires_at`` or a revocation."""

    id: str
    agent_id: str
    tool_name: str
    when: dict[str, Any] | None  # matchers as in an interrupt rule's ``when``; None: every call
    exact: bool  # a remember of one call: ``when`` pins every argument (defaults included), no other allowed
    run_id: str | None  # only this run of the agent
    created_by: str
    created_at: str
    expires_at: str
    revoked_at: str | None
    revoked_by: str | None
    active: bool  # neither revoked nor expired


class FileInfo(TypedDict):
    """One of an agent's persistent files, without its content."""

    path: str
    size: int
    updated_at: str


class File(TypedDict):
    """One of an agent's persistent files, with its content."""

    path: str
    content: str
    updated_at: str


WebhookEventType = Literal[
    "approval.requested",
    "approval.decided",
    "approval.expired",
    "approval.escalated",
    "approval.cancelled",
    "approval.reminder",
    "run.finished",
]


class Webhook(TypedDict):
    """A webhook: where the tenant's notifications are sent."""

    id: str
    url: str
    events: list[WebhookEventType]
    description: str
    active: bool
    created_at: str


class CreatedWebhook(Webhook):
    """A webhook as its creation answers: with its signing secret, shown only then."""

    secret: str


class Delivery(TypedDict):
    """One event's delivery to one webhook; ``event_id`` is its ``webhook-id`` header, the same on every retry."""

    id: str
    event_id: str
    event_type: WebhookEventType
    attempts: int
    state: Literal["pending", "delivered", "failed"]
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: str | None
    created_at: str
    delivered_at: str | None


class McpServer(TypedDict, total=False):
    """An MCP server the tenant's agents may name. An operator's (``scope`` ``operator``) shows only its name,
    scope, transport, trust and description; a tenant's also its URL and who added it when. Never its headers."""

    name: Required[str]
    scope: Required[Literal["operator", "tenant"]]
    transport: Required[Literal["stdio", "streamable_http"]]
    trusted: Required[bool]
    description: Required[str]
    url: str
    created_by: str | None
    created_at: str
    updated_at: str


class McpServerTool(TypedDict):
    """One tool of an MCP server as the server lists it now, as a run would pin it."""

    name: str  # as the server knows it
    hango_name: str  # mcp__<server>__<tool>, how agents' tools and rules name it
    title: str | None
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]  # readOnlyHint, destructiveHint, idempotentHint, openWorldHint...
    definition_sha256: str  # SHA-256 of the RFC 8785 canonical JSON of the tool as listed


class AuditEvent(TypedDict):
    """One row of the tenant's audit trail."""

    id: str
    actor_kind: str
    actor_id: str | None
    action: str
    target_kind: str
    target_id: str | None
    outcome: str
    detail: dict[str, Any]
    trace_id: str | None
    created_at: str


class FieldError(TypedDict):
    """One invalid field of a 400 problem document."""

    field: str
    message: str


class Event(TypedDict):
    """One Server-Sent Event: its id (a run's sequence number, a thread stream's integer increasing across its runs,
    or the tenant stream's opaque id), type and data."""

    id: str | None
    type: str
    data: Any
