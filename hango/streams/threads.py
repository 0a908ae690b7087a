"""A thread's event stream (``GET /v1/threads/{id}/events``): its runs' events one run after the other, and the
wait for its next run.

The stream follows the thread's runs in their order (``runs.thread_position``). It follows one run exactly as a
run's own stream does — the stored events, then the live ones through the process's one subscription — until that
run's ``run.finished``, then goes on to the next run. When the thread has no next run yet, the stream waits for
one, with keep-alives, for as long as the thread exists: creating a run on the thread wakes its streams (a
message on :func:`hango.platform.events.thread_channel`, published after commit), and at every keep-alive the
stream asks whether the thread has been given a run meanwhile, so a lost wake-up costs latency, never an event.

An event's ``id`` is its run's place in the thread shifted 32 bits left, plus its number in the run
(:func:`hango.platform.events.thread_event_id`): the ids increase across the thread's runs, and ``Last-Event-ID``
names both the run and the event to resume after. Its ``data`` is the event's data with ``run_id``.

Whoever may see the thread follows all of its runs, whoever started them. The stream is re-authorised at every
keep-alive like the others: a revoked token, a removed membership or a deleted thread ends it.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound
from hango.kernel.models import TERMINAL_RUN_STATES
from hango.platform.events import Event, ThreadEvent, channel, thread_channel, thread_event_place
from hango.platform.runtime import Runtime
from hango.services import threads
from hango.store.threads import RunPlace
from hango.streams.fanout import Listener, Message
from hango.streams.live import FINISHED, Batch, End, Followed, Live, Read
from hango.streams.slots import admit_stream

log = logging.getLogger(__name__)


def open_thread_stream(
    runtime: Runtime, live: Live, principal: Principal, thread_id: uuid.UUID, after: int
) -> ThreadEventStream:
    """Admit a stream of a thread's events after the event whose id is ``after`` (0: from the first run's first);
    every refusal is raised here, before a byte is sent.

    Raises:
        NotFound: the caller may not see the thread.
        StreamCapacityFull: this process streams to as many clients as it keeps connections for.
        TooManyStreams: the user already holds ``max_streams_per_user`` open streams.
    """
    threads.get_thread(runtime, principal, thread_id)
    slot = admit_stream(runtime.redis, runtime.settings, principal.user_id)
    return ThreadEventStream(runtime, live, principal, after, slot, thread_id)


@dataclass
class ThreadEventStream(Followed[ThreadEvent]):
    """A thread's events, run after run, for as long as the thread exists and the caller may see it."""

    thread_id: uuid.UUID = field(default_factory=uuid.uuid4)
    _run: RunPlace | None = field(default=None, init=False)  # the run followed; None while waiting for one
    # A run's message is framed differently here (thread-wide id, run_id in data) than in the run's own stream.
    _shared_as: ClassVar[str] = "hango.thread_item"

    def _follow(self) -> Iterator[ThreadEvent | Batch[ThreadEvent] | None]:
        position, seq = thread_event_place(self.after)
        while True:
            run = yield from self._wait_for_run(position)
            if run is None:
                return
            self._run = run
            ended = yield from self._follow_log(seq if run.position == position else 0)
            self._run = None
            if ended is not End.LOG_ENDED:
                return
            position, seq = run.position + 1, 0

    def _wait_for_run(self, position: int) -> Generator[None, None, RunPlace | None]:
        """The thread's first run at ``position`` or after, once there is one, with keep-alives until then;
        ``None`` when the stream ends instead."""
        listener = self.live.fanout.listen(thread_channel(self.thread_id))  # before the read: no wake-up missed
        try:
            while True:
                try:
                    found = threads.run_from(self.runtime, self.principal, self.thread_id, position)
                except NotFound:
                    log.info("closing the event stream of thread %s: it is no longer visible", self.thread_id)
                    return None
                if found is not None:
                    return found
                if not (yield from self._idle(listener, position)):
                    return None
        finally:
            listener.close()

    def _idle(self, listener: Listener, position: int) -> Generator[None, None, bool]:
        """Keep-alives until the thread may have a run at ``position``: a wake-up, a lost message, or its run count
        as the process's checks last read it. ``False`` when the stream must end."""
        # A little under the interval, at random, as for a run's stream.
        while listener.take(self._interval() * random.uniform(0.8, 1.0)) is None:
            if not self._authorised(idle=True):
                return False
            yield None
            given = self.live.checks.thread(self.principal, self.thread_id)
            if given is None or given >= position:
                return True
        return True

    def _following(self) -> RunPlace:
        if self._run is None:
            raise RuntimeError("the thread's stream reads a run's log only while it follows that run")
        return self._run

    def _channel(self) -> str:
        return thread_channel(self.thread_id) if self._run is None else channel(self._run.run_id)

    def _read_log(self, last: int) -> Read[ThreadEvent] | None:
        run = self._following()
        try:
            events, state = threads.run_events_after(self.runtime, self.principal, self.thread_id, run.run_id, last)
        except NotFound:
            log.info("closing the event stream of thread %s: it is no longer visible", self.thread_id)
            return None
        reached = events[-1].seq if events else last
        items = [ThreadEvent(run.position, event) for event in events]
        return Read(items, reached, ended=not events and state in TERMINAL_RUN_STATES)

    def _head(self) -> int:
        run = self._following()
        head = self.live.checks.thread_run(self.principal, self.thread_id, run.run_id)
        return 0 if head is None else head.event_seq

    def _decode(self, message: Message) -> ThreadEvent:
        run = self._following()
        return ThreadEvent(run.position, Event(run.run_id, int(message["seq"]), message["type"], message["data"]))

    def _ends(self, item: ThreadEvent) -> bool:
        return item.type == FINISHED

    def _recheck(self) -> None:
        checks = self.live.checks
        if self._run is None:
            visible = checks.thread(self.principal, self.thread_id) is not None
        else:
            visible = checks.thread_run(self.principal, self.thread_id, self._run.run_id) is not None
        if not visible:
            raise NotFound(f"thread {self.thread_id} is no longer visible")
