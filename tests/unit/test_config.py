import re
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from hango.kernel.config import Settings, env_name, parse_duration
from hango.kernel.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("24h", 86400), ("2d", 172800), ("45", 45), ("1.5", 1.5), ("250ms", 0.25)],
)
def test_durations_accept_units_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "10x", "-5s", "1h30m", "s", "\u0663h", "\u00a01h"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_defaults_match_the_contract() -> None:
    settings = Settings.from_env({})
    assert settings.approval_ttl == timedelta(hours=24)
    assert settings.approval_sweep_interval == timedelta(minutes=1)
    assert settings.database_url is None


def test_the_defaults_bring_a_killed_workers_run_back_within_20_seconds() -> None:
    # A dead worker's run waits at most for its lease to end and for the next reconciler pass.
    settings = Settings.from_env({})
    assert settings.run_lease + settings.reconcile_interval < timedelta(seconds=20)
    # Three beats may be missed (a slow database, a busy process) before the lease is lost.
    assert settings.run_heartbeat_interval * 3 < settings.run_lease


def test_environment_values_are_parsed() -> None:
    settings = Settings.from_env(
        {
            "HANGO_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/hango",
            "HANGO_REDIS_URL": "redis://127.0.0.1:6379/0",
            "HANGO_APPROVAL_TTL": "90s",
            "HANGO_APPROVAL_SWEEP_INTERVAL": "2",
            "HANGO_MAX_BODY_BYTES": "1000",
            "HANGO_LOG_LEVEL": "debug",
        }
    )
    assert settings.approval_ttl == timedelta(seconds=90)
    assert settings.approval_sweep_interval == timedelta(seconds=2)
    assert settings.max_body_bytes == 1000
    assert settings.log_level == "DEBUG"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("HANGO_APPROVAL_TTL", "tomorrow"),
        ("HANGO_APPROVAL_SWEEP_INTERVAL", "5 minutes"),
        ("HANGO_DATABASE_URL", "mysql://root@localhost/db"),
        ("HANGO_DATABASE_URL", "::not a url::"),
        ("HANGO_REDIS_URL", "http://127.0.0.1:6379"),
        ("HANGO_MAX_BODY_BYTES", "0"),
        ("HANGO_MAX_BODY_BYTES", "lots"),
        ("HANGO_LOG_LEVEL", "loud"),
        ("HANGO_WORKER_METRICS_PORT", "65536"),
        ("HANGO_WORKER_METRICS_PORT", "-1"),
    ],
)
def test_a_malformed_setting_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


def test_the_worker_metrics_port_is_off_by_default_and_read_as_a_port() -> None:
    assert Settings.from_env({}).worker_metrics_port == 0
    assert Settings.from_env({"HANGO_WORKER_METRICS_PORT": "9464"}).worker_metrics_port == 9464


def test_required_urls_name_their_variable_when_missing() -> None:
    settings = Settings.from_env({})
    with pytest.raises(ConfigError, match="HANGO_DATABASE_URL"):
        settings.require_database_url()
    with pytest.raises(ConfigError, match="HANGO_REDIS_URL"):
        settings.require_redis_url()


@pytest.mark.parametrize(("text", "value"), [("false", False), ("False", False), ("0", False), ("TRUE", True)])
def test_interrupts_can_be_switched_off_and_are_on_by_default(text: str, value: bool) -> None:
    assert Settings.from_env({}).interrupts_enabled is True
    assert Settings.from_env({"HANGO_INTERRUPTS_ENABLED": text}).interrupts_enabled is value


def test_a_malformed_boolean_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="HANGO_INTERRUPTS_ENABLED"):
        Settings.from_env({"HANGO_INTERRUPTS_ENABLED": "maybe"})


def test_the_environment_is_only_the_mapping_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANGO_QUEUE", "from-the-process")
    assert Settings.from_env({}).queue == "hango"
    assert Settings().queue == "hango"


def test_empty_lowercase_and_unknown_variables_change_nothing() -> None:
    environ = {"HANGO_APPROVAL_TTL": "", "hango_queue": "lower", "HANGO_NO_SUCH_SETTING": "1"}
    assert Settings.from_env(environ) == Settings()


def test_comma_lists_become_tuples() -> None:
    assert Settings.from_env({"HANGO_TOOL_MODULES": "a.b, c,"}).tool_modules == ("a.b", "c")
    with pytest.raises(ConfigError, match="HANGO_TOOL_MODULES: 'a-b' is not a module name"):
        Settings.from_env({"HANGO_TOOL_MODULES": "a-b"})


def test_the_first_malformed_setting_is_reported_in_its_parsers_words() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"HANGO_RUN_LEASE": "soon", "HANGO_MAX_BODY_BYTES": "0"})
    assert str(caught.value) == "HANGO_MAX_BODY_BYTES: '0' is not a whole number greater than zero"


def test_settings_are_frozen_hashable_and_replaced_by_copies() -> None:
    settings = Settings()
    changed = settings.replace(queue="other", approval_ttl=timedelta(0))
    assert (settings.queue, changed.queue, changed.approval_ttl) == ("hango", "other", timedelta(0))
    assert changed.replace(queue="hango", approval_ttl=timedelta(hours=24)) == settings
    assert len({settings, Settings(), changed}) == 2
    with pytest.raises(ValidationError):
        settings.queue = "mutated"


def test_the_defaults_bound_each_faults_recovery_as_the_architecture_says() -> None:
    # docs/system-architecture.md, "Faults and what survives them"; tests/integration/test_faults.py checks each
    # bound with short settings.
    settings = Settings.from_env({})
    timeouts = settings.session_timeouts()
    assert (timeouts.statement, timeouts.lock, timeouts.idle_in_transaction) == (
        timedelta(seconds=24),
        timedelta(seconds=6),
        timedelta(seconds=42),
    )
    # A worker frozen inside a transaction: its session ends, then the lease and a reconcile pass.
    frozen = settings.run_lease + settings.reconcile_interval + timeouts.idle_in_transaction
    assert frozen == timedelta(seconds=59)
    # A lost enqueue is found by the reconciler, whatever the dedup key of the lost one says.
    lost = settings.requeue_after + settings.reconcile_interval
    assert lost == timedelta(seconds=65) < settings.enqueue_dedup_ttl
    # A request never waits on a row lock for longer than a worker's lease.
    assert timeouts.lock < settings.run_lease


def test_the_sessions_timeouts_follow_the_lease_unless_set() -> None:
    derived = Settings.from_env({"HANGO_RUN_LEASE": "20s", "HANGO_TOOL_TIMEOUT": "10s"}).session_timeouts()
    assert (derived.statement, derived.lock, derived.idle_in_transaction) == (
        timedelta(seconds=40),
        timedelta(seconds=10),
        timedelta(seconds=30),
    )
    given = Settings.from_env(
        {
            "HANGO_DB_STATEMENT_TIMEOUT": "1m",
            "HANGO_DB_LOCK_TIMEOUT": "2s",
            "HANGO_DB_IDLE_IN_TRANSACTION_TIMEOUT": "1h",
        }
    ).session_timeouts()
    assert (given.statement, given.lock, given.idle_in_transaction) == (
        timedelta(minutes=1),
        timedelta(seconds=2),
        timedelta(hours=1),
    )


def test_the_idle_in_transaction_timeout_must_outlast_a_tool_call() -> None:
    # A tool runs inside its batch's transaction: a shorter timeout would end every long call's batch.
    with pytest.raises(
        ConfigError, match="HANGO_DB_IDLE_IN_TRANSACTION_TIMEOUT must be longer than HANGO_TOOL_TIMEOUT"
    ):
        Settings.from_env({"HANGO_TOOL_TIMEOUT": "30s", "HANGO_DB_IDLE_IN_TRANSACTION_TIMEOUT": "30s"})


def test_cross_field_checks_name_both_variables() -> None:
    with pytest.raises(ConfigError, match="HANGO_RUN_HEARTBEAT_INTERVAL must be shorter than HANGO_RUN_LEASE"):
        Settings.from_env({"HANGO_RUN_LEASE": "10s", "HANGO_RUN_HEARTBEAT_INTERVAL": "10s"})
    with pytest.raises(ConfigError, match="HANGO_MAX_STREAMS_PER_PROCESS must be below HANGO_API_CONNECTIONS"):
        Settings.from_env({"HANGO_API_CONNECTIONS": "8", "HANGO_MAX_STREAMS_PER_PROCESS": "8"})
    with pytest.raises(ConfigError, match="HANGO_APPROVAL_EVENTS_RETENTION must be at least HANGO_APPROVAL_TTL"):
        Settings.from_env({"HANGO_APPROVAL_TTL": "2h", "HANGO_APPROVAL_EVENTS_RETENTION": "1h"})


README = Path(__file__).resolve().parents[2] / "README.md"
# A row of the README's settings table: one or more backquoted variables, their defaults, their meaning.
ROW = re.compile(r"^\| (?P<names>`HANGO_[^|]*) \| (?P<defaults>[^|]*) \| [^|]+ \|$")


def _readme_defaults() -> dict[str, str]:
    """Each variable of the README's settings table and the default its row states, as written."""
    table: dict[str, str] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        names = re.findall(r"`(HANGO_\w+)`", row["names"])
        defaults = row["defaults"].split(" / ")
        if len(defaults) == 1:
            defaults *= len(names)
        assert len(defaults) == len(names), f"the README row does not give one default per variable: {line}"
        table.update(zip(names, defaults, strict=True))
    return table


def test_the_readme_table_lists_every_setting_and_only_settings() -> None:
    assert set(_readme_defaults()) == {env_name(field) for field in Settings.model_fields}


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_the_readme_default_is_the_declared_default(field: str) -> None:
    declared = Settings.model_fields[field]
    assert declared.description, f"{field} has no description"
    stated = _readme_defaults().get(env_name(field))
    assert stated is not None, f"{env_name(field)} is missing from the README's settings table"
    literal = re.fullmatch(r"`([^`]+)`", stated)
    if literal is not None:
        # The README writes a default as a value of the variable would be written.
        assert getattr(Settings.from_env({env_name(field): literal[1]}), field) == declared.default
    elif stated.startswith(("unset", "(required")):
        assert declared.default in (None, ())
    # Otherwise the README describes a default computed from other settings (stream_capacity's quarter).
