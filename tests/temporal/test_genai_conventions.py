"""What an OpenTelemetry collector receives from a worker, checked against the GenAI semantic conventions: the
Temporal runtime's metrics exported over OTLP/HTTP to a real receiver on loopback (names, units, kinds, bucket
boundaries, attributes), and the spans of the SDK's in-memory exporter (every GenAI attribute the call carries,
cache and reasoning tokens included, from the Anthropic SDK against the fake LLM server, which reports them).
The Temporal SDK's own spans join the trace when DAGENT_TEMPORAL_SPANS is on."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from bench.spans import SpanRecord, finished_spans, memory_exporter, of_trace, render_tree
from durable_agent.agent import metric_names
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.plugins import Plugin
from durable_agent.client import AgentClient
from durable_agent.config.observability import ObservabilityConfig, metrics_runtime, temporal_plugins
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.worker import build_runtime, create_worker
from tests.fakes import FakeLLMServer, FakeUsage
from tests.fakes.llm_server import anthropic_body
from tests.fakes.providers import make_provider
from tests.support.otlp import Metric, OtlpReceiver
from tests.support.workers import TEST_SETTINGS

USAGE = FakeUsage(input_tokens=30, output_tokens=20, cached_tokens=2000, cache_write_tokens=60, reasoning_tokens=7)
INPUT_TOKENS = 30 + 2000 + 60  # gen_ai.usage.input_tokens counts cached tokens too, as the conventions say


_receiver: OtlpReceiver | None = None


@pytest.fixture
def receiver() -> OtlpReceiver:
    """One receiver for the process: the runtime that exports to it lives as long (one per configuration)."""
    global _receiver
    if _receiver is None:
        _receiver = OtlpReceiver().__enter__()
    return _receiver


@asynccontextmanager
async def worker(env: WorkflowEnvironment, receiver: OtlpReceiver, provider: Any, *,
                 temporal_spans: bool = False) -> AsyncIterator[AgentClient]:
    """A worker on a runtime exporting metrics over OTLP to `receiver`, traced into the in-memory exporter."""
    memory_exporter()
    metric_names.use_prometheus_names(False)
    config = ObservabilityConfig(metrics="otlp", otlp_metrics_url=f"{receiver.endpoint}/v1/metrics",
                                 metrics_interval=timedelta(milliseconds=500), service_name="genai-test")
    spans = dataclasses.replace(config, temporal_spans=temporal_spans)
    client = await Client.connect(env.client.service_client.config.target_host, namespace=env.client.namespace,
                                  runtime=metrics_runtime(config),  # one runtime (and export loop) for the module
                                  plugins=[DurableAgentPlugin(TEST_SETTINGS), *temporal_plugins(spans)])
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"genai-{uuid.uuid4().hex[:10]}"})
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": provider})
    async with create_worker(client, runtime, task_queue=settings.task_queue):
        yield AgentClient(client, settings)


async def exported(receiver: OtlpReceiver, name: str, model: str, count: int) -> Metric:
    """`name` once its points for the response `model` add up to `count` measurements (the exports are
    cumulative)."""
    deadline = time.monotonic() + 20
    while True:
        metric = receiver.latest_metrics().get(name)
        points = [p for p in metric.points if p.attributes.get("gen_ai.response.model") == model] if metric else []
        if metric and sum(p.count or 1 for p in points) >= count:
            return Metric(metric.name, metric.unit, metric.kind, points)
        assert time.monotonic() < deadline, f"{name} for {model} not exported: {sorted(receiver.latest_metrics())}"
        await asyncio.sleep(0.2)


async def recorded(receiver: OtlpReceiver, name: str, attributes: dict[str, str]) -> Metric:
    """`name` once it has a point with these attributes (workflow-side metrics follow the activity's)."""
    deadline = time.monotonic() + 20
    while True:
        metric = receiver.latest_metrics().get(name)
        points = [p for p in metric.points if attributes.items() <= p.attributes.items()] if metric else []
        if metric and points:
            return Metric(metric.name, metric.unit, metric.kind, points)
        assert time.monotonic() < deadline, f"{name} {attributes} not exported: {metric}"
        await asyncio.sleep(0.2)


def the_chat(spans: list[SpanRecord]) -> SpanRecord:
    [chat] = [s for s in spans if s.name.startswith("chat ")]
    return chat


async def test_a_model_call_exports_the_genai_metrics_and_span_attributes(
        dev_env: WorkflowEnvironment, llm: FakeLLMServer, receiver: OtlpReceiver) -> None:
    model = f"claude-{uuid.uuid4().hex[:6]}"  # this test's own series on the receiver
    llm.reply_raw("anthropic", anthropic_body("Sunny.", [], USAGE, model))
    provider = make_provider(llm, "anthropic")
    async with worker(dev_env, receiver, provider) as agent:
        prompt = await agent.run("Weather?", model_settings=ModelSettings(temperature=0.3, max_output_tokens=500,
                                                                           top_p=0.9, stop=["END"]))
    assert prompt.state == "completed", prompt.error
    spans = of_trace(finished_spans(), prompt.trace_id or "")
    chat = the_chat(spans)
    assert chat.name == "chat test-model", render_tree(spans)
    for key, value in {"gen_ai.usage.cache_read.input_tokens": 2000, "gen_ai.usage.cache_creation.input_tokens": 60,
                       "gen_ai.usage.reasoning.output_tokens": 7, "gen_ai.usage.input_tokens": INPUT_TOKENS,
                       "gen_ai.request.temperature": 0.3, "gen_ai.request.max_tokens": 500,
                       "gen_ai.request.top_p": 0.9, "gen_ai.request.stop_sequences": ("END",),
                       "gen_ai.response.model": model, "gen_ai.provider.name": provider.name,
                       "gen_ai.response.id": "msg_fake", "gen_ai.operation.name": "chat",
                       "gen_ai.response.finish_reasons": ("stop",)}.items():
        assert chat.attributes.get(key) == value, (key, chat.attributes)
    [invoke] = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert invoke.name == f"invoke_agent {agent.settings.task_queue}"
    assert invoke.attributes["gen_ai.agent.name"] == agent.settings.task_queue

    usage = await exported(receiver, "gen_ai.client.token.usage", model, 2)
    assert (usage.kind, usage.unit) == ("histogram", "{token}")
    by_type = {p.attributes["gen_ai.token.type"]: p for p in usage.points}
    assert (by_type["input"].value, by_type["input"].count) == (INPUT_TOKENS, 1)
    assert (by_type["output"].value, by_type["output"].count) == (20, 1)
    for point in usage.points:
        assert point.attributes["gen_ai.operation.name"] == "chat"
        assert point.attributes["gen_ai.provider.name"] == provider.name
        assert point.attributes["gen_ai.request.model"] == "test-model"
        assert point.attributes["task_queue"] == agent.settings.task_queue and point.attributes["activity_type"]
        assert point.bounds == metric_names.BUCKETS[metric_names.TOKEN_USAGE]
    duration = await exported(receiver, "gen_ai.client.operation.duration", model, 1)
    assert (duration.kind, duration.unit) == ("histogram", "s")
    assert duration.points[0].bounds == metric_names.BUCKETS[metric_names.OPERATION_DURATION]
    assert 0 < duration.points[0].value < 10
    rounds = await recorded(receiver, "dagent.model.rounds", {"gen_ai.request.model": model})
    assert (rounds.kind, rounds.unit) == ("sum", "{round}")
    finished = await recorded(receiver, "dagent.prompt.finished", {"dagent.prompt.state": "completed"})
    assert (finished.kind, finished.unit) == ("sum", "{prompt}")
    assert not [name for name in receiver.latest_metrics() if name.startswith("dagent_")], "no old names"


async def test_a_failed_model_call_carries_error_type(dev_env: WorkflowEnvironment, llm: FakeLLMServer,
                                                      receiver: OtlpReceiver) -> None:
    llm.reply_error("anthropic", 400, message="bad request")
    async with worker(dev_env, receiver, make_provider(llm, "anthropic")) as agent:
        prompt = await agent.run("Weather?")
    assert prompt.state == "failed"
    spans = of_trace(finished_spans(), prompt.trace_id or "")
    chat = the_chat(spans)
    assert chat.attributes["error.type"] == "FatalModelError" and chat.error
    [invoke] = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert invoke.attributes["error.type"] == "_OTHER" and invoke.error
    failed = await recorded(receiver, "gen_ai.client.operation.duration", {"error.type": "FatalModelError"})
    assert failed.points[0].attributes["gen_ai.request.model"] == "test-model"


async def test_temporal_spans_join_the_trace_when_turned_on(dev_env: WorkflowEnvironment, llm: FakeLLMServer,
                                                            receiver: OtlpReceiver) -> None:
    llm.reply_raw("anthropic", anthropic_body("Sunny.", [], USAGE, "claude-x"))
    async with worker(dev_env, receiver, make_provider(llm, "anthropic"), temporal_spans=True) as agent:
        prompt = await agent.run("Weather?")
    names = {s.name for s in of_trace(finished_spans(), prompt.trace_id or "")}
    assert {"StartWorkflow:PromptWorkflow", "RunWorkflow:PromptWorkflow"} <= names, names
    assert any(name.startswith("RunActivity:") for name in names), names
