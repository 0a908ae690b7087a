"""The process's one subscription, on real Redis: every listener of a channel hears its messages, nobody else's;
a listener that falls behind, or a subscription that dropped, is told to re-read the log (``GAP``) and then
hears live messages again."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from hango.kernel.config import Settings
from hango.streams.fanout import GAP, Fanout, Listener, Message
from tests.support.processes import wait_until


@pytest.fixture
def named(settings: Settings) -> Iterator[tuple[Fanout, redis.Redis, str]]:
    name = f"test-fanout-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(settings.require_redis_url(), client_name=name)
    fanout = Fanout(client, queue_size=4)
    yield fanout, redis.Redis.from_url(settings.require_redis_url()), name
    fanout.stop()
    client.close()


def _channel() -> str:
    return f"hango:run:{uuid.uuid4()}:events"


def _next(listener: Listener, timeout: float = 5) -> object:
    return listener.get(timeout)


def test_each_listener_hears_its_channel_only(named: tuple[Fanout, redis.Redis, str]) -> None:
    fanout, publisher, _ = named
    mine, theirs = _channel(), _channel()
    first, second, other = fanout.listen(mine), fanout.listen(mine), fanout.listen(theirs)
    publisher.publish(mine, json.dumps({"seq": 1}))
    assert _next(first) == {"seq": 1}
    assert _next(second) == {"seq": 1}
    assert other.get(0.3) is None
    for listener in (first, second, other):
        listener.close()
    assert fanout.listening() == 0


def test_a_listener_that_falls_behind_is_told_to_reread_the_log(named: tuple[Fanout, redis.Redis, str]) -> None:
    fanout, publisher, _ = named
    channel = _channel()
    slow, keeping_up = fanout.listen(channel), fanout.listen(channel)
    for seq in range(1, 7):  # more than the queue holds
        publisher.publish(channel, json.dumps({"seq": seq}))
        assert _next(keeping_up) == {"seq": seq}
    assert _next(slow) is GAP
    publisher.publish(channel, json.dumps({"seq": 7}))
    assert _next(slow) == {"seq": 7}


def test_a_dropped_subscription_tells_every_listener_and_comes_back(
    named: tuple[Fanout, redis.Redis, str],
) -> None:
    fanout, publisher, name = named
    channel = _channel()
    listener = fanout.listen(channel)
    (connection,) = [entry for entry in publisher.client_list() if entry["name"] == name]
    publisher.client_kill_filter(_id=connection["id"])
    assert _next(listener) is GAP
    # Once subscribed again, the reader says so (another GAP: something may have been published meanwhile) and
    # then delivers live messages.
    deadline = time.monotonic() + 10
    heard: object = None
    while time.monotonic() < deadline and heard != {"seq": 1}:
        publisher.publish(channel, json.dumps({"seq": 1}))
        heard = listener.get(0.2)
    assert heard == {"seq": 1}
    assert wait_until(lambda: any(entry["name"] == name for entry in publisher.client_list()), timeout=5)


def test_a_waiting_listeners_direct_handler_takes_messages_and_a_failing_one_leaves_them_queued(
    named: tuple[Fanout, redis.Redis, str],
) -> None:
    fanout, publisher, _ = named
    channel = _channel()
    listener = fanout.listen(channel)
    handled: list[Message] = []

    def take_directly(messages: list[Message]) -> bool:
        handled.extend(messages)
        return True

    def fail(messages: list[Message]) -> bool:
        raise KeyError("seq")

    def publish_soon(seq: int) -> None:
        threading.Timer(0.3, lambda: publisher.publish(channel, json.dumps({"seq": seq}))).start()

    publish_soon(1)
    assert listener.take(2.0, direct=take_directly) is None  # taken by the handler: nobody was woken
    assert handled == [{"seq": 1}]
    publish_soon(2)
    assert listener.take(5.0, direct=fail) == [{"seq": 2}]  # the reader lived on, and the message waited
    publisher.publish(channel, json.dumps({"seq": 3}))
    assert _next(listener) == {"seq": 3}


def test_messages_published_together_reach_a_direct_handler_together_and_in_order(
    named: tuple[Fanout, redis.Redis, str],
) -> None:
    fanout, publisher, _ = named
    channel, other = _channel(), _channel()
    listener, elsewhere = fanout.listen(channel), fanout.listen(other)
    bursts: list[list[Message]] = []

    def take_directly(messages: list[Message]) -> bool:
        bursts.append(messages)
        return True

    def publish_soon() -> None:
        with publisher.pipeline(transaction=False) as pipe:  # one round trip, as a transaction's events are
            pipe.publish(channel, json.dumps({"seq": 1}))
            pipe.publish(other, json.dumps({"seq": 1}))
            pipe.publish(channel, json.dumps({"seq": 2}))
            pipe.execute()

    threading.Timer(0.3, publish_soon).start()
    assert listener.take(2.0, direct=take_directly) is None
    assert bursts == [[{"seq": 1}, {"seq": 2}]]  # one call, so one write to the stream's client
    assert _next(elsewhere) == {"seq": 1}  # another channel's message, read with them, went to its own listener
