"""Admission of live event streams: a slot per stream under two limits, each slot held by a renewable lease.

An open stream holds a server thread for as long as it lasts, so streams are counted twice:

- per user, at most ``max_streams_per_user`` across every API process: a Redis sorted set per user whose members
  are stream ids scored by the end of their lease (Redis time, so the processes' clocks do not matter);
- per process, at most ``Settings.stream_capacity()``, below the thread count, so that ordinary requests always
  find a free thread however many streams are asked for.

Each process renews the leases of all its open streams together, once per keep-alive interval, in one Redis round
trip (:class:`Renewals`); a stream learns at its own keep-alive whether its slot was lost. A process that dies, or
a response that is never closed, stops renewing, and its slots lapse after one lease without anyone having to
clean up.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass, field

import redis
from redis.exceptions import RedisError

from hango.kernel.config import Settings
from hango.kernel.errors import StreamCapacityFull, TooManyStreams

log = logging.getLogger(__name__)

# Prune lapsed leases, then take or renew the stream's slot unless the user is at the limit. One script, so two
# processes admitting the same user's streams at once cannot both take the last slot.
_CLAIM = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


def lease_seconds(settings: Settings) -> float:
    """How long a slot outlives its last renewal: three keep-alives, so one late tick never loses it."""
    return 3 * settings.sse_keepalive.total_seconds()


def retry_after(settings: Settings) -> int:
    """The ``Retry-After`` hint of a refused stream: a slot can free up at the next keep-alive."""
    return max(1, math.ceil(settings.sse_keepalive.total_seconds()))


def user_key(user_id: uuid.UUID) -> str:
    """The Redis sorted set of a user's open streams."""
    return f"hango:streams:user:{user_id}"


class ProcessStreams:
    """The streams this process serves, by id, with the monotonic time their lease ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[str, float] = {}

    def claim(self, stream_id: str, limit: int, lease: float) -> bool:
        """Take or renew a slot; ``False`` when ``limit`` other streams hold one."""
        now = time.monotonic()
        with self._lock:
            if stream_id not in self._leases and len(self._leases) >= limit:
                # Only a full process looks for lapsed leases: a scan per claim would cost every stream a pass
                # over all the others.
                for lapsed in [key for key, end in self._leases.items() if end <= now]:
                    del self._leases[lapsed]
                if len(self._leases) >= limit:
                    return False
            self._leases[stream_id] = now + lease
            return True

    def release(self, stream_id: str) -> None:
        """Give a slot back; releasing twice is harmless."""
        with self._lock:
            self._leases.pop(stream_id, None)


# The threads a stream holds are this process's own, so the count of them is too (gunicorn forks its workers
# before any request, each starting from an empty count).
PROCESS_STREAMS = ProcessStreams()


@dataclass
class StreamSlot:
    """One admitted stream's place under both limits. Renew it at every keep-alive; release it when it ends."""

    client: redis.Redis
    settings: Settings
    user_id: uuid.UUID
    stream_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    lost: bool = field(default=False, init=False)

    @classmethod
    def admit(cls, client: redis.Redis, settings: Settings, user_id: uuid.UUID) -> StreamSlot:
        """Take a new slot under both limits, or raise the error of the first one that is full."""
        slot = cls(client, settings, user_id)
        if not slot._claim_process():
            raise StreamCapacityFull(
                f"this server streams to as many clients as it can ({settings.stream_capacity()}); retry later",
                retry_after(settings),
            )
        try:
            if not slot._claim_user():
                raise TooManyStreams(
                    f"you already have {settings.max_streams_per_user} open event streams; close one first",
                    retry_after(settings),
                )
        except BaseException:  # refused or Redis failed: the process slot must not wait for its lease to lapse
            PROCESS_STREAMS.release(slot.stream_id)
            raise
        RENEWALS.add(slot)
        return slot

    def renew(self) -> bool:
        """Whether both leases still hold (:class:`Renewals` extends them); ``False``: the stream should end."""
        return not self.lost

    def release(self) -> None:
        """Free both places now, rather than when the leases lapse: the process's at once, the user's with the
        other slots released at about the same moment (a thousand watchers of a finished run), in one round
        trip made by :class:`Renewals`."""
        PROCESS_STREAMS.release(self.stream_id)
        RENEWALS.discard(self)

    def _claim_process(self) -> bool:
        return PROCESS_STREAMS.claim(self.stream_id, self.settings.stream_capacity(), lease_seconds(self.settings))

    def _claim_user(self) -> bool:
        return bool(self.client.eval(_CLAIM, 1, *self.claim_arguments()))

    def claim_arguments(self) -> tuple[str, str, int, int]:
        """The key and arguments of the Redis script that takes or renews this slot."""
        lease_ms = math.ceil(lease_seconds(self.settings) * 1000)
        return user_key(self.user_id), self.stream_id, self.settings.max_streams_per_user, lease_ms


_RENEWALS_PER_TRIP = 100  # a round trip of thousands would hold the process for tens of milliseconds


class Renewals:
    """The open streams of this process, whose leases one background reader (a greenlet under gevent) renews
    every keep-alive interval: the process leases in memory, the user leases in one pipelined round trip.

    A lease that could not be renewed (it lapsed and another stream took the place) marks its slot ``lost``. A
    Redis failure marks nothing: a lease outlives three intervals, and the next round tries again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, StreamSlot] = {}
        self._released: list[StreamSlot] = []
        self._wake = threading.Event()
        self._renewer: threading.Thread | None = None

    def add(self, slot: StreamSlot) -> None:
        """Renew ``slot`` from now on."""
        with self._lock:
            self._slots[slot.stream_id] = slot
            if self._renewer is None or not self._renewer.is_alive():
                interval = slot.settings.sse_keepalive.total_seconds()
                self._renewer = threading.Thread(target=self._run, args=(interval,), name="hango-renewals", daemon=True)
                self._renewer.start()

    def discard(self, slot: StreamSlot) -> None:
        """Stop renewing ``slot`` and give its user lease back soon (releasing twice is harmless)."""
        with self._lock:
            if self._slots.pop(slot.stream_id, None) is None:
                return
            self._released.append(slot)
        self._wake.set()

    def give_back(self) -> None:
        """Delete the user leases of the slots released since the last call, in one round trip."""
        with self._lock:
            released, self._released = self._released, []
        if not released:
            return
        by_key: dict[str, list[str]] = {}
        for slot in released:
            by_key.setdefault(user_key(slot.user_id), []).append(slot.stream_id)
        try:
            with released[0].client.pipeline(transaction=False) as pipe:
                for key, stream_ids in by_key.items():
                    pipe.zrem(key, *stream_ids)
                pipe.execute()
        except RedisError:
            log.warning("could not release %d stream slots; their leases will lapse", len(released), exc_info=True)

    def renew_all(self) -> None:
        """One round: extend every slot's two leases."""
        with self._lock:
            slots = list(self._slots.values())
        if not slots:
            return
        kept = []
        for slot in slots:
            if slot._claim_process():
                kept.append(slot)
            else:
                slot.lost = True
        for start in range(0, len(kept), _RENEWALS_PER_TRIP):
            if not self._renew(kept[start : start + _RENEWALS_PER_TRIP]):
                return
            time.sleep(0)  # under gevent, let the streams run between round trips

    def _renew(self, slots: list[StreamSlot]) -> bool:
        try:
            with slots[0].client.pipeline(transaction=False) as pipe:
                for slot in slots:
                    pipe.eval(_CLAIM, 1, *slot.claim_arguments())
                answers = pipe.execute()
        except RedisError:
            log.warning("could not renew %d stream slots; trying again next round", len(slots), exc_info=True)
            return False
        for slot, renewed in zip(slots, answers, strict=True):
            if not renewed:
                slot.lost = True
        return True

    def _run(self, interval: float) -> None:
        renewed = time.monotonic()
        while True:
            self._wake.wait(max(0.0, renewed + interval - time.monotonic()))
            self._wake.clear()
            self.give_back()
            if time.monotonic() - renewed >= interval:
                self.renew_all()
                renewed = time.monotonic()


# The process's renewer: gunicorn forks its workers before any request, so each starts with none.
RENEWALS = Renewals()


def admit_stream(client: redis.Redis, settings: Settings, user_id: uuid.UUID) -> StreamSlot:
    """A slot for one more stream of the user in this process.

    Raises:
        StreamCapacityFull: this process already serves as many streams as it keeps threads for.
        TooManyStreams: the user already holds ``max_streams_per_user`` open streams.
    """
    return StreamSlot.admit(client, settings, user_id)
