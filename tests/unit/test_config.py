from datetime import timedelta

import pytest

from hango.config import Settings, parse_duration
from hango.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("24h", 86400), ("2d", 172800), ("45", 45), ("1.5", 1.5), ("250ms", 0.25)],
)
def test_durations_accept_units_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "10x", "-5s", "1h30m", "s"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_defaults_match_the_contract() -> None:
    settings = Settings.from_env({})
    assert settings.approval_ttl == timedelta(hours=24)
    assert settings.approval_sweep_interval == timedelta(minutes=1)
    assert settings.database_url is None


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
    ],
)
def test_a_malformed_setting_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})


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
