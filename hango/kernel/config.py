"""Settings, read once from the ``HANGO_*`` environment at process start.

Every timeout, TTL and limit the server uses lives here, so tests can run with seconds instead of hours. A
missing or malformed variable raises :class:`ConfigError` naming it; the CLI turns that into a one-line message
and a non-zero exit before anything else starts.

Each setting is declared once, as a field of :class:`Settings`: its name (the variable is ``HANGO_`` and the name
in capitals), its type, its default, the parser that reads its text, and a one-line description.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from hango.kernel.errors import ConfigError

# ASCII digits and spaces only, so that the OpenAPI document can spell the same grammar as a pattern.
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.ASCII)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """Parse ``90s``, ``15m``, ``24h``, ``2d``, ``500ms`` or a plain number of seconds.

    Raises:
        ValueError: when the text is not a non-negative duration.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (use e.g. 90s, 15m, 24h or a number of seconds)")
    number, unit = match.groups()
    return timedelta(seconds=float(number) * _UNIT_SECONDS[unit or "s"])


def spelt_duration(duration: timedelta) -> str:
    """A duration as a person would write it for :func:`parse_duration`: ``30d``, ``4h``, ``90s``."""
    seconds = duration.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def parse_positive_int(text: str) -> int:
    """Parse a whole number greater than zero."""
    value = int(text.strip())
    if value <= 0:
        raise ValueError(f"{text!r} is not a whole number greater than zero")
    return value


def parse_port(text: str) -> int:
    """A TCP port, 1 to 65535, or 0 for "none"."""
    value = int(text.strip())
    if not 0 <= value <= 65535:
        raise ValueError(f"{text!r} is not a port (0 to 65535)")
    return value


def parse_postgres_url(text: str) -> str:
    """Check that ``text`` is a SQLAlchemy URL for PostgreSQL and return it unchanged."""
    try:
        url = make_url(text)
    except ArgumentError as exc:
        raise ValueError(f"{text!r} is not a database URL") from exc
    if url.get_backend_name() != "postgresql":
        raise ValueError("hango needs PostgreSQL: the URL must start with postgresql://")
    return text


def parse_redis_url(text: str) -> str:
    """Check that ``text`` is a Redis URL and return it unchanged."""
    if not text.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("the URL must start with redis://, rediss:// or unix://")
    return text


def parse_bool(text: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``), in any case."""
    word = text.strip().lower()
    if word in {"true", "1", "yes", "on"}:
        return True
    if word in {"false", "0", "no", "off"}:
        return False
    raise ValueError(f"{text!r} is not a boolean (use true or false)")


def parse_log_level(text: str) -> str:
    """Accept a standard logging level name."""
    level = text.strip().upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ValueError(f"{text!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def parse_name(text: str) -> str:
    """A queue or similar name: letters, digits, ``.``, ``-`` and ``_``."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", text):
        raise ValueError(f"{text!r} may only hold letters, digits, '.', '-' and '_'")
    return text


def parse_http_url(text: str) -> str:
    """An http(s) base URL."""
    if not text.startswith(("http://", "https://")):
        raise ValueError("the URL must start with http:// or https://")
    return text


def parse_basic_auth(text: str) -> str:
    """``user:password`` for HTTP basic auth; both parts non-empty, and no comma (Flower reads a comma list)."""
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise ValueError("use user:password, both non-empty")
    if "," in text:
        raise ValueError("a comma would split it into several logins; choose a password without one")
    return text


def parse_module_list(text: str) -> tuple[str, ...]:
    """Comma-separated dotted module names."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
            raise ValueError(f"{name!r} is not a module name")
    return names


def parse_fernet_keys(text: str) -> tuple[str, ...]:
    """Comma-separated Fernet keys (``Fernet.generate_key()``: url-safe base64 of 32 bytes)."""
    keys = tuple(key.strip() for key in text.split(",") if key.strip())
    for index, key in enumerate(keys, start=1):
        try:
            raw = base64.urlsafe_b64decode(key.encode("ascii"))
        except (ValueError, UnicodeEncodeError) as exc:
            raise ValueError(f"key {index} is not url-safe base64") from exc
        if len(raw) != 32:
            raise ValueError(f"key {index} is not a Fernet key (32 bytes in url-safe base64)")
    return keys


def _from_text(parser: Callable[[str], object]) -> BeforeValidator:
    """Read text (what the environment holds) with ``parser``; a value of the setting's own type passes through."""

    def read(value: object) -> object:
        return parser(value) if isinstance(value, str) else value

    return BeforeValidator(read)


# The kinds of setting: the Python type callers see, and how its text in the environment is read.
Duration = Annotated[timedelta, _from_text(parse_duration)]
WholeNumber = Annotated[int, _from_text(parse_positive_int)]
Port = Annotated[int, _from_text(parse_port), Field(ge=0, le=65535)]
Flag = Annotated[bool, _from_text(parse_bool)]
PostgresUrl = Annotated[str, _from_text(parse_postgres_url)]
RedisUrl = Annotated[str, _from_text(parse_redis_url)]
HttpUrl = Annotated[str, _from_text(parse_http_url)]
LogLevel = Annotated[str, _from_text(parse_log_level)]
Name = Annotated[str, _from_text(parse_name)]
BasicAuth = Annotated[str, _from_text(parse_basic_auth)]
ModuleList = Annotated[tuple[str, ...], _from_text(parse_module_list)]
FernetKeys = Annotated[tuple[str, ...], _from_text(parse_fernet_keys)]


@dataclass(frozen=True)
class SessionTimeouts:
    """What PostgreSQL lets one of hango's sessions take (:meth:`Settings.session_timeouts`)."""

    connect: timedelta
    statement: timedelta
    lock: timedelta
    idle_in_transaction: timedelta
    # How long a connection may be silent before TCP keepalive probes ask whether the server is still there.
    keepalive_idle: timedelta


class Settings(BaseSettings):
    """Process-wide settings. Build them with :meth:`from_env`, or directly in tests."""

    model_config = SettingsConfigDict(env_prefix="HANGO_", frozen=True, extra="forbid", protected_namespaces=())

    database_url: PostgresUrl | None = Field(default=None, description="PostgreSQL URL")
    redis_url: RedisUrl | None = Field(default=None, description="Redis URL (broker and pub/sub)")
    approval_ttl: Duration = Field(
        default=timedelta(hours=24),
        description="how long an approval may wait before its run fails with `approval expired`",
    )
    approval_max_ttl: Duration = Field(
        default=timedelta(days=30),
        description="the longest deadline an interrupt rule's `ttl` (or an escalation's) may set",
    )
    approval_sweep_interval: Duration = Field(
        default=timedelta(minutes=1), description="how often the sweeper looks for expired approvals"
    )
    interrupts_enabled: Flag = Field(
        default=True,
        description="false switches interrupts off (no call waits for a human); decisions already stored are still "
        "applied on resume",
    )
    max_body_bytes: WholeNumber = Field(default=1_048_576, description="request bodies above this are a 413")
    max_json_depth: WholeNumber = Field(
        default=64, description="JSON bodies nesting arrays and objects deeper than this are a 400"
    )
    redis_max_connections: WholeNumber = Field(
        default=64, description="Redis connections per process pool; more callers at once wait for one (up to 5s)"
    )
    db_pool_size: WholeNumber = Field(default=5, description="connections per process pool")
    db_ping_after_idle: Duration = Field(
        default=timedelta(seconds=10),
        description="a pooled connection idle longer than this is checked with `SELECT 1` before use",
    )
    # hango's own database sessions end what hangs: a session can never hold a run's row past its lease for long.
    db_connect_timeout: Duration = Field(
        default=timedelta(seconds=5), description="how long opening a database connection may take"
    )
    db_statement_timeout: Duration | None = Field(
        default=None, description="longest statement of hango's sessions; unset, twice `HANGO_RUN_LEASE`"
    )
    db_lock_timeout: Duration | None = Field(
        default=None,
        description="longest wait of one statement for a lock (a row, a table); unset, half of `HANGO_RUN_LEASE`",
    )
    db_idle_in_transaction_timeout: Duration | None = Field(
        default=None,
        description="how long a session may sit in a transaction between statements before PostgreSQL ends it (a "
        "frozen or partitioned process); unset, `HANGO_TOOL_TIMEOUT` plus `HANGO_RUN_LEASE` (tools run inside their "
        "batch's transaction)",
    )
    unavailable_retry_after: Duration = Field(
        default=timedelta(seconds=5),
        description="the `Retry-After` of a 503 answered while the database or Redis cannot be reached",
    )
    log_level: LogLevel = Field(default="INFO", description="DEBUG … CRITICAL")
    queue: Name = Field(default="hango", description="the Celery queue runs travel on")
    run_lease: Duration = Field(default=timedelta(seconds=12), description="a worker's lease on a run")
    run_heartbeat_interval: Duration = Field(
        default=timedelta(seconds=3), description="how often a worker renews its lease on a run"
    )
    reconcile_interval: Duration = Field(default=timedelta(seconds=5), description="reconciler period")
    requeue_after: Duration = Field(
        default=timedelta(seconds=60), description="how long a queued run may wait before it is enqueued again"
    )
    enqueue_dedup_ttl: Duration = Field(
        default=timedelta(minutes=5), description="how long an enqueue of one run generation is deduplicated"
    )
    max_run_attempts: WholeNumber = Field(default=3, description="lost workers after which a run fails")
    max_run_give_backs: WholeNumber = Field(
        default=10,
        description="times in a row a worker may give a run back after a transient database error (a lost "
        "connection, a deadlock, a timeout) before the run fails; the count restarts when the run makes progress",
    )
    task_time_limit: Duration = Field(
        default=timedelta(hours=1),
        description="hard limit of one task execution (the broker visibility timeout is twice that)",
    )
    sse_keepalive: Duration = Field(
        default=timedelta(seconds=15), description="keep-alive comment interval of idle event streams"
    )
    model_retry_attempts: WholeNumber = Field(default=4, description="attempts of one model call")
    model_retry_base_delay: Duration = Field(
        default=timedelta(seconds=1), description="first delay between model call attempts"
    )
    model_retry_max_delay: Duration = Field(
        default=timedelta(seconds=30), description="longest delay between model call attempts"
    )
    model_timeout: Duration = Field(default=timedelta(seconds=120), description="timeout of one model call")
    anthropic_base_url: HttpUrl | None = Field(default=None, description="Anthropic endpoint")
    anthropic_api_key: str | None = Field(default=None, description="Anthropic credential")
    openai_base_url: HttpUrl | None = Field(default=None, description="OpenAI endpoint")
    openai_api_key: str | None = Field(default=None, description="OpenAI credential")
    tool_modules: ModuleList = Field(default=(), description="comma-separated modules whose `TOOLS` list is registered")
    max_subagent_depth: WholeNumber = Field(default=3, description="how deep `task` calls may nest")
    otlp_endpoint: HttpUrl | None = Field(default=None, description="OTLP/HTTP traces endpoint; unset, tracing is off")
    # Limits a hostile tenant, member or model meets as a clear error (api.md "Limits and roles").
    max_streams_per_user: WholeNumber = Field(
        default=50, description="open event streams per user across API processes; one more is a 429"
    )
    # An API process is a gevent worker: an open event stream is a greenlet holding one of its connections, so one
    # process serves at most ``stream_capacity()`` streams and keeps the other connections for ordinary requests.
    api_connections: WholeNumber = Field(
        default=8192,
        description="simultaneous client connections per API process (`hango api --connections` defaults to it)",
    )
    max_streams_per_process: WholeNumber | None = Field(
        default=None, description="how many of those connections streams may hold; unset, three quarters of them"
    )
    stream_check_ttl: Duration = Field(
        default=timedelta(seconds=1),
        description="how long the streams of one API process share an answer about a token, a run or a log's end",
    )
    stream_buffer: WholeNumber = Field(
        default=256,
        description="live events queued for one slow stream before it re-reads them from the database instead",
    )
    approval_events_retention: Duration | None = Field(
        default=None,
        description="how long the tenant approval stream can be replayed; unset, twice `HANGO_APPROVAL_TTL`",
    )
    max_file_bytes: WholeNumber = Field(default=1_048_576, description="largest file a tool may write")
    max_run_storage_bytes: WholeNumber = Field(
        default=64 * 1_048_576, description="a run's scratch files (a thread's run: its thread's)"
    )
    max_thread_metadata_bytes: WholeNumber = Field(default=16_384, description="a thread's metadata, as JSON")
    max_agent_storage_bytes: WholeNumber = Field(
        default=64 * 1_048_576, description="an agent's `/memories/` and `/skills/`"
    )
    tool_timeout: Duration = Field(
        default=timedelta(seconds=30), description="one tool call; past it the call is stopped and its changes undone"
    )
    # The approval preview diffs in the API process, inside a request: only what it can diff quickly is diffed.
    preview_max_lines: WholeNumber = Field(
        default=5000,
        description="lines an approval preview diffs at most (the changed part of the file, as it is now and as the "
        "call would make it, together); a larger change is answered as too large to preview",
    )
    preview_max_bytes: WholeNumber = Field(
        default=1_048_576, description="UTF-8 bytes an approval preview diffs at most, counted like its lines"
    )
    # Operations surface: Flower's basic auth and the bearer token /metrics asks for.
    flower_basic_auth: BasicAuth | None = Field(
        default=None, description="`user:password` Flower asks for; unset, `hango flower` refuses to start"
    )
    task_sent_events: Flag = Field(
        default=False,
        description="true sends a Celery task-sent event with every enqueue, so Flower also lists runs still waiting "
        "in the queue (one more broker publish per enqueue)",
    )
    metrics_token: str | None = Field(
        default=None, description="when set, `/metrics` needs `Authorization: Bearer <token>`"
    )
    # Off by default: a fixed port would clash as soon as two workers share a host (standalone beside a worker,
    # parallel test runs), and the port has no login, so opening it is the operator's choice.
    worker_metrics_port: Port = Field(
        default=0,
        description="port where `hango worker` serves its Prometheus metrics (task, model call and tool latency, "
        "model tokens); 0 serves none",
    )
    worker_metrics_address: str = Field(
        default="127.0.0.1", description="address the worker's metrics port listens on (no login: keep it private)"
    )

    # Webhooks (api.md "Webhooks"): notifications to reviewers, delivered by Celery tasks, never inside a request.
    public_url: HttpUrl = Field(
        default="http://localhost:8000",
        description="the server's address as reviewers reach it; webhook bodies link to the inbox and runs there",
    )
    webhook_allow_private_urls: Flag = Field(
        default=False,
        description="true allows webhook URLs on private, loopback and link-local addresses (and plain http to "
        "them); false refuses them at creation and at delivery",
    )
    webhook_timeout: Duration = Field(default=timedelta(seconds=10), description="one webhook delivery attempt")
    webhook_retry_for: Duration = Field(
        default=timedelta(hours=24),
        description="how long a delivery is retried; a webhook failing for the whole window is deactivated",
    )
    webhook_retry_base: Duration = Field(
        default=timedelta(seconds=5), description="first delay between delivery attempts (doubling, with jitter)"
    )
    webhook_sweep_interval: Duration = Field(
        default=timedelta(seconds=5), description="how often beat sends due deliveries (retries, lost enqueues)"
    )
    webhook_requeue_after: Duration = Field(
        default=timedelta(seconds=60),
        description="how long an enqueued delivery may wait for a worker before beat enqueues it again",
    )
    webhook_batch: WholeNumber = Field(default=100, description="deliveries and reminders one sweep handles at most")
    webhook_deliveries_retention: Duration = Field(
        default=timedelta(days=30),
        description="how long a delivered or failed delivery stays in the log; the sweep forgets older ones",
    )
    max_webhooks_per_tenant: WholeNumber = Field(default=20, description="webhooks one tenant may have")
    grant_max_ttl: Duration = Field(
        default=timedelta(days=30), description="the longest `ttl` a standing approval (grant) may be given"
    )
    max_grants_per_tenant: WholeNumber = Field(
        default=500, description="active (neither expired nor revoked) standing approvals one tenant may have"
    )
    grant_max_when_bytes: WholeNumber = Field(
        default=16_384,
        description="largest `when` of a standing approval, as compact JSON (a remembered call's arguments included)",
    )
    webhook_max_url_length: WholeNumber = Field(default=2048, description="longest webhook URL")
    webhook_secret_keys: FernetKeys = Field(
        default=(),
        description="comma-separated Fernet keys encrypting webhook secrets and tenant MCP servers' headers at rest "
        "(the first encrypts, all decrypt); unset, secrets are stored unencrypted",
    )
    approval_remind_before: Duration = Field(
        default=timedelta(hours=1),
        description="`approval.reminder` is sent once per pending approval when this is left before it expires",
    )

    # Tools from MCP servers (api.md "MCP servers").
    mcp_config: str | None = Field(
        default=None,
        description='JSON file of the operator\'s MCP servers (`{"mcpServers": {...}}`, stdio or streamable HTTP); '
        "read at start, a malformed file stops the process",
    )
    mcp_timeout: Duration = Field(
        default=timedelta(seconds=10),
        description="starting an MCP server or listing its tools; a server that does not answer within it is "
        "unavailable",
    )
    mcp_max_processes: WholeNumber = Field(
        default=8, description="stdio MCP server processes one worker process keeps at most (the least used stops)"
    )
    mcp_max_http_sessions: WholeNumber = Field(
        default=32, description="streamable HTTP MCP sessions one process keeps at most (the least used closes)"
    )
    mcp_allow_private_urls: Flag = Field(
        default=False,
        description="true allows tenant MCP server URLs on private, loopback and link-local addresses (and plain "
        "http to them); false refuses them when saved and when connected to",
    )
    mcp_max_url_length: WholeNumber = Field(default=2048, description="longest tenant MCP server URL")
    max_mcp_servers_per_tenant: WholeNumber = Field(default=20, description="MCP servers one tenant may add")
    max_tool_result_bytes: WholeNumber = Field(
        default=262_144, description="UTF-8 bytes of one MCP tool result the model gets; a longer one is cut, saying so"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword arguments only: building settings never reads ``os.environ``, a ``.env`` file or secrets.

        :meth:`from_env` reads the mapping it is given and passes what it found as keyword arguments.
        """
        return (init_settings,)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every ``HANGO_*`` variable this class knows; unset or empty ones keep their defaults."""
        try:
            settings = cls(**_Environment(cls, environ)())
        except ValidationError as exc:
            raise _config_error(exc) from exc
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse combinations that would break the runtime's guarantees."""
        if self.run_heartbeat_interval >= self.run_lease:
            raise ConfigError("HANGO_RUN_HEARTBEAT_INTERVAL must be shorter than HANGO_RUN_LEASE")
        if self.api_connections < 2:
            raise ConfigError("HANGO_API_CONNECTIONS must be at least 2: streams may not take every connection")
        if self.max_streams_per_process is not None and self.max_streams_per_process >= self.api_connections:
            raise ConfigError("HANGO_MAX_STREAMS_PER_PROCESS must be below HANGO_API_CONNECTIONS")
        if self.approval_events_retention is not None and self.approval_events_retention < self.approval_ttl:
            raise ConfigError("HANGO_APPROVAL_EVENTS_RETENTION must be at least HANGO_APPROVAL_TTL")
        for name in ("webhook_timeout", "webhook_retry_base", "webhook_sweep_interval", "webhook_deliveries_retention"):
            if getattr(self, name) <= timedelta(0):
                raise ConfigError(f"{env_name(name)} must be longer than zero")
        if self.session_timeouts().idle_in_transaction <= self.tool_timeout:
            raise ConfigError(
                "HANGO_DB_IDLE_IN_TRANSACTION_TIMEOUT must be longer than HANGO_TOOL_TIMEOUT: a tool runs inside its "
                "batch's transaction"
            )

    def session_timeouts(self) -> SessionTimeouts:
        """The timeouts of hango's own database sessions: those set, else their defaults derived from the lease."""
        lease = self.run_lease
        return SessionTimeouts(
            connect=self.db_connect_timeout,
            statement=self.db_statement_timeout or 2 * lease,
            lock=self.db_lock_timeout or lease / 2,
            idle_in_transaction=self.db_idle_in_transaction_timeout or self.tool_timeout + lease,
            keepalive_idle=lease / 2,
        )

    def stream_capacity(self) -> int:
        """How many event streams one API process serves at once.

        ``HANGO_MAX_STREAMS_PER_PROCESS`` when set; otherwise three quarters of ``HANGO_API_CONNECTIONS``, so that
        the other quarter (at least one connection) always serves ordinary requests.
        """
        if self.max_streams_per_process is not None:
            return self.max_streams_per_process
        return self.api_connections - max(1, self.api_connections // 4)

    def approval_stream_retention(self) -> timedelta:
        """How long approval stream events are kept: ``HANGO_APPROVAL_EVENTS_RETENTION``, or twice the TTL, so a
        reviewer reconnecting within an approval's lifetime misses nothing of it."""
        return self.approval_events_retention or 2 * self.approval_ttl

    def require_database_url(self) -> str:
        """The database URL, or a :class:`ConfigError` naming the variable when it is unset."""
        if self.database_url is None:
            raise ConfigError("HANGO_DATABASE_URL is not set (e.g. postgresql://postgres@127.0.0.1:5432/hango)")
        return self.database_url

    def require_redis_url(self) -> str:
        """The Redis URL, or a :class:`ConfigError` naming the variable when it is unset."""
        if self.redis_url is None:
            raise ConfigError("HANGO_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0)")
        return self.redis_url

    def replace(self, **changes: object) -> Settings:
        """A copy with some fields changed, validated like any new settings."""
        values: dict[str, Any] = {**dict(self), **changes}
        return type(self)(**values)


def env_name(field: str) -> str:
    """The environment variable of a setting: ``HANGO_`` and the field's name in capitals."""
    return f"{Settings.model_config['env_prefix']}{field.upper()}"


class _Environment(PydanticBaseSettingsSource):
    """The settings' values found in one environment mapping, as text; empty variables count as unset."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        self._environ = environ

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The text of ``field_name``'s variable (``None`` when unset), keyed by the field's name."""
        return self._environ.get(env_name(field_name)) or None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found = {name: self.get_field_value(field, name)[0] for name, field in self.settings_cls.model_fields.items()}
        return {name: text for name, text in found.items() if text is not None}


def _config_error(error: ValidationError) -> ConfigError:
    """The first problem as one line naming its variable, in the words of the setting's parser."""
    first = error.errors()[0]
    cause = first.get("ctx", {}).get("error", first["msg"])
    return ConfigError(f"{env_name(str(first['loc'][0]))}: {cause}")
