"""One rooted hierarchy of domain errors; the API maps each class to a problem document in one place."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


class HangoError(Exception):
    """Base of every error hango raises on purpose.

    ``audited`` is set by a service that already wrote the refusal's audit rows itself, in its own transaction,
    so the API's audit hook does not write them again.
    """

    audited: bool = False


class ConfigError(HangoError):
    """A setting is missing or malformed; the message names the variable."""


class Unauthorized(HangoError):
    """No credentials, or credentials that are unknown or revoked."""


class Forbidden(HangoError):
    """The caller is known but their role does not allow the action."""


class NotFound(HangoError):
    """The resource does not exist or is not visible to the caller (another tenant's is never revealed)."""


class Conflict(HangoError):
    """The request is well formed but clashes with the current state."""


@dataclass(frozen=True)
class FieldError:
    """One problem with one input field; ``field`` is a dotted path such as ``decisions[1].args.content``."""

    field: str
    message: str


class InvalidInput(HangoError):
    """The request is malformed; ``errors`` names every offending field."""

    def __init__(self, detail: str, errors: list[FieldError] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []

    @classmethod
    def field(cls, field: str, message: str) -> InvalidInput:
        """An error about a single field."""
        return cls(f"{field}: {message}", [FieldError(field, message)])

    @classmethod
    def of(cls, errors: list[FieldError]) -> InvalidInput:
        """An error naming each of ``errors``, its detail listing them all."""
        return cls("; ".join(f"{error.field}: {error.message}" for error in errors), errors)


class NotAwaitingApproval(Conflict):
    """A decision arrived for a run that is no longer waiting (decided by someone else, expired, cancelled)."""


class StaleApproval(Conflict):
    """A decision names a digest of arguments other than the call's: its reviewer saw something else."""


class AlreadyVoted(Conflict):
    """The caller already voted on an approval of a quorum rule: one user counts once."""


class ThreadBusy(Conflict):
    """A run of the thread is active and the new run's strategy is ``reject``; ``active_run_id`` names the oldest
    active run."""

    def __init__(self, thread_id: uuid.UUID, active_run_id: uuid.UUID) -> None:
        super().__init__(
            f"thread {thread_id} has an active run ({active_run_id}); wait for it to end, or send the run with "
            '"multitask_strategy": "enqueue" or "interrupt"'
        )
        self.active_run_id = active_run_id


class PartialDecision(Conflict):
    """The decisions do not cover every pending call of the run; ``remaining`` lists the others."""

    def __init__(self, detail: str, remaining: list[dict[str, str]]) -> None:
        super().__init__(detail)
        self.remaining = remaining


class RetryLater(HangoError):
    """A limit is reached for now; ``retry_after`` is a hint, in whole seconds, of when trying again may work."""

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class TooManyStreams(RetryLater):
    """The user already holds as many open event streams as they may (across every API process)."""


class Unavailable(RetryLater):
    """PostgreSQL or Redis cannot be reached right now; ``checks`` says which, where it was asked (``/readyz``)."""

    def __init__(self, detail: str, retry_after: int, checks: dict[str, str] | None = None) -> None:
        super().__init__(detail, retry_after)
        self.checks = checks


class StreamCapacityFull(RetryLater):
    """This API process serves as many streams as it may while keeping threads free for ordinary requests."""
