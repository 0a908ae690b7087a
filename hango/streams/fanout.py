"""One Redis subscription per process, fanned out to every live stream the process serves.

An open event stream must cost neither a thread nor a broker connection. The API's gunicorn workers are gevent
workers, so a stream is a greenlet; this module makes it cost no Redis connection either. A process keeps one
pub/sub connection, pattern-subscribed to every live channel (:data:`PATTERNS`), read by one background reader
(a greenlet under gevent, a thread elsewhere). The reader hands each message, decoded once, to the bounded queue
of every local listener of its channel; a message nobody here listens to is dropped. Messages that arrived together
(a decision and its run queued again, published in one round trip, or whatever piled up while the reader was busy)
are handed out together, in order, so that a stream can write them in one send.

The database stays the log: a listener only learns early what it would otherwise read there. Whenever the
reader may have missed something — its queue overflowed because the client reads slowly, or the Redis
connection dropped and came back — the listener gets :data:`GAP` and re-reads the log.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Final

import redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

PATTERNS: Final = ("hango:run:*:events", "hango:tenant:*:approvals", "hango:thread:*:runs")


class _Gap:
    def __repr__(self) -> str:
        return "GAP"


GAP: Final = _Gap()
"""What :meth:`Listener.get` returns when messages may have been lost: re-read the log."""

Message = dict[str, Any]


class Listener:
    """The live messages of one channel, for one stream. Close it when the stream ends.

    One reader offers, one stream takes: a deque and an event are all the synchronisation that needs (lighter than
    :class:`queue.Queue`'s condition, which allocates a lock per wait — this runs once per stream per event).
    """

    def __init__(self, fanout: Fanout, channel: str, size: int) -> None:
        self.channel = channel
        self._fanout = fanout
        self._size = size
        self._messages: deque[Message] = deque()
        self._arrived = threading.Event()
        self._lost = False
        self._direct: Callable[[list[Message]], bool] | None = None

    def get(self, timeout: float) -> Message | _Gap | None:
        """The next message; :data:`GAP` when some may have been lost; ``None`` after ``timeout`` seconds quiet."""
        taken = self.take(timeout, most=1)
        return taken[0] if isinstance(taken, list) else taken

    def take(
        self, timeout: float, most: int = 64, direct: Callable[[list[Message]], bool] | None = None
    ) -> list[Message] | _Gap | None:
        """Up to ``most`` messages, as many as are queued once one is (a burst is written at once); :data:`GAP`
        when some may have been lost; ``None`` after ``timeout`` seconds quiet.

        While this waits, ``direct`` is offered the messages first, on the reader, as many as arrived together, and
        messages it takes (returns ``True`` for) wake nobody: that is how a stream sends live events without its own
        greenlet running. Only where the reader and the streams are greenlets of one hub (a ``hango api`` worker): then
        nothing else runs between this call's checks and the reader's.
        """
        if not self._messages and not self._lost:
            self._arrived.clear()
            if not self._messages and not self._lost:  # an offer between the check and the clear sets it again
                self._direct = direct
                try:
                    self._arrived.wait(timeout)
                finally:
                    self._direct = None
        if self._lost:
            self._lost = False
            self._messages.clear()
            return GAP
        if not self._messages:
            return None
        messages = self._messages
        return [messages.popleft() for _ in range(min(most, len(messages)))]

    def close(self) -> None:
        """Stop receiving; closing twice is harmless."""
        self._fanout.remove(self)

    def offer(self, messages: list[Message]) -> None:
        """Called by the reader with messages of the channel that arrived together, in order: hand them to the
        waiting stream's direct handler, else queue them, or mark the listener as having lost some when its queue
        is full."""
        direct = self._direct
        if direct is not None and not self._messages and not self._lost and self._taken_directly(direct, messages):
            return
        for message in messages:
            if len(self._messages) >= self._size:
                self._lost = True
                break
            self._messages.append(message)
        self._arrived.set()

    def _taken_directly(self, direct: Callable[[list[Message]], bool], messages: list[Message]) -> bool:
        try:
            return direct(messages)
        except Exception:  # the stream meets the failure itself; the reader serves every other stream
            log.exception("a stream's direct handler failed on %s; the stream takes the message", self.channel)
            return False

    def lost(self) -> None:
        """Called by the reader when it may have missed messages (its connection dropped)."""
        self._lost = True
        self._arrived.set()


# What the reader reads before handing it out, however much more is waiting: a burst a stream writes in one send.
_MOST_MESSAGES = 64
_MOST_BYTES = 65_536


class _Arrived:
    """Messages read together, by channel; each channel's in the order they were published."""

    def __init__(self) -> None:
        self.by_channel: dict[str, list[bytes]] = {}
        self.count = 0
        self.size = 0

    def add(self, channel: str, data: bytes) -> None:
        self.by_channel.setdefault(channel, []).append(data)
        self.count += 1
        self.size += len(data)

    def full(self) -> bool:
        return self.count >= _MOST_MESSAGES or self.size >= _MOST_BYTES


class Fanout:
    """This process's one subscription to the live channels, and the local listeners of each channel.

    The reader starts with the first listener (after the fork: each gunicorn worker has its own).
    """

    def __init__(self, client: redis.Redis, *, queue_size: int = 256, ready_timeout: float = 2.0) -> None:
        self._client = client
        self._queue_size = queue_size
        self._ready_timeout = ready_timeout
        self._lock = threading.Lock()
        self._listeners: dict[str, set[Listener]] = {}
        self._ready = threading.Event()
        self._reconnecting = False
        self._stopping = threading.Event()
        self._reader: threading.Thread | None = None

    def listen(self, channel: str) -> Listener:
        """A listener of ``channel``. It hears every message published after this returns, unless the
        subscription is down: then it hears :data:`GAP` at its first :meth:`Listener.get`, and the stream falls
        back to reading the log."""
        listener = Listener(self, channel, self._queue_size)
        with self._lock:
            self._listeners.setdefault(channel, set()).add(listener)
            self._start()
        if not self._ready.wait(self._ready_timeout):
            listener.lost()
        return listener

    def remove(self, listener: Listener) -> None:
        """Forget a listener (its channel too, once it has no other)."""
        with self._lock:
            listeners = self._listeners.get(listener.channel)
            if listeners is not None:
                listeners.discard(listener)
                if not listeners:
                    del self._listeners[listener.channel]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the reader (within about a second) and wait for it; the process's end does this by itself."""
        self._stopping.set()
        if self._reader is not None:
            self._reader.join(timeout)

    def listening(self) -> int:
        """How many listeners this process has."""
        with self._lock:
            return sum(len(listeners) for listeners in self._listeners.values())

    def _start(self) -> None:
        if self._reader is None or not self._reader.is_alive():
            self._reader = threading.Thread(target=self._run, name="hango-fanout", daemon=True)
            self._reader.start()

    def _run(self) -> None:
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                for _ in self._messages():
                    backoff = 0.1
            except (RedisError, OSError):
                log.warning("the live-event subscription dropped; reconnecting", exc_info=True)
            except Exception:  # the reader must outlive any surprise: every stream of the process relies on it
                log.exception("the live-event reader failed; subscribing again")
            self._ready.clear()
            self._lost_all()
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _messages(self) -> Iterator[None]:
        """Subscribe, then deliver messages until the connection fails."""
        pubsub = self._client.pubsub()
        try:
            pubsub.psubscribe(*PATTERNS)
            confirmed = 0
            while not self._stopping.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                arrived = _Arrived()
                while message is not None:
                    if message["type"] == "pmessage":
                        arrived.add(message["channel"].decode(), message["data"])
                    elif message["type"] == "psubscribe":
                        self._deliver_all(arrived)
                        arrived = _Arrived()
                        confirmed += 1
                        if confirmed == len(PATTERNS):
                            self._subscribed()
                    # What has arrived meanwhile goes with it (without waiting for more).
                    message = None if arrived.full() else pubsub.get_message(timeout=0.0)
                self._deliver_all(arrived)
                yield None
        finally:
            pubsub.close()

    def _subscribed(self) -> None:
        """Every message published from now on reaches us. After a reconnection, something may have been published
        while nobody here listened: the listeners re-read the log."""
        if self._reconnecting:
            self._lost_all()
        self._reconnecting = True
        self._ready.set()

    def _deliver_all(self, arrived: _Arrived) -> None:
        for channel, data in arrived.by_channel.items():
            self._deliver(channel, data)

    def _deliver(self, channel: str, data: list[bytes]) -> None:
        with self._lock:
            listeners = list(self._listeners.get(channel, ()))
        if not listeners:
            return
        messages = []
        for item in data:
            try:
                messages.append(json.loads(item))
            except ValueError:
                log.warning("dropping an undecodable message on %s", channel)
        if not messages:
            return
        for listener in listeners:
            listener.offer(messages)

    def _lost_all(self) -> None:
        with self._lock:
            listeners = [listener for group in self._listeners.values() for listener in group]
        for listener in listeners:
            listener.lost()
