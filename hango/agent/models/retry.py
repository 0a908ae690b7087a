"""Retries of transient model failures, with capped exponential backoff and full jitter.

The providers turn off their SDK's own retries so that this is the one place that decides how often and how long
to wait; it also decides which HTTP statuses are worth another try.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping

from hango.agent.messages import AssistantTurn
from hango.agent.models.base import Model, ModelError, ModelRequest, PermanentModelError, TransientModelError

logger = logging.getLogger(__name__)

# Request timeout, lock conflict and rate limit, as the official SDKs' own retry policies have it; every 5xx is
# retried as well.
RETRYABLE_STATUSES = frozenset({408, 409, 429})


MESSAGE_LIMIT = 500


def is_transient_status(status: int) -> bool:
    """Whether an HTTP error status from a provider is worth retrying."""
    return status in RETRYABLE_STATUSES or status >= 500


def unreachable(provider: str, message: str, cause: BaseException | None) -> TransientModelError:
    """A connection failure or timeout; the cause names the network failure, which the SDKs' message does not."""
    detail = f" ({cause})" if cause else ""
    return TransientModelError(f"{provider} API unreachable: {message}{detail}")


def status_error(provider: str, status: int, body: object, fallback: str) -> ModelError:
    """An HTTP error answer: transient when another try may succeed, with the provider's own explanation."""
    message = f"{provider} API returned HTTP {status}: {_explanation(body, fallback)}"
    return TransientModelError(message) if is_transient_status(status) else PermanentModelError(message)


def _explanation(body: object, fallback: str) -> str:
    # Providers nest it as {"error": {"message": ...}}; SDK releases keep the body whole or unwrap it.
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])[:MESSAGE_LIMIT]
    if isinstance(body, str) and body:
        return body[:MESSAGE_LIMIT]
    return fallback[:MESSAGE_LIMIT]


class RetryingModel:
    """A :class:`Model` that retries its inner model's :class:`TransientModelError` failures.

    Attempt ``n`` (counting from 1) that fails is followed by a pause drawn uniformly from
    ``[0, min(max_delay, base_delay * 2 ** (n - 1))]`` ("full jitter"), so that workers hit by the same outage do
    not retry in lockstep. When every attempt failed, the last error becomes a :class:`PermanentModelError` so
    that the run fails with a readable message instead of being retried again by its caller.
    """

    def __init__(
        self,
        inner: Model,
        *,
        attempts: int,
        base_delay: float,
        max_delay: float,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        """Wrap ``inner``.

        Args:
            inner: The model to call.
            attempts: How many calls at most, the first included; at least 1.
            base_delay: The cap of the first pause, in seconds.
            max_delay: The cap of any pause, in seconds.
            sleep: Waits the given number of seconds; tests pass a fake.
            rng: The source of jitter; tests pass one with a known answer.

        Raises:
            ValueError: ``attempts`` is below 1 or a delay is negative.
        """
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must not be negative")
        self._inner = inner
        self._attempts = attempts
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._sleep = sleep
        self._rng = rng or random.Random()

    def complete(self, request: ModelRequest) -> AssistantTurn:
        """Answer ``request`` through the inner model, retrying transient failures.

        Raises:
            PermanentModelError: The inner model failed permanently, or transiently on every attempt.
        """
        for attempt in range(1, self._attempts):
            try:
                return self._inner.complete(request)
            except TransientModelError as error:
                delay = self.backoff(attempt)
                logger.warning(
                    "model call failed on attempt %d of %d, retrying in %.2fs: %s",
                    attempt,
                    self._attempts,
                    delay,
                    error,
                )
                self._sleep(delay)
        try:
            return self._inner.complete(request)
        except TransientModelError as error:
            raise PermanentModelError(f"model unavailable after {self._attempts} attempts: {error}") from error

    def backoff(self, attempt: int) -> float:
        """The pause after failed attempt number ``attempt`` (from 1): uniform up to the capped exponential."""
        ceiling = min(self._max_delay, self._base_delay * 2 ** (attempt - 1))
        return self._rng.uniform(0, ceiling)
