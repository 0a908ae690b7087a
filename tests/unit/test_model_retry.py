"""RetryingModel: which failures are retried, how long it waits, and what it raises in the end."""

from __future__ import annotations

import logging
import random

import pytest

from hango.agent.messages import AssistantTurn, user_message
from hango.agent.models.base import ModelError, ModelRequest, PermanentModelError, TransientModelError
from hango.agent.models.retry import RetryingModel, is_transient_status

REQUEST = ModelRequest(system="be brief", messages=[user_message("hi")])
ANSWER = AssistantTurn(text="hello")


class FlakyModel:
    """Raises the scripted errors in order, then answers; records every request it saw."""

    def __init__(self, *errors: ModelError) -> None:
        self.errors = list(errors)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> AssistantTurn:
        self.requests.append(request)
        if self.errors:
            raise self.errors.pop(0)
        return ANSWER


class CeilingRandom(random.Random):
    """Jitter that always draws the top of its range, so the pauses show the backoff ceilings."""

    def uniform(self, a: float, b: float) -> float:
        return b


class Sleeps(list[float]):
    """A fake ``time.sleep`` that records how long it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def retrying(inner: FlakyModel, sleeps: Sleeps, attempts: int = 4, **kwargs: float) -> RetryingModel:
    delays = {"base_delay": 1.0, "max_delay": 30.0, **kwargs}
    return RetryingModel(inner, attempts=attempts, sleep=sleeps, rng=CeilingRandom(), **delays)


def test_a_first_success_neither_retries_nor_sleeps() -> None:
    inner, sleeps = FlakyModel(), Sleeps()
    assert retrying(inner, sleeps).complete(REQUEST) is ANSWER
    assert inner.requests == [REQUEST]
    assert sleeps == []


def test_transient_failures_are_retried_until_one_succeeds() -> None:
    inner, sleeps = FlakyModel(TransientModelError("429"), TransientModelError("503")), Sleeps()
    assert retrying(inner, sleeps).complete(REQUEST) is ANSWER
    assert inner.requests == [REQUEST, REQUEST, REQUEST]
    assert len(sleeps) == 2


def test_pauses_double_from_the_base_and_stop_at_the_cap() -> None:
    inner, sleeps = FlakyModel(*[TransientModelError("503")] * 5), Sleeps()
    retrying(inner, sleeps, attempts=6, base_delay=0.5, max_delay=3.0).complete(REQUEST)
    assert sleeps == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_jitter_draws_each_pause_between_zero_and_its_ceiling() -> None:
    sleeps = Sleeps()
    model = RetryingModel(
        FlakyModel(*[TransientModelError("503")] * 7),
        attempts=8,
        base_delay=1.0,
        max_delay=10.0,
        sleep=sleeps,
        rng=random.Random(7),
    )
    model.complete(REQUEST)
    ceilings = [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert all(0 <= pause <= ceiling for pause, ceiling in zip(sleeps, ceilings, strict=True))
    # Full jitter: the pauses are spread out, not pinned to their ceilings.
    assert any(pause < ceiling / 2 for pause, ceiling in zip(sleeps, ceilings, strict=True))


def test_exhausted_attempts_become_a_permanent_error_naming_the_count_and_the_last_failure() -> None:
    last = TransientModelError("HTTP 503: overloaded")
    inner, sleeps = (
        FlakyModel(TransientModelError("HTTP 429: slow down"), TransientModelError("timeout"), last),
        Sleeps(),
    )
    with pytest.raises(PermanentModelError) as raised:
        retrying(inner, sleeps, attempts=3).complete(REQUEST)
    assert str(raised.value) == "model unavailable after 3 attempts: HTTP 503: overloaded"
    assert raised.value.__cause__ is last
    assert len(inner.requests) == 3
    # No pause after the last attempt: nothing follows it.
    assert len(sleeps) == 2


def test_a_permanent_error_is_raised_at_once() -> None:
    refused = PermanentModelError("HTTP 401: invalid x-api-key")
    inner, sleeps = FlakyModel(TransientModelError("503"), refused), Sleeps()
    with pytest.raises(PermanentModelError) as raised:
        retrying(inner, sleeps).complete(REQUEST)
    assert raised.value is refused
    assert len(inner.requests) == 2
    assert len(sleeps) == 1


def test_a_single_attempt_never_retries() -> None:
    inner, sleeps = FlakyModel(TransientModelError("503")), Sleeps()
    with pytest.raises(PermanentModelError, match="after 1 attempts: 503"):
        retrying(inner, sleeps, attempts=1).complete(REQUEST)
    assert len(inner.requests) == 1
    assert sleeps == []


def test_each_retry_is_logged_as_a_warning_with_its_attempt_number(caplog: pytest.LogCaptureFixture) -> None:
    inner = FlakyModel(TransientModelError("HTTP 429: slow down"), TransientModelError("HTTP 500: oops"))
    with caplog.at_level(logging.WARNING, logger="hango.agent.models.retry"):
        retrying(inner, Sleeps(), attempts=3).complete(REQUEST)
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert [record.getMessage() for record in warnings] == [
        "model call failed on attempt 1 of 3, retrying in 1.00s: HTTP 429: slow down",
        "model call failed on attempt 2 of 3, retrying in 2.00s: HTTP 500: oops",
    ]


@pytest.mark.parametrize("attempts", [0, -1])
def test_fewer_than_one_attempt_is_refused(attempts: int) -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryingModel(FlakyModel(), attempts=attempts, base_delay=1.0, max_delay=1.0)


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (529, True),
    ],
)
def test_statuses_worth_retrying(status: int, transient: bool) -> None:
    assert is_transient_status(status) is transient


def test_the_factory_builds_each_provider_from_settings_only() -> None:
    from hango.agent.models.anthropic import AnthropicModel
    from hango.agent.models.factory import build_model
    from hango.agent.models.openai import OpenAIModel
    from hango.kernel.config import Settings

    settings = Settings(anthropic_api_key="a-key", openai_api_key="o-key", openai_base_url="http://127.0.0.1:9/v1")
    for provider, kind in (("anthropic", AnthropicModel), ("openai", OpenAIModel)):
        model = build_model({"provider": provider, "name": "m"}, settings, scope="s")
        assert isinstance(model, RetryingModel)
        assert isinstance(model._inner, kind)
