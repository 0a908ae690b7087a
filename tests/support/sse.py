"""A minimal Server-Sent Events client over a real HTTP connection, for tests and benchmarks."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class SseEvent:
    """One event, or a comment (``event == ""`` and ``comment`` set)."""

    id: int | None
    event: str
    data: Any
    comment: str = ""
    received_at: float = 0.0


def stream(
    base: str, path: str, token: str, *, last_event_id: int | None = None, timeout: float = 30
) -> Iterator[SseEvent]:
    """Open ``path`` as an event stream and yield events and comments until the server closes it."""
    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            raise AssertionError(f"stream answered {response.status}: {response.read()[:300]!r}")
        yield from _parse(response)
    finally:
        connection.close()


def _parse(response: http.client.HTTPResponse) -> Iterator[SseEvent]:
    fields: dict[str, str] = {}
    while True:
        raw = response.readline()
        if not raw:
            return
        line = raw.decode().rstrip("\n")
        if line.startswith(":"):
            yield SseEvent(None, "", None, comment=line[1:].strip(), received_at=time.monotonic())
            continue
        if line:
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
            continue
        if "event" in fields or "data" in fields:
            yield SseEvent(
                int(fields["id"]) if "id" in fields else None,
                fields.get("event", "message"),
                json.loads(fields["data"]) if "data" in fields else None,
                received_at=time.monotonic(),
            )
        fields = {}


def events_only(items: Iterator[SseEvent]) -> list[SseEvent]:
    """Drop comments."""
    return [item for item in items if item.event]
