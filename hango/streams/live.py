"""Following an event log: replay what is stored, then stream live events as they are published.

Two logs are followed here: a run's events (``GET /v1/runs/{id}/events``) and a tenant's approval stream
(``GET /v1/approvals/events``); a thread's stream follows its runs' logs one after the other
(:mod:`hango.streams.threads`). The database is the log; Redis only wakes readers early, through the process's
one subscription (:mod:`hango.streams.fanout`). A reader listens before it reads the log, takes a published event
directly only when it is exactly the next one, and otherwise re-reads the log, so a lost or reordered publish
costs latency, never an event.

A stream is admitted before its first byte (the caller may see what it follows, and both the user and this process
have a stream slot free: :mod:`hango.streams.slots`). It is then re-authorised at every keep-alive, and at
least once per keep-alive interval while events flow: a revoked token, a removed membership or a run the caller
may no longer see ends it, before it sends anything more.
"""

from __future__ import annotations

import enum
import logging
import random
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar

import redis

from hango.kernel.auth import Principal
from hango.kernel.errors import NotFound, Unauthorized
from hango.kernel.models import TERMINAL_RUN_STATES
from hango.platform.events import ApprovalNotice, Event, ThreadEvent, approvals_channel, channel
from hango.platform.runtime import Runtime
from hango.run.service import approval_events_after, events_after, get_run
from hango.streams.checks import StreamChecks
from hango.streams.fanout import GAP, Fanout, Listener, Message
from hango.streams.slots import StreamSlot, admit_stream

FINISHED = "run.finished"
log = logging.getLogger(__name__)
Item = TypeVar("Item", Event, ApprovalNotice, ThreadEvent)


class End(enum.Enum):
    """Why following a log stopped."""

    LOG_ENDED = "the log has ended"
    STOPPED = "the stream must end: the caller may no longer follow it, or the client is gone"


@dataclass(frozen=True)
class Live:
    """What the streams of one API process share: the one subscription, and the answers of recent checks."""

    fanout: Fanout
    checks: StreamChecks

    @classmethod
    def build(cls, runtime: Runtime, client: redis.Redis) -> Live:
        """The process's subscription (on ``client``) and check answers, from the runtime's settings."""
        settings = runtime.settings
        fanout = Fanout(client, queue_size=settings.stream_buffer)
        return cls(fanout, StreamChecks(runtime.db, settings.stream_check_ttl.total_seconds()))


def open_stream(runtime: Runtime, live: Live, principal: Principal, run_id: uuid.UUID, after: int) -> RunEventStream:
    """Admit a stream of a run's events after ``after``; every refusal is raised here, before a byte is sent.

    Raises:
        NotFound: the caller may not see the run.
        StreamCapacityFull: this process streams to as many clients as it keeps connections for.
        TooManyStreams: the user already holds ``max_streams_per_user`` open streams.
    """
    get_run(runtime, principal, run_id)
    slot = admit_stream(runtime.redis, runtime.settings, principal.user_id)
    return RunEventStream(runtime, live, principal, after, slot, run_id)


def open_approval_stream(runtime: Runtime, live: Live, principal: Principal, after: int) -> ApprovalStream:
    """Admit a stream of the tenant's approval events after ``after`` (a member's: their own runs' approvals).

    Raises:
        StreamCapacityFull: this process streams to as many clients as it keeps connections for.
        TooManyStreams: the user already holds ``max_streams_per_user`` open streams.
    """
    slot = admit_stream(runtime.redis, runtime.settings, principal.user_id)
    return ApprovalStream(runtime, live, principal, after, slot)


class Wire(Protocol):
    """The connection of a stream's response, for live events sent by the process's reader while the stream's own
    greenlet waits (see :meth:`Followed.send_directly`). What it writes is framed as the server frames the body."""

    def send_now(self, frame: bytes) -> bool:
        """Send ``frame`` without waiting: ``True`` when it all went; otherwise the rest waits for :meth:`flush`
        (or the connection is gone), and nothing else may be written before it."""
        ...

    def flush(self) -> bool:
        """Send, waiting if need be, what :meth:`send_now` left; ``False`` once the connection is gone."""
        ...


@dataclass(frozen=True)
class Batch(Generic[Item]):
    """Live events that arrived together, sent in one write."""

    items: list[Item]

    @property
    def frame(self) -> str:
        """The events' SSE frames, one after the other."""
        if len(self.items) == 1:
            return self.items[0].frame
        return "".join(item.frame for item in self.items)

    @property
    def wire(self) -> bytes:
        """:attr:`frame`, encoded (from each event's encoding, made once however many streams send it)."""
        if len(self.items) == 1:
            return self.items[0].wire
        return b"".join(item.wire for item in self.items)


@dataclass(frozen=True)
class Read(Generic[Item]):
    """What one read of a log found: the events the caller may see, the number the read got to (past events
    the caller may not see), and whether the log has ended."""

    items: list[Item]
    reached: int
    ended: bool = False


@dataclass
class Followed(Generic[Item]):
    """An admitted stream: iterate it once, and close it when the response ends.

    Subclasses say what they follow: the channel, how the log is read, and what a published message means; one
    that follows several logs in turn (a thread's runs) overrides ``_follow`` and follows each with
    :meth:`_follow_log`.
    """

    runtime: Runtime
    live: Live
    principal: Principal
    after: int
    slot: StreamSlot
    _checked_at: float = field(default=0.0, init=False)
    _last: int = field(default=0, init=False)
    _wire: Wire | None = field(default=None, init=False)
    # Where a published message keeps its decoded event for every stream of this kind (no payload has this key).
    _shared_as: ClassVar[str] = "hango.item"

    def __post_init__(self) -> None:
        # The first check comes at a random point of the first interval, so that streams opened together (a
        # server's clients reconnecting after a restart) do not all re-authorise at the same moment ever after.
        self._checked_at = time.monotonic() - random.uniform(0, self._interval() / 2)

    def __iter__(self) -> Iterator[Item | Batch[Item] | None]:
        """The events (one by one from the log, in bursts when live) until the log ends or authority is lost;
        ``None`` marks an idle keep-alive tick."""
        return self._follow()

    def close(self) -> None:
        """Give the stream's slots back."""
        self.slot.release()

    def send_directly(self, wire: Wire) -> None:
        """Let the process's reader write the live events that simply come next straight to ``wire`` while this
        stream waits, instead of waking the stream to write each.

        A decision heard by two thousand streams is then two thousand socket writes, not two thousand greenlet
        switches through the WSGI layers. The stream still writes everything else itself: the log it reads, a
        gap, the last event, keep-alives, and whatever comes when a check is due (a check waits on PostgreSQL,
        which the reader must never do). Only for a stream whose reader is a greenlet of the same hub.
        """
        self._wire = wire

    def _channel(self) -> str:
        raise NotImplementedError

    def _read_log(self, last: int) -> Read[Item] | None:
        """The stored events after ``last`` that the caller may see; ``None`` once the caller may not follow the
        log any more."""
        raise NotImplementedError

    def _head(self) -> int:
        """The number of the log's last event, as recently seen by this process."""
        raise NotImplementedError

    def _decode(self, message: Message) -> Item:
        """The event of a published message."""
        raise NotImplementedError

    def _may_see(self, item: Item) -> bool:
        """Whether the caller may see a published event of what it follows."""
        return True

    def _ends(self, item: Item) -> bool:
        """Whether ``item`` is the last event of the log."""
        return False

    def _recheck(self) -> None:
        """Raise :class:`NotFound` if the caller may no longer follow the log."""

    def _interval(self) -> float:
        return self.runtime.settings.sse_keepalive.total_seconds()

    def _follow(self) -> Iterator[Item | Batch[Item] | None]:
        yield from self._follow_log(self.after)

    def _follow_log(self, after: int) -> Generator[Item | Batch[Item] | None, None, End]:
        """The log's events after ``after`` (stored, then live) and keep-alives, until the log ends or the stream
        must (:class:`End` says which)."""
        listener = self.live.fanout.listen(self._channel())
        last = after
        try:
            while (read := self._read_log(last)) is not None:
                for item in read.items:
                    if not self._authorised(idle=False):
                        return End.STOPPED
                    yield item
                    if self._ends(item):
                        return End.LOG_ENDED
                if read.ended:
                    return End.LOG_ENDED
                reached = yield from self._listen(listener, read.reached)
                if isinstance(reached, End):
                    return reached
                last = reached
            return End.STOPPED
        finally:
            listener.close()

    def _listen(self, listener: Listener, last: int) -> Generator[Batch[Item] | None, None, int | End]:
        """Live events that directly follow ``last``, a burst at a time, and keep-alives, until the log must be
        read again (a gap, a message lost, or a log that grew behind the subscription's back): then the number
        reached. An :class:`End` when the log or the stream ends."""
        self._last = last
        direct = self._send_now if self._wire is not None else None
        while True:
            # A little under the interval, at random: streams that heard the same event do not tick together.
            taken = listener.take(self._interval() * random.uniform(0.8, 1.0), direct=direct)
            if self._wire is not None and not self._wire.flush():
                return End.STOPPED  # the client is gone
            if taken is GAP:
                return self._last
            if taken is None:
                if not self._authorised(idle=True):
                    return End.STOPPED
                yield None
                if self._head() > self._last:
                    return self._last
                continue
            assert isinstance(taken, list)
            burst, reached, outcome = self._next_of(taken, self._last)
            if burst:
                if not self._authorised(idle=False):
                    return End.STOPPED
                yield Batch(burst)
            if outcome != "more":
                return End.LOG_ENDED if outcome == "ended" else reached
            self._last = reached

    def _send_now(self, messages: list[Message]) -> bool:
        """On the reader, while the stream waits: send ``messages`` (published together) to the wire in one write
        when they are simply the next events and no check is due. ``False`` leaves them to the stream, woken (for
        what the wire could not send at once, too: the stream finishes that first, then skips the messages as
        already sent)."""
        if self._wire is None or self._check_due():
            return False
        burst, reached, outcome = self._next_of(messages, self._last)
        if outcome != "more":
            return False
        self._last = reached
        return not burst or self._wire.send_now(Batch(burst).wire)

    def _next_of(self, messages: list[Message], last: int) -> tuple[list[Item], int, str]:
        """The events among ``messages`` that directly follow ``last`` and the caller may see, the number reached,
        and what comes next: ``more`` (listen on), ``gap`` (re-read the log) or ``ended``."""
        burst: list[Item] = []
        for message in messages:
            item = _shared(message, self._decode, self._shared_as)
            if item.seq <= last:
                continue
            if item.seq != last + 1:
                return burst, last, "gap"
            last = item.seq
            if self._may_see(item):
                burst.append(item)
            if self._ends(item):
                return burst, last, "ended"
        return burst, last, "more"

    def _check_due(self) -> bool:
        return time.monotonic() - self._checked_at >= self._interval()

    def _authorised(self, *, idle: bool) -> bool:
        """Re-check the token, the membership and what is followed at a keep-alive, or when a check is overdue."""
        if not idle and not self._check_due():
            return True
        try:
            if self.principal.token_id is not None:  # an internal principal has no token to revoke
                current = self.live.checks.principal(self.principal.token_id)
                if current is None:
                    raise Unauthorized("the bearer token was revoked or its user removed from the tenant")
                self.principal = current
            self._recheck()
        except (Unauthorized, NotFound) as exc:
            log.info("closing the event stream of %s: %s", self._channel(), exc)
            return False
        self._checked_at = time.monotonic()
        if not self.slot.renew():
            log.warning("closing the event stream of %s: its lapsed stream slot is taken", self._channel())
            return False
        return True


@dataclass
class RunEventStream(Followed[Event]):
    """One run's events, until ``run.finished``."""

    run_id: uuid.UUID = field(default_factory=uuid.uuid4)

    def _channel(self) -> str:
        return channel(self.run_id)

    def _read_log(self, last: int) -> Read[Event] | None:
        try:
            events, state = events_after(self.runtime, self.principal, self.run_id, last)
        except NotFound:
            log.info(
                "closing the event stream of run %s: the run is no longer visible",
                self.run_id,
                extra={"run_id": str(self.run_id)},
            )
            return None
        reached = events[-1].seq if events else last
        return Read(events, reached, ended=not events and state in TERMINAL_RUN_STATES)

    def _head(self) -> int:
        head = self.live.checks.run(self.principal, self.run_id)
        return 0 if head is None else head.event_seq

    def _decode(self, message: Message) -> Event:
        return Event(self.run_id, int(message["seq"]), message["type"], message["data"])

    def _ends(self, item: Event) -> bool:
        return item.type == FINISHED

    def _recheck(self) -> None:
        if self.live.checks.run(self.principal, self.run_id) is None:
            raise NotFound(f"run {self.run_id} is no longer visible")


@dataclass
class ApprovalStream(Followed[ApprovalNotice]):
    """A tenant's approval events, for as long as the caller may follow them; a member sees their own runs'."""

    def _channel(self) -> str:
        return approvals_channel(self.principal.tenant_id)

    def _read_log(self, last: int) -> Read[ApprovalNotice]:
        notices, reached = approval_events_after(self.runtime, self.principal, last)
        return Read(notices, reached)

    def _head(self) -> int:
        return self.live.checks.approvals_head(self.principal.tenant_id)

    def _decode(self, message: Message) -> ApprovalNotice:
        creator = uuid.UUID(message["run_creator"])
        return ApprovalNotice(self.principal.tenant_id, int(message["seq"]), message["type"], creator, message["data"])

    def _may_see(self, item: ApprovalNotice) -> bool:
        return self.principal.is_manager or item.run_creator == self.principal.user_id


def _shared(message: Message, decode: Callable[[Message], Item], key: str) -> Item:
    """The event of a message the process's listeners share: decoded, and framed, once for all the streams that
    keep it under ``key`` (a run's stream and a thread's frame one message differently)."""
    item: Item | None = message.get(key)
    if item is None:
        item = message[key] = decode(message)
    return item
