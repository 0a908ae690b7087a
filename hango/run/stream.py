"""Following a run's events: replay the stored log, then stream live events as they are published.

The database is the log; Redis only wakes readers early. A reader subscribes before it reads the log, takes a
published event directly only when it is exactly the next one, and otherwise re-reads the log, so a lost or
reordered publish costs latency, never an event.

A stream is admitted before its first byte (the caller sees the run, and both the user and this process have a
stream slot free: :mod:`hango.run.stream_slots`). It is then re-authorised at every keep-alive, and at least once
per keep-alive interval while events flow: a revoked token, a removed membership or a run the caller may no
longer see ends it, before it sends anything more.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from hango.auth import Principal
from hango.errors import NotFound, Unauthorized
from hango.models import TERMINAL_RUN_STATES
from hango.run.events import Event, channel
from hango.run.runtime import Runtime
from hango.run.service import events_after, get_run
from hango.run.stream_slots import StreamSlot, admit_stream
from hango.tenancy import reauthenticate

FINISHED = "run.finished"
log = logging.getLogger(__name__)


def open_stream(runtime: Runtime, principal: Principal, run_id: uuid.UUID, after: int) -> EventStream:
    """Admit a stream of a run's events after ``after``; every refusal is raised here, before a byte is sent.

    Raises:
        NotFound: the caller may not see the run.
        StreamCapacityFull: this process streams to as many clients as it keeps threads for.
        TooManyStreams: the user already holds ``max_streams_per_user`` open streams.
    """
    get_run(runtime, principal, run_id)
    slot = admit_stream(runtime.redis, runtime.settings, principal.user_id)
    return EventStream(runtime, principal, run_id, after, slot)


@dataclass
class EventStream:
    """An admitted stream of one run's events: iterate it once, and close it when the response ends."""

    runtime: Runtime
    principal: Principal
    run_id: uuid.UUID
    after: int
    slot: StreamSlot
    _checked_at: float = field(default_factory=time.monotonic, init=False)

    def __iter__(self) -> Iterator[Event | None]:
        """The run's events until ``run.finished`` or lost authority; ``None`` marks an idle keep-alive tick."""
        return self._follow()

    def close(self) -> None:
        """Give the stream's slots back."""
        self.slot.release()

    def _follow(self) -> Iterator[Event | None]:
        pubsub = self.runtime.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        pubsub.subscribe(channel(self.run_id))
        timeout = self.runtime.settings.sse_keepalive.total_seconds()
        last = self.after
        try:
            while (read := self._read_log(last)) is not None:
                events, state = read
                for event in events:
                    if not self._authorised(idle=False):
                        return
                    yield event
                    last = event.seq
                    if event.type == FINISHED:
                        return
                if not events and state in TERMINAL_RUN_STATES:
                    return
                for live in _live(pubsub, self.run_id, last, timeout):
                    if not self._authorised(idle=live is None):
                        return
                    yield live
                    if live is None:
                        break
                    last = live.seq
                    if live.type == FINISHED:
                        return
        finally:
            pubsub.close()

    def _read_log(self, last: int) -> tuple[list[Event], str] | None:
        """The stored events after ``last`` and the run's state; ``None`` once the caller may not see the run."""
        try:
            return events_after(self.runtime, self.principal, self.run_id, last)
        except NotFound:
            log.info(
                "closing the event stream of run %s: the run is no longer visible",
                self.run_id,
                extra={"run_id": str(self.run_id)},
            )
            return None

    def _authorised(self, *, idle: bool) -> bool:
        """Re-check the token, the membership and the run's visibility at a keep-alive, or when one is overdue."""
        interval = self.runtime.settings.sse_keepalive.total_seconds()
        if not idle and time.monotonic() - self._checked_at < interval:
            return True
        try:
            self.principal = reauthenticate(self.runtime.db, self.principal)
            get_run(self.runtime, self.principal, self.run_id)
        except (Unauthorized, NotFound) as exc:
            log.info("closing the event stream of run %s: %s", self.run_id, exc, extra={"run_id": str(self.run_id)})
            return False
        self._checked_at = time.monotonic()
        if not self.slot.renew():
            log.warning(
                "closing the event stream of run %s: its lapsed stream slot is taken",
                self.run_id,
                extra={"run_id": str(self.run_id)},
            )
            return False
        return True


def _live(pubsub: object, run_id: uuid.UUID, last: int, timeout: float) -> Iterator[Event | None]:
    """Published events that directly follow ``last``; stops (to re-read the log) on a gap or after a quiet spell."""
    while True:
        message = pubsub.get_message(timeout=timeout)  # type: ignore[attr-defined]
        if message is None:
            yield None
            return
        payload = json.loads(message["data"])
        if payload["seq"] <= last:
            continue
        if payload["seq"] != last + 1:
            return
        last = payload["seq"]
        yield Event(run_id, last, payload["type"], payload["data"])
