"""Which exporters the OTEL_* variables and the metrics port select (Settings.observability())."""

from __future__ import annotations

from datetime import timedelta

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from durable_agent.config.observability import ObservabilityConfig, span_exporter
from durable_agent.workers.settings import Settings


def test_nothing_is_exported_by_default() -> None:
    config = Settings.from_env({}).observability()
    assert (config.traces, config.metrics, config.tracing) == ("none", "none", False)
    assert span_exporter(config) is None


def test_an_otlp_endpoint_turns_on_traces_and_metrics_over_otlp() -> None:
    config = Settings.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                                "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k1,tenant=t"}).observability()
    assert (config.traces, config.metrics) == ("otlp", "otlp")
    assert config.otlp_metrics_url == "http://collector:4318/v1/metrics"
    assert dict(config.otlp_metrics_headers) == {"api-key": "k1", "tenant": "t"}
    assert isinstance(span_exporter(config), OTLPSpanExporter)
    grpc = ObservabilityConfig.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
                                         "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.otlp_metrics_url == "http://collector:4317"


def test_a_metrics_port_means_prometheus_and_the_standard_selectors_override() -> None:
    settings = Settings.from_env({"DAGENT_METRICS_PORT": "9464", "DAGENT_METRICS_HOST": "127.0.0.1",
                                  "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "agents-eu"})
    config = settings.observability()
    assert (config.traces, config.metrics, config.metrics_bind) == ("console", "prometheus", "127.0.0.1:9464")
    assert config.service_name == "agents-eu"
    assert isinstance(span_exporter(config), ConsoleSpanExporter)
    off = ObservabilityConfig.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none",
                                        "OTEL_METRICS_EXPORTER": "none"}, metrics_port=9464)
    assert (off.traces, off.metrics) == ("none", "none")


def test_log_export_is_off_unless_asked_for_and_settings_carry_level_and_temporal_spans() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert Settings.from_env(endpoint).observability().logs == "none", "an endpoint alone exports no logs"
    config = Settings.from_env(endpoint | {"OTEL_LOGS_EXPORTER": "OTLP", "DAGENT_LOG_LEVEL": "DEBUG",
                                           "DAGENT_TEMPORAL_SPANS": "true",
                                           "OTEL_METRIC_EXPORT_INTERVAL": "1500"}).observability()
    assert (config.logs, config.log_level, config.temporal_spans) == ("otlp", "DEBUG", True)
    assert config.metrics_interval == timedelta(milliseconds=1500)
    assert Settings.from_env({}).observability().temporal_spans is False


@pytest.mark.parametrize("env", [{"OTEL_TRACES_EXPORTER": "zipkin"}, {"OTEL_METRICS_EXPORTER": "statsd"},
                                 {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, {"OTEL_LOGS_EXPORTER": "syslog"},
                                 {"OTEL_METRIC_EXPORT_INTERVAL": "5s"}])
def test_unsupported_choices_fail_clearly(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ObservabilityConfig.from_env(env)


def test_a_metrics_port_does_not_hide_an_unsupported_metrics_exporter() -> None:
    with pytest.raises(ValueError, match="OTEL_METRICS_EXPORTER must be none, otlp or prometheus, not 'statsd'"):
        ObservabilityConfig.from_env({"OTEL_METRICS_EXPORTER": "statsd"}, metrics_port=9464)


def test_grpc_export_without_its_package_names_the_package_for_spans_and_logs() -> None:
    from durable_agent.config.observability import log_exporter, span_exporter

    config = ObservabilityConfig.from_env({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp",
                                           "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    for exporter in (span_exporter, log_exporter):  # the grpc exporter is not among the test dependencies
        with pytest.raises(ValueError, match="pip install opentelemetry-exporter-otlp-proto-grpc"):
            exporter(config)
