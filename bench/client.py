"""What the benchmarks use to talk to hango as a user does: HTTP with a bearer token, and an SSE reader.

Each thread keeps one keep-alive connection to the server, so a figure does not include a TCP handshake per
request (gunicorn's threaded workers keep connections open, and so does any real client library). gunicorn closes a
connection idle for its ``keepalive`` (2 s by default), so one idle for longer than :data:`IDLE` is replaced first.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from celery import Celery

from bench.common import timed
from hango.kernel.config import Settings
from hango.platform.queue import PING_TASK

TIMEOUT = 60
IDLE = 1.0


@dataclass
class Client:
    """One person's HTTP client of a ``hango api`` server."""

    port: int
    token: str
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send a request on this thread's connection; the status and the decoded JSON body."""
        headers = {"Authorization": f"Bearer {self.token}"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection = self._connection()
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except (http.client.HTTPException, OSError):
            self._local.connection = None
            connection.close()
            raise
        return response.status, json.loads(data) if data else None

    def post(self, path: str, body: Any) -> Any:
        """POST JSON; the decoded answer, or an error naming the status."""
        status, answer = self.request("POST", path, body)
        if status >= 300:
            raise RuntimeError(f"POST {path}: {status} {answer}")
        return answer

    def get(self, path: str) -> Any:
        """GET; the decoded answer, or an error naming the status."""
        status, answer = self.request("GET", path)
        if status >= 300:
            raise RuntimeError(f"GET {path}: {status} {answer}")
        return answer

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        now = time.monotonic()
        if connection is not None and now - self._local.used > IDLE:
            connection.close()
            connection = None
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT)
            self._local.connection = connection
        self._local.used = now
        return connection


def wait_ready(port: int) -> None:
    """Return once the API answers ``/readyz``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError("the API did not become ready")


@dataclass
class EventReader:
    """An SSE client of one run's events that stamps the wall clock at which each event type first arrived."""

    seen: dict[str, float] = field(default_factory=dict)
    paused: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)

    def follow(self, client: Client, run_id: str) -> None:
        """Read the stream until ``run.finished`` (run this in a thread)."""
        connection = http.client.HTTPConnection("127.0.0.1", client.port, timeout=TIMEOUT)
        try:
            connection.request("GET", f"/v1/runs/{run_id}/events", headers={"Authorization": f"Bearer {client.token}"})
            for raw in connection.getresponse():
                line = raw.decode()
                if not line.startswith("event: "):
                    continue
                kind = line[len("event: ") :].strip()
                self.seen.setdefault(kind, time.time())
                if kind == "run.awaiting_approval":
                    self.paused.set()
                if kind == "run.finished":
                    break
        finally:
            self.finished.set()
            connection.close()


@contextmanager
def reading(client: Client, run_id: str) -> Iterator[EventReader]:
    """An :class:`EventReader` following the run in a background thread for the duration of the block."""
    reader = EventReader()
    thread = threading.Thread(target=reader.follow, args=(client, run_id), daemon=True)
    thread.start()
    try:
        yield reader
    finally:
        thread.join(TIMEOUT)


@dataclass
class RunEvents:
    """Every run's live events, as published on Redis after their commits: when each ``(run id, event type)`` was
    first received, read by one background subscriber (no polling of the database)."""

    client: redis.Redis
    seen: dict[tuple[str, str], float] = field(default_factory=dict)
    _arrived: threading.Condition = field(default_factory=threading.Condition)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def follow(self) -> None:
        """Read until :meth:`stop` (run this in a thread)."""
        pubsub = self.client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        pubsub.psubscribe("hango:run:*:events")
        try:
            while not self._stopped.is_set():
                message = pubsub.get_message(timeout=0.2)
                if message is None:
                    continue
                received = time.perf_counter()
                run_id = message["channel"].decode().split(":")[2]
                payload = json.loads(message["data"])
                kind = payload["type"]
                if kind == "run.finished":
                    kind = f"run.finished:{payload['data']['state']}"
                with self._arrived:
                    self.seen.setdefault((run_id, kind), received)
                    self._arrived.notify_all()
        finally:
            pubsub.close()

    def wait(self, run_id: str, kind: str, timeout: float = 120) -> float:
        """The ``perf_counter()`` at which the run's first event of ``kind`` arrived (``run.finished:<state>`` for a
        finish in that state); raises when it does not arrive in time or the run finished otherwise."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while (run_id, kind) not in self.seen:
                finished = [key for key in self.seen if key[0] == run_id and key[1].startswith("run.finished")]
                if finished:
                    raise RuntimeError(f"run {run_id} ended {finished[0][1]} before {kind}")
                if not self._arrived.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    raise TimeoutError(f"run {run_id} sent no {kind} in {timeout:.0f} s")
            return self.seen[(run_id, kind)]

    def stop(self) -> None:
        """Stop :meth:`follow`."""
        self._stopped.set()


@contextmanager
def run_events(client: redis.Redis) -> Iterator[RunEvents]:
    """A :class:`RunEvents` subscriber for the duration of the block (subscribed when the block starts)."""
    events = RunEvents(client)
    thread = threading.Thread(target=events.follow, daemon=True)
    thread.start()
    time.sleep(0.3)  # the subscription is in place before anything is published
    try:
        yield events
    finally:
        events.stop()
        thread.join(5)


def redis_publish_latency(client: redis.Redis, channel: str, count: int) -> list[float]:
    """Seconds from a bare Redis PUBLISH to the subscriber's receipt, ``count`` times."""
    pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(channel)
    try:
        samples = []
        for _ in range(count):
            started = time.perf_counter()
            client.publish(channel, "x")
            while pubsub.get_message(timeout=5) is None:
                pass
            samples.append(time.perf_counter() - started)
        return samples
    finally:
        pubsub.close()


def celery_round_trips(celery: Celery, client: redis.Redis, settings: Settings, reply: str, count: int) -> list[float]:
    """Seconds of ``count`` bare Celery round trips: publish a no-op task, the worker pushes to a list, pop it."""

    def ping() -> None:
        celery.send_task(PING_TASK, args=[reply], queue=settings.queue)
        if client.blpop([reply], timeout=30) is None:
            raise TimeoutError("no worker answered the ping")

    timed(5, ping)  # warm the worker's pool children and the connections
    return timed(count, ping)


def celery_throughput(celery: Celery, client: redis.Redis, settings: Settings, reply: str, count: int) -> float:
    """No-op tasks per second: publish ``count`` pings at once, and wait for every answer."""
    started = time.perf_counter()
    for _ in range(count):
        celery.send_task(PING_TASK, args=[reply], queue=settings.queue)
    for _ in range(count):
        if client.blpop([reply], timeout=60) is None:
            raise TimeoutError("the workers stopped answering pings")
    return count / (time.perf_counter() - started)
