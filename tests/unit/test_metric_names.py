"""The metric names: the GenAI ones are the conventions' (as `opentelemetry-semantic-conventions` spells them,
names, units and attribute keys), our own are dotted under `dagent.`, and a Prometheus process spells each as
OpenTelemetry's Prometheus compatibility does (the Temporal runtime's endpoint refuses dots)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from opentelemetry.metrics import Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes

from durable_agent.agent import metric_names


@pytest.fixture
def prometheus() -> Iterator[None]:
    metric_names.use_prometheus_names()
    try:
        yield
    finally:
        metric_names.use_prometheus_names(False)


def test_the_genai_metrics_are_the_conventions() -> None:
    meter = MeterProvider().get_meter("test")  # the SDK's instruments keep their name and unit
    for ours, create in ((metric_names.TOKEN_USAGE, gen_ai_metrics.create_gen_ai_client_token_usage),
                         (metric_names.OPERATION_DURATION, gen_ai_metrics.create_gen_ai_client_operation_duration)):
        theirs = create(meter)
        assert (ours.name, ours.unit) == (theirs.name, theirs.unit)
        assert ours.kind == "histogram" and isinstance(theirs, Histogram)
    assert (metric_names.OPERATION_NAME, metric_names.PROVIDER_NAME, metric_names.REQUEST_MODEL,
            metric_names.RESPONSE_MODEL, metric_names.TOKEN_TYPE, metric_names.TOOL_NAME, metric_names.ERROR_TYPE) == (
        gen_ai.GEN_AI_OPERATION_NAME, gen_ai.GEN_AI_PROVIDER_NAME, gen_ai.GEN_AI_REQUEST_MODEL,
        gen_ai.GEN_AI_RESPONSE_MODEL, gen_ai.GEN_AI_TOKEN_TYPE, gen_ai.GEN_AI_TOOL_NAME, error_attributes.ERROR_TYPE)
    assert {v.value for v in gen_ai.GenAiTokenTypeValues} == {"input", "output"}
    assert set(metric_names.PROVIDER_NAMES.values()) <= {v.value for v in gen_ai.GenAiProviderNameValues}
    assert metric_names.provider_name("anthropic-bedrock") == "aws.bedrock"
    assert metric_names.provider_name("scripted") == "scripted", "no well-known value: the adapter's own name"


def test_our_own_instruments_are_dotted_and_say_what_they_replace() -> None:
    own = [i for i in metric_names.INSTRUMENTS if not i.name.startswith("gen_ai.")]
    assert own and all(re.fullmatch(r"dagent(\.[a-z_]+)+", i.name) for i in own)
    assert all(i.replaces.startswith("dagent_") for i in metric_names.INSTRUMENTS)
    assert len({i.name for i in metric_names.INSTRUMENTS}) == len(metric_names.INSTRUMENTS)


def test_otlp_names_and_attributes_are_as_written() -> None:
    assert metric_names.name_of(metric_names.OPERATION_DURATION) == "gen_ai.client.operation.duration"
    assert metric_names.attributes({"gen_ai.token.type": "input"}) == {"gen_ai.token.type": "input"}
    assert metric_names.bucket_overrides(prometheus=False)["gen_ai.client.token.usage"][:3] == [1, 4, 16]


@pytest.mark.usefixtures("prometheus")
def test_a_prometheus_process_spells_them_as_opentelemetry_does() -> None:
    assert metric_names.name_of(metric_names.TOKEN_USAGE) == "gen_ai_client_token_usage"  # {token}: no suffix
    assert metric_names.name_of(metric_names.OPERATION_DURATION) == "gen_ai_client_operation_duration_seconds"
    assert metric_names.name_of(metric_names.APPROVAL_WAIT) == "dagent_approval_wait_duration_seconds"
    assert metric_names.name_of(metric_names.TOOL_CALLS) == "dagent_tool_calls"  # the runtime adds _total
    assert metric_names.attributes({"gen_ai.token.type": "input"}) == {"gen_ai_token_type": "input"}
    assert set(metric_names.bucket_overrides(prometheus=True)) == {
        "gen_ai_client_token_usage", "gen_ai_client_operation_duration_seconds"}
