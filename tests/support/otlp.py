"""A real OTLP/HTTP receiver on loopback for logs and metrics (traces are only counted): decodes
`ExportLogsServiceRequest` and `ExportMetricsServiceRequest` protobuf bodies with `opentelemetry-proto`, as a
collector would, and keeps what a test asserts on: each log record's body and attributes, each metric's name,
unit, kind and data points."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


@dataclass(frozen=True)
class LogRecord:
    body: Any
    severity: str
    attributes: dict[str, Any]
    trace_id: str
    service_name: str


@dataclass
class Point:
    attributes: dict[str, Any]
    value: float  # a sum's or gauge's value; a histogram's sum
    count: int = 0  # a histogram's count
    bounds: tuple[float, ...] = ()


@dataclass
class Metric:
    name: str
    unit: str
    kind: str  # sum, gauge, histogram
    points: list[Point] = field(default_factory=list)


class OtlpReceiver:
    """`with OtlpReceiver() as receiver:` POST /v1/logs, /v1/metrics and /v1/traces at `receiver.endpoint`."""

    def __init__(self) -> None:
        self.logs: list[LogRecord] = []
        self.metrics: list[Metric] = []
        self.trace_exports = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_error(415)
                    return
                reply: bytes
                if self.path == "/v1/logs":
                    logs = ExportLogsServiceRequest()
                    logs.ParseFromString(body)
                    receiver._accept_logs(logs)
                    reply = ExportLogsServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest()
                    metrics.ParseFromString(body)
                    receiver._accept_metrics(metrics)
                    reply = ExportMetricsServiceResponse().SerializeToString()
                elif self.path == "/v1/traces":  # accepted and counted, not kept (bench/otlp_receiver.py keeps spans)
                    receiver.trace_exports += 1
                    reply = ExportTraceServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
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

    def _accept_logs(self, request: ExportLogsServiceRequest) -> None:
        with self._lock:
            for resource_logs in request.resource_logs:
                service = next((a.value.string_value for a in resource_logs.resource.attributes
                                if a.key == "service.name"), "")
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        self.logs.append(LogRecord(
                            body=value_of(record.body), severity=record.severity_text,
                            attributes={a.key: value_of(a.value) for a in record.attributes},
                            trace_id=record.trace_id.hex(), service_name=service))

    def _accept_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self._lock:
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        kind = metric.WhichOneof("data")
                        found = Metric(metric.name, metric.unit, kind)
                        data = getattr(metric, kind)
                        for point in data.data_points:
                            attributes = {a.key: value_of(a.value) for a in point.attributes}
                            if kind == "histogram":
                                found.points.append(Point(attributes, point.sum, point.count,
                                                          tuple(point.explicit_bounds)))
                            else:
                                value = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
                                found.points.append(Point(attributes, value))
                        self.metrics.append(found)

    def log_records(self) -> list[LogRecord]:
        with self._lock:
            return list(self.logs)

    def latest_metrics(self) -> dict[str, Metric]:
        """Each metric as last exported (the exports are cumulative)."""
        with self._lock:
            return {metric.name: metric for metric in self.metrics}

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
