"""Tracing and metrics by configuration: what a client or worker process installs before it connects.

Tracing is OpenTelemetry through `temporalio.contrib.opentelemetry`: a replay-safe tracer provider (span ids
from the workflow's seeded random, spans that end during replay are dropped) installed as the global one,
and the SDK's `OpenTelemetryPlugin`, which carries the trace context in Temporal headers from the client's
start through the workflow into every activity. Metrics are the Temporal runtime's: its own (workflow task
latency, activity failures, ...) plus the agent's counters, which the workflow records through
`workflow.metric_meter()` (suppressed during replay) and activities through `activity.metric_meter()`.

Nothing is installed by default: without `OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_TRACES_EXPORTER` or a metrics
port, no span is recorded, no metrics are collected and no OpenTelemetry module is imported (tracing needs the
`otel` extra; agent/otel.py is the switch). Metrics need no extra: the Temporal runtime exports them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from temporalio.common import MetricMeter
from temporalio.plugin import SimplePlugin
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig

from durable_agent.agent import otel
from durable_agent.agent.extras import import_extra

if TYPE_CHECKING:  # the SDK and exporters are imported only when tracing is configured
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

TraceExporter = Literal["none", "otlp", "console"]
MetricsExporter = Literal["none", "otlp", "prometheus"]
DEFAULT_SERVICE_NAME = "durable-agent"


@dataclass(frozen=True)
class ObservabilityConfig:
    """What to export. Read with `ObservabilityConfig.from_env()`; `Settings` carries one."""

    traces: TraceExporter = "none"
    metrics: MetricsExporter = "none"
    metrics_bind: str = "127.0.0.1:9464"  # the Prometheus endpoint's address (host:port)
    otlp_protocol: Literal["http/protobuf", "grpc"] = "http/protobuf"
    otlp_endpoint: str = ""
    otlp_metrics_url: str = ""
    otlp_metrics_headers: tuple[tuple[str, str], ...] = ()
    service_name: str = "durable-agent"

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1") -> ObservabilityConfig:
        """From the standard OTEL_* variables (`Settings.otel_env`): OTLP when an endpoint is set,
        `OTEL_TRACES_EXPORTER` and `OTEL_METRICS_EXPORTER` (otlp, console/prometheus, none) override; a
        metrics port means Prometheus."""
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        traces = env.get("OTEL_TRACES_EXPORTER", "").strip().lower() or (
            "otlp" if endpoint or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else "none")
        port = metrics_port
        metrics = env.get("OTEL_METRICS_EXPORTER", "").strip().lower() or (
            "prometheus" if port is not None else "otlp" if endpoint or env.get(
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") else "none")
        if port is not None and metrics != "none":
            metrics = "prometheus"
        if traces not in ("none", "otlp", "console"):
            raise ValueError(f"OTEL_TRACES_EXPORTER must be otlp, console or none, not {traces!r}")
        if metrics not in ("none", "otlp", "prometheus"):
            raise ValueError(f"OTEL_METRICS_EXPORTER must be otlp, prometheus or none, not {metrics!r}")
        protocol = env.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip() or "http/protobuf"
        if protocol not in ("http/protobuf", "grpc"):
            raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc, not {protocol!r}")
        metrics_url = (env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
                       or _otlp_metrics_url(endpoint, protocol))
        raw_headers = env.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
        headers = tuple((k.strip(), v.strip()) for k, _, v in
                        (item.partition("=") for item in raw_headers.split(",") if "=" in item))
        return cls(traces=traces, metrics=metrics,  # type: ignore[arg-type]
                   metrics_bind=f"{metrics_host}:{port if port is not None else 9464}",
                   otlp_protocol=protocol, otlp_endpoint=endpoint,  # type: ignore[arg-type]
                   otlp_metrics_url=metrics_url, otlp_metrics_headers=headers,
                   service_name=env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME)

    @property
    def tracing(self) -> bool:
        return self.traces != "none"


def _otlp_metrics_url(endpoint: str, protocol: str) -> str:
    if protocol == "grpc":
        return endpoint or "http://localhost:4317"
    return (endpoint or "http://localhost:4318").rstrip("/") + "/v1/metrics"


# --- tracing ----------------------------------------------------------------------------------------


def install_tracer_provider(processors: Sequence[SpanProcessor] = (), *,
                            service_name: str | None = None) -> ReplaySafeTracerProvider:
    """The process's replay-safe tracer provider, installed as OpenTelemetry's global one on first use.

    OpenTelemetry allows one global provider per process: later calls add their processors to it.
    Turns tracing on for the process (agent/otel.py); needs the `otel` extra.
    """
    import_extra("opentelemetry.sdk", "otel", feature="tracing (OpenTelemetry)")
    trace = otel.enable()
    from opentelemetry.sdk.resources import Resource
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider

    current = trace.get_tracer_provider()
    if isinstance(current, ReplaySafeTracerProvider):
        provider: ReplaySafeTracerProvider = current
    else:
        resource = Resource.create({"service.name": service_name or DEFAULT_SERVICE_NAME})
        provider = create_tracer_provider(resource=resource)
        trace.set_tracer_provider(provider)
        if trace.get_tracer_provider() is not provider:
            raise RuntimeError("another OpenTelemetry tracer provider is installed already; "
                               "Durable Agent needs temporalio's replay-safe one")
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def span_exporter(config: ObservabilityConfig) -> SpanExporter | None:
    """The exporter the configuration asks for; OTLP exporters read the standard OTEL_EXPORTER_OTLP_* variables."""
    import_extra("opentelemetry.sdk", "otel", feature=f"tracing (OTEL_TRACES_EXPORTER={config.traces})")
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if config.traces == "console":
        return ConsoleSpanExporter()
    if config.traces != "otlp":
        return None
    if config.otlp_protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
        except ImportError as exc:
            raise ValueError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs "
                             "`pip install opentelemetry-exporter-otlp-proto-grpc`; "
                             "or use http/protobuf (the default)") from exc
        return GrpcExporter()  # type: ignore[no-any-return]
    exporter = import_extra("opentelemetry.exporter.otlp.proto.http.trace_exporter", "otel",
                            feature="OTLP trace export")
    return exporter.OTLPSpanExporter()  # type: ignore[no-any-return]


_installed_exporters: set[str] = set()


def configure_tracing(config: ObservabilityConfig) -> bool:
    """Install the tracer provider and the configured exporter once per process; True when tracing is on."""
    if not config.tracing:
        return False
    import_extra("opentelemetry.sdk", "otel", feature=f"tracing (OTEL_TRACES_EXPORTER={config.traces})")
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    key = f"{config.traces}:{config.otlp_protocol}"
    if key not in _installed_exporters:
        exporter = span_exporter(config)
        install_tracer_provider([BatchSpanProcessor(exporter)] if exporter else [], service_name=config.service_name)
        _installed_exporters.add(key)
    return True


def installed_provider() -> ReplaySafeTracerProvider | None:
    """The replay-safe provider if this process installed one (without importing the SDK otherwise). A provider
    the application installed itself (temporalio's `create_tracer_provider`) turns tracing on too."""
    contrib = sys.modules.get("temporalio.contrib.opentelemetry")
    if contrib is None:
        return None
    trace = otel.api() or sys.modules.get("opentelemetry.trace")
    provider = trace.get_tracer_provider() if trace is not None else None
    if not isinstance(provider, contrib.ReplaySafeTracerProvider):
        return None
    otel.enable()
    return provider


def temporal_plugins(config: ObservabilityConfig) -> list[SimplePlugin]:
    """The Temporal plugins for a client (its workers inherit them): tracing when it is configured."""
    if configure_tracing(config) or installed_provider() is not None:
        from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

        return [OpenTelemetryPlugin()]
    return []


def flush_traces(timeout_millis: int = 5000) -> None:
    if (provider := installed_provider()) is not None:
        provider.force_flush(timeout_millis)


# --- metrics ----------------------------------------------------------------------------------------


_runtimes: dict[ObservabilityConfig, Runtime] = {}


def metrics_runtime(config: ObservabilityConfig) -> Runtime | None:
    """A Temporal runtime exporting its metrics and the agent's (Prometheus endpoint or OTLP), or None for
    the default runtime (no metrics). One per configuration per process: a runtime owns its endpoint."""
    if config.metrics == "none":
        return None
    if config in _runtimes:
        return _runtimes[config]
    metrics: PrometheusConfig | OpenTelemetryConfig
    if config.metrics == "prometheus":
        metrics = PrometheusConfig(bind_address=config.metrics_bind, counters_total_suffix=True,
                                   durations_as_seconds=True)
    else:
        metrics = OpenTelemetryConfig(url=config.otlp_metrics_url, headers=dict(config.otlp_metrics_headers),
                                      http=config.otlp_protocol != "grpc", durations_as_seconds=True)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=metrics, global_tags={"service_name": config.service_name},
                                                attach_service_name=False))
    _runtimes[config] = runtime
    set_process_meter(runtime.metric_meter)
    return runtime


_process_meter: MetricMeter = MetricMeter.noop


def set_process_meter(meter: MetricMeter) -> None:
    """The meter for measurements outside workflows and activities (payload storage)."""
    global _process_meter
    _process_meter = meter


def process_meter() -> MetricMeter:
    return _process_meter
