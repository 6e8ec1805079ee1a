"""A real OTLP/HTTP trace receiver on loopback: decodes `ExportTraceServiceRequest` protobuf bodies with
`opentelemetry-proto`, as a collector would, and keeps the spans as `SpanRecord`s."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from bench.spans import SpanRecord


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[SpanRecord] = []
        self.service_names: set[str] = set()
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(404)
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver._accept(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _accept(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                for attribute in resource_spans.resource.attributes:
                    if attribute.key == "service.name":
                        self.service_names.add(attribute.value.string_value)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(SpanRecord(
                            name=span.name, trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex() or None,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=tuple(link.span_id.hex() for link in span.links),
                            error=span.status.code == 2,
                        ))

    def received(self) -> list[SpanRecord]:
        with self._lock:
            return list(self.spans)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
