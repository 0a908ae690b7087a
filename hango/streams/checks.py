"""The questions streams ask at every keep-alive, answered once for all the streams of a process that ask them at
about the same moment.

A stream re-checks its token, what it follows, and whether its log grew behind its back (a publish that never
arrived), every keep-alive. Thousands of streams of one process asking those one by one would cost thousands of
queries per interval, in bursts, since streams opened together tick together. Most of them ask the same few
questions — one token, one run, one tenant's log — so each answer is kept for ``HANGO_STREAM_CHECK_TTL`` (a
second by default) and shared. A revoked token still closes its streams within a keep-alive and that TTL.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from hango.kernel.auth import Principal
from hango.platform.db import Database
from hango.store import approval_events as approval_event_store
from hango.store import runs as run_store
from hango.store import threads as thread_store
from hango.store import tokens as token_store

Value = TypeVar("Value")


class _Flight(Generic[Value]):
    """One computation of an answer, which the callers that ask meanwhile wait for instead of repeating it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Value | None = None
        self.ok = False


class Recent(Generic[Value]):
    """Answers by key, each kept for ``ttl`` seconds; at most ``most`` of them (the expired go first).

    An answer is computed once however many callers ask for it together: when it expires, a thousand streams due
    for a check at that moment make one query, not a thousand that queue for the connection pool.
    """

    def __init__(self, ttl: float, most: int = 10_000) -> None:
        self._ttl = ttl
        self._most = most
        self._lock = threading.Lock()
        self._answers: dict[Hashable, tuple[float, Value]] = {}
        self._flights: dict[Hashable, _Flight[Value]] = {}

    def get(self, key: Hashable, compute: Callable[[], Value]) -> Value:
        """The answer for ``key``: a recent one, the one being computed, or ``compute()``'s, kept."""
        while True:
            with self._lock:
                found = self._answers.get(key)
                if found is not None and time.monotonic() - found[0] < self._ttl:
                    return found[1]
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    break  # this caller computes it
            flight.done.wait()
            if flight.ok:
                return flight.value  # type: ignore[return-value]
            # That computation failed: one of its waiters tries again, the others wait for that one.
        try:
            flight.value = compute()
            flight.ok = True
        finally:
            with self._lock:
                del self._flights[key]
                if flight.ok:
                    self._keep(key, flight.value)  # type: ignore[arg-type]
            flight.done.set()
        return flight.value

    def _keep(self, key: Hashable, value: Value) -> None:
        now = time.monotonic()
        if len(self._answers) >= self._most:
            self._forget_expired(now)
        if len(self._answers) < self._most:
            self._answers[key] = (now, value)

    def _forget_expired(self, now: float) -> None:
        for key in [key for key, (at, _) in self._answers.items() if now - at >= self._ttl]:
            del self._answers[key]


@dataclass(frozen=True)
class RunHead:
    """A visible run's state and the number of its last event."""

    state: str
    event_seq: int


class StreamChecks:
    """The shared answers of one process: a token's principal, a run's visibility and head, a tenant log's head,
    a thread's visibility and its runs."""

    def __init__(self, db: Database, ttl: float) -> None:
        self._db = db
        self._principals: Recent[Principal | None] = Recent(ttl)
        self._runs: Recent[RunHead | None] = Recent(ttl)
        self._tenants: Recent[int] = Recent(ttl)
        self._threads: Recent[int | None] = Recent(ttl)
        self._thread_runs: Recent[RunHead | None] = Recent(ttl)

    def principal(self, token_id: uuid.UUID) -> Principal | None:
        """What the token stands for now; ``None`` once it is revoked or its user left the tenant."""

        def read() -> Principal | None:
            with self._db.read() as session:
                return token_store.principal_for_token(session, token_id)

        return self._principals.get(token_id, read)

    def run(self, principal: Principal, run_id: uuid.UUID) -> RunHead | None:
        """The run's head, or ``None`` when the principal may not see it."""
        key = (principal.tenant_id, principal.user_id, principal.is_manager, run_id)

        def read() -> RunHead | None:
            with self._db.read() as session:
                head = run_store.visible_head(session, principal, run_id)
            return None if head is None else RunHead(*head)

        return self._runs.get(key, read)

    def approvals_head(self, tenant_id: uuid.UUID) -> int:
        """The last number of the tenant's approval stream."""

        def read() -> int:
            with self._db.read() as session:
                return approval_event_store.last_seq(session, tenant_id)

        return self._tenants.get(tenant_id, read)

    def thread(self, principal: Principal, thread_id: uuid.UUID) -> int | None:
        """How many runs the thread has been given, or ``None`` when the principal may not see it (or it was
        deleted)."""
        key = (principal.tenant_id, principal.user_id, principal.is_manager, thread_id)

        def read() -> int | None:
            with self._db.read() as session:
                return thread_store.visible_run_count(session, principal, thread_id)

        return self._threads.get(key, read)

    def thread_run(self, principal: Principal, thread_id: uuid.UUID, run_id: uuid.UUID) -> RunHead | None:
        """The head of a run of the thread, or ``None`` when the principal may not see the thread."""
        key = (principal.tenant_id, principal.user_id, principal.is_manager, thread_id, run_id)

        def read() -> RunHead | None:
            with self._db.read() as session:
                head = thread_store.visible_run_head(session, principal, thread_id, run_id)
            return None if head is None else RunHead(*head)

        return self._thread_runs.get(key, read)
