"""Settings, read once from the ``HANGO_*`` environment at process start.

Every timeout, TTL and limit the server uses lives here, so tests can run with seconds instead of hours. A
missing or malformed variable raises :class:`ConfigError` naming it; the CLI turns that into a one-line message
and a non-zero exit before anything else starts.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from hango.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_T = TypeVar("_T")


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


def parse_positive_int(text: str) -> int:
    """Parse a whole number greater than zero."""
    value = int(text.strip())
    if value <= 0:
        raise ValueError(f"{text!r} is not a whole number greater than zero")
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


@dataclass(frozen=True)
class Settings:
    """Process-wide settings. Build them with :meth:`from_env`, or directly in tests."""

    database_url: str | None = None
    redis_url: str | None = None
    approval_ttl: timedelta = timedelta(hours=24)
    approval_sweep_interval: timedelta = timedelta(minutes=1)
    # Off: no tool call waits for a human any more, but decisions already stored are still applied on resume.
    interrupts_enabled: bool = True
    max_body_bytes: int = 1_048_576
    max_json_depth: int = 64
    db_pool_size: int = 5
    log_level: str = "INFO"
    queue: str = "hango"
    run_lease: timedelta = timedelta(seconds=60)
    run_heartbeat_interval: timedelta = timedelta(seconds=15)
    reconcile_interval: timedelta = timedelta(seconds=30)
    requeue_after: timedelta = timedelta(seconds=60)
    enqueue_dedup_ttl: timedelta = timedelta(minutes=5)
    max_run_attempts: int = 3
    task_time_limit: timedelta = timedelta(hours=1)
    sse_keepalive: timedelta = timedelta(seconds=15)
    model_retry_attempts: int = 4
    model_retry_base_delay: timedelta = timedelta(seconds=1)
    model_retry_max_delay: timedelta = timedelta(seconds=30)
    model_timeout: timedelta = timedelta(seconds=120)
    anthropic_base_url: str | None = None
    anthropic_api_key: str | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    tool_modules: tuple[str, ...] = ()
    max_subagent_depth: int = 3
    otlp_endpoint: str | None = None
    # Limits a hostile tenant, member or model meets as a clear error (api.md "Limits and roles").
    max_streams_per_user: int = 50
    # gunicorn threads per API process (``hango api --threads`` defaults to it). An open event stream holds a
    # thread, so one process serves at most ``stream_capacity()`` streams and keeps the rest for ordinary requests.
    api_threads: int = 64
    max_streams_per_process: int | None = None
    max_file_bytes: int = 1_048_576
    max_run_storage_bytes: int = 64 * 1_048_576
    max_agent_storage_bytes: int = 64 * 1_048_576
    tool_timeout: timedelta = timedelta(seconds=30)
    # Operations surface: Flower's basic auth ("user:password") and the bearer token /metrics asks for.
    flower_basic_auth: str | None = None
    metrics_token: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every ``HANGO_*`` variable this class knows; unset ones keep their defaults."""
        values: dict[str, object] = {}
        for name, parser in _PARSERS.items():
            raw = environ.get(_env_name(name))
            if raw is None or raw == "":
                continue
            values[name] = _parse(name, raw, parser)
        settings = cls(**values)  # type: ignore[arg-type]
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse combinations that would break the runtime's guarantees."""
        if self.run_heartbeat_interval >= self.run_lease:
            raise ConfigError("HANGO_RUN_HEARTBEAT_INTERVAL must be shorter than HANGO_RUN_LEASE")
        if self.api_threads < 2:
            raise ConfigError("HANGO_API_THREADS must be at least 2: streams may not take every thread")
        if self.max_streams_per_process is not None and self.max_streams_per_process >= self.api_threads:
            raise ConfigError("HANGO_MAX_STREAMS_PER_PROCESS must be below HANGO_API_THREADS")

    def stream_capacity(self) -> int:
        """How many event streams one API process serves at once.

        ``HANGO_MAX_STREAMS_PER_PROCESS`` when set; otherwise three quarters of ``HANGO_API_THREADS``, so that the
        other quarter (at least one thread) always serves ordinary requests.
        """
        if self.max_streams_per_process is not None:
            return self.max_streams_per_process
        return self.api_threads - max(1, self.api_threads // 4)

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
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


_PARSERS: dict[str, Callable[[str], object]] = {
    "database_url": parse_postgres_url,
    "redis_url": parse_redis_url,
    "approval_ttl": parse_duration,
    "approval_sweep_interval": parse_duration,
    "interrupts_enabled": parse_bool,
    "max_body_bytes": parse_positive_int,
    "max_json_depth": parse_positive_int,
    "db_pool_size": parse_positive_int,
    "log_level": parse_log_level,
    "queue": parse_name,
    "run_lease": parse_duration,
    "run_heartbeat_interval": parse_duration,
    "reconcile_interval": parse_duration,
    "requeue_after": parse_duration,
    "enqueue_dedup_ttl": parse_duration,
    "max_run_attempts": parse_positive_int,
    "task_time_limit": parse_duration,
    "sse_keepalive": parse_duration,
    "model_retry_attempts": parse_positive_int,
    "model_retry_base_delay": parse_duration,
    "model_retry_max_delay": parse_duration,
    "model_timeout": parse_duration,
    "anthropic_base_url": parse_http_url,
    "anthropic_api_key": str,
    "openai_base_url": parse_http_url,
    "openai_api_key": str,
    "tool_modules": parse_module_list,
    "max_subagent_depth": parse_positive_int,
    "otlp_endpoint": parse_http_url,
    "max_streams_per_user": parse_positive_int,
    "api_threads": parse_positive_int,
    "max_streams_per_process": parse_positive_int,
    "max_file_bytes": parse_positive_int,
    "max_run_storage_bytes": parse_positive_int,
    "max_agent_storage_bytes": parse_positive_int,
    "tool_timeout": parse_duration,
    "flower_basic_auth": parse_basic_auth,
    "metrics_token": str,
}


def _env_name(field: str) -> str:
    return f"HANGO_{field.upper()}"


def _parse(field: str, raw: str, parser: Callable[[str], _T]) -> _T:
    try:
        return parser(raw)
    except ValueError as exc:
        raise ConfigError(f"{_env_name(field)}: {exc}") from exc
