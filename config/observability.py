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

import importlib
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from temporalio.common import MetricMeter
from temporalio.plugin import SimplePlugin
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig

from durable_agent.agent import metric_names, otel
from durable_agent.agent.extras import import_extra
from durable_agent.agent.logging import LIBRARY_LOGGER
from durable_agent.config.env_values import one_of

if TYPE_CHECKING:  # the SDK and exporters are imported only when tracing is configured
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter
    from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider

TraceExporter = Literal["none", "otlp", "console"]
LogExporter = Literal["none", "otlp", "console"]
MetricsExporter = Literal["none", "otlp", "prometheus"]
OtlpProtocol = Literal["http/protobuf", "grpc"]
DEFAULT_SERVICE_NAME = "durable-agent"


@dataclass(frozen=True)
class ObservabilityConfig:
    """What to export. Read with `ObservabilityConfig.from_env()`; `Settings` carries one."""

    traces: TraceExporter = "none"
    metrics: MetricsExporter = "none"
    metrics_bind: str = "127.0.0.1:9464"  # the Prometheus endpoint's address (host:port)
    otlp_protocol: OtlpProtocol = "http/protobuf"
    otlp_endpoint: str = ""
    otlp_metrics_url: str = ""
    otlp_metrics_headers: tuple[tuple[str, str], ...] = ()
    service_name: str = "durable-agent"
    logs: LogExporter = "none"  # OTEL_LOGS_EXPORTER: off unless asked for, whatever the endpoint
    log_level: str = "INFO"  # our loggers' level when log export is on and the process set none
    temporal_spans: bool = False  # the Temporal SDK's own spans (StartWorkflow, RunActivity, ...)
    metrics_interval: timedelta | None = None  # OTEL_METRIC_EXPORT_INTERVAL (ms): how often OTLP metrics go out

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, metrics_port: int | None = None,
                 metrics_host: str = "127.0.0.1", log_level: str = "INFO",
                 temporal_spans: bool = False) -> ObservabilityConfig:
        """From the standard OTEL_* variables (`Settings.otel_env`): OTLP when an endpoint is set,
        `OTEL_TRACES_EXPORTER` and `OTEL_METRICS_EXPORTER` (otlp, console/prometheus, none) override; a
        metrics port means Prometheus."""
        endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        traces = one_of(env, "OTEL_TRACES_EXPORTER", TraceExporter,
                        "otlp" if endpoint or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") else "none")
        port = metrics_port
        metrics_by_default = ("prometheus" if port is not None else
                              "otlp" if endpoint or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") else "none")
        metrics = one_of(env, "OTEL_METRICS_EXPORTER", MetricsExporter, metrics_by_default)
        if port is not None and metrics != "none":
            metrics = "prometheus"
        interval = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
        if interval and not interval.isdigit():
            raise ValueError(f"OTEL_METRIC_EXPORT_INTERVAL must be milliseconds, not {interval!r}")
        logs = one_of(env, "OTEL_LOGS_EXPORTER", LogExporter, "none")
        protocol = one_of(env, "OTEL_EXPORTER_OTLP_PROTOCOL", OtlpProtocol, "http/protobuf")
        metrics_url = (env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
                       or _otlp_metrics_url(endpoint, protocol))
        raw_headers = env.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
        headers = tuple((k.strip(), v.strip()) for k, _, v in
                        (item.partition("=") for item in raw_headers.split(",") if "=" in item))
        return cls(traces=traces, metrics=metrics,  # type: ignore[arg-type]
                   metrics_bind=f"{metrics_host}:{port if port is not None else 9464}",
                   otlp_protocol=protocol, otlp_endpoint=endpoint,  # type: ignore[arg-type]
                   otlp_metrics_url=metrics_url, otlp_metrics_headers=headers,
                   service_name=env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME,
                   logs=logs, log_level=log_level, temporal_spans=temporal_spans,  # type: ignore[arg-type]
                   metrics_interval=timedelta(milliseconds=int(interval)) if interval else None)

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
    return _otlp_exporter(config, "trace_exporter", "OTLPSpanExporter", "trace")  # type: ignore[no-any-return]


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
    """The Temporal plugins for a client (its workers inherit them): tracing when it is configured, with the
    SDK's own spans (StartWorkflow, RunWorkflow, StartActivity, RunActivity) when `temporal_spans` is on. Log
    export starts here too when OTEL_LOGS_EXPORTER asks for it."""
    configure_log_export(config)
    if configure_tracing(config) or installed_provider() is not None:
        from temporalio.contrib.opentelemetry import OpenTelemetryPlugin

        return [OpenTelemetryPlugin(add_temporal_spans=config.temporal_spans)]
    return []


def flush_traces(timeout_millis: int = 5000) -> None:
    """Export the spans (and log records) still buffered: before a short-lived process exits."""
    if (provider := installed_provider()) is not None:
        provider.force_flush(timeout_millis)
    for logger_provider in _log_providers.values():
        logger_provider.force_flush(timeout_millis)


# --- logs -------------------------------------------------------------------------------------------


_log_providers: dict[str, Any] = {}


def _otlp_exporter(config: ObservabilityConfig, module: str, name: str, what: str) -> Any:
    """An OTLP exporter over `config`'s protocol; over gRPC (OTEL_EXPORTER_OTLP_PROTOCOL=grpc), or a one-line error
    naming the package it needs."""
    if config.otlp_protocol != "grpc":
        return getattr(import_extra(f"opentelemetry.exporter.otlp.proto.http.{module}", "otel",
                                    feature=f"OTLP {what} export"), name)()
    try:
        exporter = importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module}")
    except ImportError as exc:
        raise ValueError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs `pip install opentelemetry-exporter-otlp-proto-grpc`; "
                         "or use http/protobuf (the default)") from exc
    return getattr(exporter, name)()


def log_exporter(config: ObservabilityConfig) -> Any:
    """The log record exporter OTEL_LOGS_EXPORTER asks for (OTLP exporters read OTEL_EXPORTER_OTLP_*)."""
    if config.logs == "console":
        return import_extra("opentelemetry.sdk._logs.export", "otel", feature="log export").ConsoleLogRecordExporter()
    return _otlp_exporter(config, "_log_exporter", "OTLPLogExporter", "log")


def _logging_handler() -> Any:
    """OpenTelemetry's logging handler: opentelemetry-instrumentation-logging's when installed, else the SDK's
    (deprecated there since the instrumentation took it over, and the one the `otel` extra brings)."""
    try:
        from opentelemetry.instrumentation.logging.handler import LoggingHandler
    except ImportError:
        from opentelemetry.sdk._logs import LoggingHandler
    return LoggingHandler


def configure_log_export(config: ObservabilityConfig, exporter: Any = None) -> Any:
    """When OTEL_LOGS_EXPORTER is otlp or console (or an `exporter` is given): OpenTelemetry's `LoggingHandler`
    on the `durable_agent` logger, through temporalio's replay-safe logger provider, batching to the exporter.
    Only our loggers: the process's other logging is left as it is. When that logger has no level of its own,
    it gets `log_level` (DAGENT_LOG_LEVEL), or the INFO lines would never reach the handler. Once per exporter
    kind per process; returns the SDK logger provider (None when export is off)."""
    if config.logs == "none" and exporter is None:
        return None
    key = f"{config.logs}:{config.otlp_protocol}" if exporter is None else f"given:{id(exporter)}"
    if key in _log_providers:
        return _log_providers[key]
    import_extra("opentelemetry.sdk", "otel", feature=f"log export (OTEL_LOGS_EXPORTER={config.logs})")
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from temporalio.contrib.opentelemetry import ReplaySafeLoggerProvider

    provider = LoggerProvider(resource=Resource.create({"service.name": config.service_name}))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter or log_exporter(config)))
    handler = _logging_handler()(logger_provider=ReplaySafeLoggerProvider(provider))
    ours = logging.getLogger(LIBRARY_LOGGER)
    ours.addHandler(handler)
    if ours.level == logging.NOTSET:
        ours.setLevel(config.log_level.upper())
    _log_providers[key] = provider
    return provider


# --- metrics ----------------------------------------------------------------------------------------


_runtimes: dict[ObservabilityConfig, Runtime] = {}
_process_meter: MetricMeter = MetricMeter.noop  # for measurements outside workflows and activities (payload storage)


def metrics_runtime(config: ObservabilityConfig) -> Runtime | None:
    """A Temporal runtime exporting its metrics and the agent's (Prometheus endpoint or OTLP), or None for
    the default runtime (no metrics). One per configuration per process: a runtime owns its endpoint."""
    global _process_meter
    if config.metrics == "none":
        return None
    if config in _runtimes:
        return _runtimes[config]
    metrics: PrometheusConfig | OpenTelemetryConfig
    prometheus = config.metrics == "prometheus"
    buckets = metric_names.bucket_overrides(prometheus)
    if prometheus:
        metric_names.use_prometheus_names()  # the endpoint refuses dotted names: agent/metric_names.py
        metrics = PrometheusConfig(bind_address=config.metrics_bind, counters_total_suffix=True,
                                   durations_as_seconds=True, histogram_bucket_overrides=buckets)
    else:
        metrics = OpenTelemetryConfig(url=config.otlp_metrics_url, headers=dict(config.otlp_metrics_headers),
                                      http=config.otlp_protocol != "grpc", durations_as_seconds=True,
                                      histogram_bucket_overrides=buckets, metric_periodicity=config.metrics_interval)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=metrics, global_tags={"service_name": config.service_name},
                                                attach_service_name=False))
    _runtimes[config] = runtime
    _process_meter = runtime.metric_meter
    return runtime


def process_meter() -> MetricMeter:
    return _process_meter
