"""An OTLP/HTTP traces receiver for tests: real hango processes export to it, the test reads what they sent."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


@dataclass(frozen=True)
class ReceivedLink:
    """A span link as exported: the linked span's ids (hex) and the link's attributes."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lowercase hex (what ``runs.trace_context`` and audit rows hold)."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: dict[str, Any]
    events: dict[str, dict[str, Any]]
    links: list[ReceivedLink]


class Receiver:
    """The spans received so far, from every process that exports here."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    def spans(self) -> list[ReceivedSpan]:
        """A copy of what arrived."""
        with self._lock:
            return list(self._spans)

    def named(self, prefix: str) -> list[ReceivedSpan]:
        """The spans whose name starts with ``prefix``."""
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def add(self, body: bytes) -> None:
        """Decode one export request."""
        request = ExportTraceServiceRequest.FromString(body)
        received = [
            _span(_values(resource.resource.attributes).get("service.name", ""), span)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self._lock:
            self._spans.extend(received)


def _span(service: str, span: Any) -> ReceivedSpan:
    return ReceivedSpan(
        service=service,
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        attributes=_values(span.attributes),
        events={event.name: _values(event.attributes) for event in span.events},
        links=[ReceivedLink(link.trace_id.hex(), link.span_id.hex(), _values(link.attributes)) for link in span.links],
    )


def _values(pairs: list[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A receiver on a free loopback port for the duration of the block; its ``endpoint`` is the traces URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    received = Receiver(f"http://127.0.0.1:{server.server_port}/v1/traces")
    server.received = received  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path == "/v1/traces":
            self.server.received.add(body)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass
