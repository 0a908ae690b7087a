"""The typed client of the hango HTTP API (``hango.client.Client``), on httpx."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, TypeVar, cast
from urllib.parse import quote

import httpx

from hango.client.errors import ProblemError, TransportError
from hango.client.sse import ReconnectingStream
from hango.client.types import (
    Agent,
    Approval,
    ApprovalPreview,
    AuditEvent,
    CreatedUser,
    CreatedWebhook,
    Decision,
    DecisionResult,
    Delivery,
    Event,
    File,
    FileInfo,
    Grant,
    IssuedToken,
    McpServer,
    McpServerTool,
    Me,
    Message,
    MultitaskStrategy,
    Page,
    Role,
    Run,
    Thread,
    ThreadMessage,
    ThreadStatus,
    User,
    Webhook,
    WebhookEventType,
)

T = TypeVar("T")
Params = dict[str, str | int | None]

# Keep-alives come every HANGO_SSE_KEEPALIVE (15s by default): a stream silent for this long is a dead connection.
STREAM_READ_TIMEOUT = 60.0


class Client:
    """One tenant's view of a hango server, authenticated by a bearer token.

    Every method returns the decoded JSON typed as in :mod:`hango.client.types`; a refusal raises
    :class:`ProblemError`, a network failure :class:`TransportError`. ``list_*`` return one page, ``iter_*`` follow
    ``next_cursor`` through every page, and :meth:`run_events`, :meth:`thread_events` and :meth:`approval_events`
    iterate live streams. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        stream_timeout: float = STREAM_READ_TIMEOUT,
        max_stream_retries: int = 5,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)
        self._stream_timeout = httpx.Timeout(timeout, read=stream_timeout)
        self._max_stream_retries = max_stream_retries

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # Operations.

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: the API process is alive."""
        return cast(dict[str, Any], self._request("GET", "/healthz"))

    def ready(self) -> dict[str, Any]:
        """``GET /readyz``: the database and the broker answer (a 503 problem otherwise)."""
        return cast(dict[str, Any], self._request("GET", "/readyz"))

    def openapi(self) -> dict[str, Any]:
        """``GET /openapi.json``: the server's OpenAPI document."""
        return cast(dict[str, Any], self._request("GET", "/openapi.json"))

    # Users and tokens.

    def me(self) -> Me:
        """``GET /v1/me``: the token's user, tenant and role."""
        return cast(Me, self._request("GET", "/v1/me"))

    def create_user(self, email: str, role: Role) -> CreatedUser:
        """Create a user of the tenant (owner, admin); the answer holds its first token, shown only here."""
        return cast(CreatedUser, self._request("POST", "/v1/users", json={"email": email, "role": role}))

    def list_users(self, *, limit: int | None = None, cursor: str | None = None) -> Page[User]:
        """One page of the tenant's users (owner, admin)."""
        return cast(Page[User], self._request("GET", "/v1/users", params=_page(limit, cursor)))

    def iter_users(self, *, limit: int | None = None) -> Iterator[User]:
        """Every user of the tenant, page after page."""
        return _pages(lambda cursor: self.list_users(limit=limit, cursor=cursor))

    def create_token(self, user_id: str) -> IssuedToken:
        """Issue another token for a user."""
        return cast(IssuedToken, self._request("POST", f"/v1/users/{user_id}/tokens"))

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token: it is refused at once."""
        self._request("DELETE", f"/v1/tokens/{token_id}")

    # Agents and their files.

    def create_agent(self, config: dict[str, Any]) -> Agent:
        """Create an agent from its configuration (owner, admin)."""
        return cast(Agent, self._request("POST", "/v1/agents", json=config))

    def get_agent(self, agent_id: str) -> Agent:
        """One agent."""
        return cast(Agent, self._request("GET", f"/v1/agents/{agent_id}"))

    def replace_agent(self, agent_id: str, config: dict[str, Any]) -> Agent:
        """Replace an agent's configuration whole (owner, admin); runs already created keep their snapshot."""
        return cast(Agent, self._request("PUT", f"/v1/agents/{agent_id}", json=config))

    def list_agents(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Agent]:
        """One page of the tenant's agents."""
        return cast(Page[Agent], self._request("GET", "/v1/agents", params=_page(limit, cursor)))

    def iter_agents(self, *, limit: int | None = None) -> Iterator[Agent]:
        """Every agent of the tenant."""
        return _pages(lambda cursor: self.list_agents(limit=limit, cursor=cursor))

    def list_files(
        self, agent_id: str, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> Page[FileInfo]:
        """One page of an agent's ``/memories/`` and ``/skills/`` files, optionally under ``prefix``."""
        params = {**_page(limit, cursor), "prefix": prefix}
        return cast(Page[FileInfo], self._request("GET", f"/v1/agents/{agent_id}/files", params=params))

    def iter_files(self, agent_id: str, *, prefix: str | None = None, limit: int | None = None) -> Iterator[FileInfo]:
        """Every file of an agent, optionally under ``prefix``."""
        return _pages(lambda cursor: self.list_files(agent_id, prefix=prefix, limit=limit, cursor=cursor))

    def read_file(self, agent_id: str, path: str) -> File:
        """One of an agent's files by its absolute path, e.g. ``/memories/AGENTS.md``."""
        return cast(File, self._request("GET", _file_url(agent_id, path)))

    def write_file(self, agent_id: str, path: str, content: str) -> File:
        """Create or replace one of an agent's files (owner, admin)."""
        return cast(File, self._request("PUT", _file_url(agent_id, path), json={"content": content}))

    def delete_file(self, agent_id: str, path: str) -> None:
        """Delete one of an agent's files (owner, admin)."""
        self._request("DELETE", _file_url(agent_id, path))

    # Runs.

    def create_run(
        self,
        agent_id: str,
        input: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        thread_id: str | None = None,
        multitask_strategy: MultitaskStrategy | None = None,
    ) -> Run:
        """Start a run of an agent on a text ``input`` or on ``messages``; it is answered ``queued``.

        With ``thread_id`` it is :meth:`start_thread_run` on that thread (whose agent ``agent_id`` must be).
        """
        body = {"agent_id": agent_id, **_run_input(input, messages, multitask_strategy)}
        if thread_id is not None:
            body["thread_id"] = thread_id
        return cast(Run, self._request("POST", "/v1/runs", json=body))

    def get_run(self, run_id: str) -> Run:
        """One run."""
        return cast(Run, self._request("GET", f"/v1/runs/{run_id}"))

    def list_runs(self, *, state: str | None = None, limit: int | None = None, cursor: str | None = None) -> Page[Run]:
        """One page of runs, newest first (a member's own runs only), optionally in one ``state``."""
        params = {**_page(limit, cursor), "state": state}
        return cast(Page[Run], self._request("GET", "/v1/runs", params=params))

    def iter_runs(self, *, state: str | None = None, limit: int | None = None) -> Iterator[Run]:
        """Every run visible to the caller, newest first."""
        return _pages(lambda cursor: self.list_runs(state=state, limit=limit, cursor=cursor))

    def cancel_run(self, run_id: str) -> Run:
        """Cancel a run (its creator, owner, admin); a terminal run is a 409."""
        return cast(Run, self._request("POST", f"/v1/runs/{run_id}/cancel"))

    def list_messages(self, run_id: str, *, limit: int | None = None, cursor: str | None = None) -> Page[Message]:
        """One page of a run's messages, by ``seq``."""
        params = _page(limit, cursor)
        return cast(Page[Message], self._request("GET", f"/v1/runs/{run_id}/messages", params=params))

    def iter_messages(self, run_id: str, *, limit: int | None = None) -> Iterator[Message]:
        """Every message of a run, by ``seq``."""
        return _pages(lambda cursor: self.list_messages(run_id, limit=limit, cursor=cursor))

    def run_events(self, run_id: str, *, after: int | str | None = None) -> Generator[Event, None, None]:
        """A run's events: the stored log (after ``after``), then live, ending after ``run.finished``.

        A dropped connection is reopened with ``Last-Event-ID``, so no event is lost or repeated.
        """
        stream = self._stream(f"/v1/runs/{run_id}/events", after, lambda event: event["type"] == "run.finished")
        return iter(stream)

    # Threads: conversations that go on across runs.

    def create_thread(self, agent_id: str, metadata: dict[str, Any] | None = None) -> Thread:
        """Start an empty conversation with an agent, labelled with ``metadata`` (a JSON object of your own)."""
        body = {"agent_id": agent_id, "metadata": metadata or {}}
        return cast(Thread, self._request("POST", "/v1/threads", json=body))

    def get_thread(self, thread_id: str) -> Thread:
        """One thread, with its status, last run and message count."""
        return cast(Thread, self._request("GET", _thread_url(thread_id)))

    def list_threads(
        self,
        *,
        status: ThreadStatus | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Thread]:
        """One page of the threads the caller sees (a member: their own), newest first.

        ``metadata`` keeps the threads whose metadata has each of these keys with this value (compared as text).
        """
        params: Params = {**_page(limit, cursor), "status": status, "agent_id": agent_id}
        params.update({f"metadata.{key}": value for key, value in (metadata or {}).items()})
        return cast(Page[Thread], self._request("GET", "/v1/threads", params=params))

    def iter_threads(
        self,
        *,
        status: ThreadStatus | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, str] | None = None,
        limit: int | None = None,
    ) -> Iterator[Thread]:
        """Every thread the caller sees matching the filters, newest first."""
        return _pages(
            lambda cursor: self.list_threads(
                status=status, agent_id=agent_id, metadata=metadata, limit=limit, cursor=cursor
            )
        )

    def update_thread(self, thread_id: str, metadata: dict[str, Any]) -> Thread:
        """Replace a thread's metadata whole (its creator, owner, admin)."""
        return cast(Thread, self._request("PATCH", _thread_url(thread_id), json={"metadata": metadata}))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread with its runs, messages and scratch files (a 409 problem while a run of it is active)."""
        self._request("DELETE", _thread_url(thread_id))

    def fork_thread(self, thread_id: str, up_to_seq: int | None = None) -> Thread:
        """A new thread whose conversation is this one's up to ``up_to_seq`` (``None``: all of it), shared, not
        copied; a 409 problem while a run of the thread is active."""
        body = {"up_to_seq": up_to_seq} if up_to_seq is not None else {}
        return cast(Thread, self._request("POST", f"{_thread_url(thread_id)}/fork", json=body))

    def start_thread_run(
        self,
        thread_id: str,
        input: str | None = None,
        *,
        messages: list[dict[str, Any]] | None = None,
        multitask_strategy: MultitaskStrategy | None = None,
    ) -> Run:
        """Continue a thread's conversation with a text ``input`` or ``messages``: a run answered ``queued``.

        While a run of the thread is active, ``multitask_strategy`` decides (``None``: the server's default,
        ``reject``, a 409 ``urn:hango:problem:thread-busy`` problem whose body names ``active_run_id``).
        """
        body = _run_input(input, messages, multitask_strategy)
        return cast(Run, self._request("POST", f"{_thread_url(thread_id)}/runs", json=body))

    def list_thread_runs(self, thread_id: str, *, limit: int | None = None, cursor: str | None = None) -> Page[Run]:
        """One page of a thread's runs, newest first."""
        path = f"{_thread_url(thread_id)}/runs"
        return cast(Page[Run], self._request("GET", path, params=_page(limit, cursor)))

    def iter_thread_runs(self, thread_id: str, *, limit: int | None = None) -> Iterator[Run]:
        """Every run of a thread, newest first."""
        return _pages(lambda cursor: self.list_thread_runs(thread_id, limit=limit, cursor=cursor))

    def list_thread_messages(
        self, thread_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[ThreadMessage]:
        """One page of a thread's conversation, by its thread-wide ``seq``."""
        path = f"{_thread_url(thread_id)}/messages"
        return cast(Page[ThreadMessage], self._request("GET", path, params=_page(limit, cursor)))

    def iter_thread_messages(self, thread_id: str, *, limit: int | None = None) -> Iterator[ThreadMessage]:
        """A thread's whole conversation, by ``seq``, page after page."""
        return _pages(lambda cursor: self.list_thread_messages(thread_id, limit=limit, cursor=cursor))

    def thread_events(self, thread_id: str, *, after: int | str | None = None) -> Generator[Event, None, None]:
        """Every event of a thread's runs in order (after the event id ``after``), then live; each event's data
        names its ``run_id``. The stream stays open while the thread exists, idle or not: stop iterating (or close
        the generator) when done. A dropped connection is reopened with ``Last-Event-ID``.
        """
        return iter(self._stream(f"{_thread_url(thread_id)}/events", after, lambda event: False))

    # Approvals.

    def list_run_approvals(
        self, run_id: str, *, state: str = "pending", limit: int | None = None, cursor: str | None = None
    ) -> Page[Approval]:
        """One page of a run's approvals, oldest first; ``state`` ``all`` for every state."""
        params = {**_page(limit, cursor), "state": state}
        return cast(Page[Approval], self._request("GET", f"/v1/runs/{run_id}/approvals", params=params))

    def iter_run_approvals(
        self, run_id: str, *, state: str = "pending", limit: int | None = None
    ) -> Iterator[Approval]:
        """Every approval of a run in ``state``, oldest first."""
        return _pages(lambda cursor: self.list_run_approvals(run_id, state=state, limit=limit, cursor=cursor))

    def list_approvals(
        self, *, state: str = "pending", limit: int | None = None, cursor: str | None = None
    ) -> Page[Approval]:
        """One page of the tenant's approval queue, oldest first (a member's: their own runs')."""
        params = {**_page(limit, cursor), "state": state}
        return cast(Page[Approval], self._request("GET", "/v1/approvals", params=params))

    def iter_approvals(self, *, state: str = "pending", limit: int | None = None) -> Iterator[Approval]:
        """Every approval of the tenant in ``state``, oldest first."""
        return _pages(lambda cursor: self.list_approvals(state=state, limit=limit, cursor=cursor))

    def get_approval(self, approval_id: str) -> Approval:
        """``GET /v1/approvals/{id}``: one approval in any state (a 404 problem when the caller cannot see it)."""
        return cast(Approval, self._request("GET", f"/v1/approvals/{_segment(approval_id)}"))

    def approval_preview(self, approval_id: str) -> ApprovalPreview:
        """``GET /v1/approvals/{id}/preview``: what the call would make of its file, worked out by the server for
        the normalised path the tool will write (``kind`` ``none`` for a tool that changes no file)."""
        return cast(ApprovalPreview, self._request("GET", f"/v1/approvals/{_segment(approval_id)}/preview"))

    def decide(self, run_id: str, decisions: list[Decision]) -> DecisionResult:
        """Decide every pending call of a suspended run in one request (owner, admin; never a member).

        An approve may carry ``remember`` (``{"ttl": "1h"}``, optionally ``when``) to create a standing approval
        of the same tool; each decided approval's ``remembered_grant_id`` names it.
        """
        body = {"decisions": decisions}
        return cast(DecisionResult, self._request("POST", f"/v1/runs/{run_id}/approvals", json=body))

    def approval_events(self, *, after: str | None = None) -> Generator[Event, None, None]:
        """The tenant's live approval queue (requested, decided, expired, cancelled), until the server ends it.

        A dropped connection is reopened with ``Last-Event-ID``; ``after`` resumes from an event already seen.
        """
        return iter(self._stream("/v1/approvals/events", after, lambda event: False))

    # Standing approvals (owner, admin).

    def create_grant(
        self,
        agent_id: str,
        tool_name: str,
        ttl: str,
        *,
        when: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> Grant:
        """Approve, for ``ttl`` (e.g. ``"1h"``), the calls of an agent's tool that a rule would suspend and
        ``when`` matches (``None``: every call), in ``run_id`` only if given."""
        body = {"agent_id": agent_id, "tool_name": tool_name, "ttl": ttl, "when": when, "run_id": run_id}
        return cast(Grant, self._request("POST", "/v1/grants", json=body))

    def list_grants(
        self,
        *,
        agent_id: str | None = None,
        active: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Grant]:
        """One page of the tenant's grants, newest first; ``agent_id`` and ``active`` filter."""
        flag = None if active is None else str(active).lower()
        params = {**_page(limit, cursor), "agent_id": agent_id, "active": flag}
        return cast(Page[Grant], self._request("GET", "/v1/grants", params=params))

    def iter_grants(
        self, *, agent_id: str | None = None, active: bool | None = None, limit: int | None = None
    ) -> Iterator[Grant]:
        """Every grant of the tenant matching the filters, newest first."""
        return _pages(lambda cursor: self.list_grants(agent_id=agent_id, active=active, limit=limit, cursor=cursor))

    def get_grant(self, grant_id: str) -> Grant:
        """One grant."""
        return cast(Grant, self._request("GET", f"/v1/grants/{grant_id}"))

    def revoke_grant(self, grant_id: str) -> None:
        """Revoke a grant at once (revoking it again changes nothing)."""
        self._request("DELETE", f"/v1/grants/{grant_id}")

    # Webhooks (owner, admin).

    def create_webhook(self, url: str, events: list[WebhookEventType], *, description: str = "") -> CreatedWebhook:
        """Subscribe ``url`` to ``events``; the answer's ``secret`` (to verify signatures) is shown only here."""
        body = {"url": url, "events": events, "description": description}
        return cast(CreatedWebhook, self._request("POST", "/v1/webhooks", json=body))

    def list_webhooks(self, *, limit: int | None = None, cursor: str | None = None) -> Page[Webhook]:
        """One page of the tenant's webhooks."""
        return cast(Page[Webhook], self._request("GET", "/v1/webhooks", params=_page(limit, cursor)))

    def iter_webhooks(self, *, limit: int | None = None) -> Iterator[Webhook]:
        """Every webhook of the tenant."""
        return _pages(lambda cursor: self.list_webhooks(limit=limit, cursor=cursor))

    def get_webhook(self, webhook_id: str) -> Webhook:
        """One webhook (never its secret)."""
        return cast(Webhook, self._request("GET", f"/v1/webhooks/{webhook_id}"))

    def delete_webhook(self, webhook_id: str) -> None:
        """Stop notifying a webhook."""
        self._request("DELETE", f"/v1/webhooks/{webhook_id}")

    def list_deliveries(
        self, webhook_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Delivery]:
        """One page of a webhook's delivery log, newest first."""
        path = f"/v1/webhooks/{webhook_id}/deliveries"
        return cast(Page[Delivery], self._request("GET", path, params=_page(limit, cursor)))

    def iter_deliveries(self, webhook_id: str, *, limit: int | None = None) -> Iterator[Delivery]:
        """A webhook's whole delivery log, newest first."""
        return _pages(lambda cursor: self.list_deliveries(webhook_id, limit=limit, cursor=cursor))

    def retry_delivery(self, webhook_id: str, delivery_id: str) -> Delivery:
        """Send a delivery again now (same ``webhook-id``), with a fresh retry window."""
        path = f"/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry"
        return cast(Delivery, self._request("POST", path))

    # MCP servers (everyone reads; owners and admins change the tenant's own).

    def mcp_servers(self) -> list[McpServer]:
        """``GET /v1/mcp-servers``: every server the tenant's agents may name, the operator's first."""
        page = cast(Page[McpServer], self._request("GET", "/v1/mcp-servers"))
        return page["items"]

    def mcp_server(self, name: str) -> McpServer:
        """One server, as the tenant's agents mean its name (the operator's of that name, else the tenant's)."""
        return cast(McpServer, self._request("GET", f"/v1/mcp-servers/{_segment(name)}"))

    def create_mcp_server(
        self,
        name: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        trusted: bool = False,
        description: str = "",
    ) -> McpServer:
        """Add a streamable HTTP server to the tenant; ``headers`` (an API key, say) are never shown again."""
        body = {"name": name, **_server_body(url, headers, trusted, description)}
        return cast(McpServer, self._request("POST", "/v1/mcp-servers", json=body))

    def update_mcp_server(
        self,
        name: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        trusted: bool = False,
        description: str = "",
    ) -> McpServer:
        """Replace a tenant server's URL, trust and description; ``headers`` ``None`` keeps the stored ones, a
        mapping (``{}`` included) replaces them."""
        body = _server_body(url, headers, trusted, description)
        return cast(McpServer, self._request("PUT", f"/v1/mcp-servers/{_segment(name)}", json=body))

    def delete_mcp_server(self, name: str) -> None:
        """Remove a tenant server (a 409 problem while an agent names it)."""
        self._request("DELETE", f"/v1/mcp-servers/{_segment(name)}")

    def mcp_server_tools(self, name: str) -> list[McpServerTool]:
        """The server's tools as it lists them now (a 502 ``mcp-unavailable`` problem when it does not answer)."""
        return cast(list[McpServerTool], self._request("GET", f"/v1/mcp-servers/{_segment(name)}/tools"))

    # Audit.

    def list_audit_events(
        self,
        *,
        action: str | None = None,
        target_kind: str | None = None,
        target_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[AuditEvent]:
        """One page of the tenant's audit trail, newest first (owner, admin)."""
        params = {**_page(limit, cursor), "action": action, "target_kind": target_kind, "target_id": target_id}
        return cast(Page[AuditEvent], self._request("GET", "/v1/audit-events", params=params))

    def iter_audit_events(
        self,
        *,
        action: str | None = None,
        target_kind: str | None = None,
        target_id: str | None = None,
        limit: int | None = None,
    ) -> Iterator[AuditEvent]:
        """Every audit row matching the filters, newest first."""
        return _pages(
            lambda cursor: self.list_audit_events(
                action=action, target_kind=target_kind, target_id=target_id, limit=limit, cursor=cursor
            )
        )

    # The wire.

    def _request(self, method: str, path: str, *, params: Params | None = None, json: Any = None) -> Any:
        query = {key: value for key, value in (params or {}).items() if value is not None}
        try:
            response = self._http.request(method, path, params=query, json=json)
        except httpx.TransportError as error:
            raise TransportError(f"{method} {self.base_url}{path}: {error}") from error
        if response.is_error:
            raise ProblemError.from_response(response)
        return response.json() if response.content else None

    def _stream(self, path: str, after: int | str | None, is_last: Callable[[Event], bool]) -> ReconnectingStream:
        def open_stream(last_id: str | None) -> AbstractContextManager[httpx.Response]:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            return self._http.stream("GET", path, headers=headers, timeout=self._stream_timeout)

        last_id = None if after is None else str(after)
        return ReconnectingStream(open_stream, last_id, max_retries=self._max_stream_retries, is_last=is_last)


def _page(limit: int | None, cursor: str | None) -> Params:
    return {"limit": limit, "cursor": cursor}


def _pages(fetch: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a list, fetching the next page only when the previous one is used up."""
    cursor: str | None = None
    while True:
        page = fetch(cursor)
        yield from page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return


def _segment(text: str) -> str:
    """``text`` as one path segment: a ``/``, ``?`` or ``#`` in an id must not reach another route."""
    return quote(text, safe="")


def _thread_url(thread_id: str) -> str:
    return f"/v1/threads/{_segment(thread_id)}"


def _run_input(
    input: str | None, messages: list[dict[str, Any]] | None, strategy: MultitaskStrategy | None
) -> dict[str, Any]:
    """A run's body: what the user says, and the thread's strategy when one is given (left out: the server's)."""
    given = {"input": input, "messages": messages, "multitask_strategy": strategy}
    return {name: value for name, value in given.items() if value is not None}


def _file_url(agent_id: str, path: str) -> str:
    return f"/v1/agents/{agent_id}/files/{quote(path.lstrip('/'))}"


def _server_body(url: str, headers: dict[str, str] | None, trusted: bool, description: str) -> dict[str, Any]:
    """A server's body for ``POST`` or ``PUT /v1/mcp-servers``: ``headers`` left out when ``None`` (kept by a PUT)."""
    body: dict[str, Any] = {"url": url, "trusted": trusted, "description": description}
    if headers is not None:
        body["headers"] = headers
    return body
