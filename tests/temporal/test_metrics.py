"""Metrics end to end: `dagent worker --metrics-port` as a subprocess on a real dev server, its Prometheus
endpoint scraped over HTTP and parsed with prometheus_client's text parser, before and after a prompt with a
tool call, an approval and a payload large enough for external storage."""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from durable_agent.cli.devserver import free_port
from durable_agent.client import AgentClient
from tests.support.processes import WorkerProcess
from tests.support.workers import TEST_SETTINGS

PAYLOAD_THRESHOLD = 2048  # the prompt's record with its history passes this: it goes to external storage

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over every series whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, series), value in samples.items() if sample == name and wanted <= series)


async def wait_for(check: Callable[[], bool], what: str, wait_s: float, diagnostics: Callable[[], str]) -> None:
    deadline = time.monotonic() + wait_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {wait_s:.0f} s\n{diagnostics()}")
        await asyncio.sleep(0.1)


def deltas(before: Samples, after: Samples, expected: Mapping[tuple[str, frozenset[tuple[str, str]]], float],
           ) -> dict[str, tuple[float, float]]:
    """Expected vs actual change of each (name, labels) pair, for the ones that differ."""
    wrong = {}
    for (name, labels), change in expected.items():
        actual = total(after, name, **dict(labels)) - total(before, name, **dict(labels))
        if actual != change:
            wrong[f"{name}{dict(labels)}"] = (change, actual)
    return wrong


def worker_env(dev_env: WorkflowEnvironment, tmp_path: Path, **variables: str) -> dict[str, str]:
    """A metrics-serving `dagent worker`'s environment: this one without OTEL_* (metrics go to the endpoint, not
    to an OTLP exporter), the test server, stores under `tmp_path`, the endpoint on loopback, then `variables`."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    return env | {"TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                  "DAGENT_PAYLOAD_DIR": str(tmp_path / "payloads"), "DAGENT_FILE_DIR": str(tmp_path / "files"),
                  "DAGENT_METRICS_HOST": "127.0.0.1"} | variables


def key(name: str, **labels: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return name, frozenset(labels.items())


async def test_prometheus_endpoint_counts_rounds_tools_approvals_tokens_and_payloads(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    port = free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    payload_dir = tmp_path / "payloads"
    env = worker_env(dev_env, tmp_path, DAGENT_TASK_QUEUE=queue, DAGENT_PLUGINS="tests.scenarios:plugin",
                     DAGENT_MODEL_NORMAL="scripted:tests.scenarios:model",
                     DAGENT_PAYLOAD_THRESHOLD=str(PAYLOAD_THRESHOLD))
    worker = WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port))

    def diagnostics() -> str:
        return f"worker log:\n{worker.log()}"

    try:
        await wait_for(worker.ready, "worker ready", 60, diagnostics)
        before = scrape(port)
        settings = TEST_SETTINGS.model_copy(update={
            "task_queue": queue, "payload_dir": str(payload_dir), "payload_threshold": PAYLOAD_THRESHOLD})
        client = await AgentClient.connect(settings.model_copy(
            update={"temporal_address": env["TEMPORAL_ADDRESS"]}))
        handle = await client.start("approval " + "x" * PAYLOAD_THRESHOLD, user_id="metrics")
        await handle.wait_until("waiting_for_approval")
        [pending] = await handle.pending_approvals()
        await handle.approve(pending.tool_call_id, by="alice")
        prompt = await handle.result()
        assert prompt.state == "completed", prompt.error
        usage = prompt.usage
        # The convention names as the Prometheus endpoint spells them (agent/metric_names.py).
        scripted = {"gen_ai_request_model": "scripted", "gen_ai_operation_name": "chat"}
        expected = {
            key("dagent_model_rounds_total", gen_ai_request_model="scripted"): 2,
            key("gen_ai_client_token_usage_sum", **scripted, gen_ai_token_type="input"): usage.input_tokens,
            key("gen_ai_client_token_usage_sum", **scripted, gen_ai_token_type="output"): usage.output_tokens,
            key("gen_ai_client_token_usage_count", **scripted, gen_ai_token_type="input"): 2,
            key("dagent_tool_calls_total", gen_ai_tool_name="demo.pay", dagent_tool_outcome="success"): 1,
            key("dagent_approval_requests_total", gen_ai_tool_name="demo.pay"): 1,
            key("dagent_approval_decisions_total", gen_ai_tool_name="demo.pay", dagent_approval_decision="approved"): 1,
            key("dagent_approval_wait_duration_seconds_count", dagent_approval_decision="approved"): 1,
            key("dagent_prompt_finished_total", dagent_prompt_state="completed"): 1,
            key("gen_ai_client_operation_duration_seconds_count", **scripted): 2,
        }
        after: Samples = {}

        def settled() -> bool:
            nonlocal after
            after = scrape(port)
            return not deltas(before, after, expected)

        await wait_for(settled, "the expected counter changes", 30,
                       lambda: f"{deltas(before, after, expected)}\n{diagnostics()}")
    finally:
        worker.kill()

    assert total(after, "dagent_approval_wait_duration_seconds_sum") - total(
        before, "dagent_approval_wait_duration_seconds_sum") > 0
    bounds = {dict(series).get("le") for (name, series) in after if name == "gen_ai_client_token_usage_bucket"}
    assert {"1", "4", "16", "67108864"} <= bounds, f"the conventions' token buckets: {sorted(bounds)}"
    assert not [name for (name, _) in after if name.startswith("dagent_model_tokens")], "the old names are gone"
    stored = total(after, "dagent_payload_stored_bytes_total") - total(before, "dagent_payload_stored_bytes_total")
    assert stored >= PAYLOAD_THRESHOLD, "the worker stored its large payloads externally and counted the bytes"
    assert total(after, "temporal_workflow_completed_total") > total(before, "temporal_workflow_completed_total"), \
        "the Temporal runtime's own metrics are on the same endpoint"
    assert total(after, "temporal_activity_execution_latency_count") - total(
        before, "temporal_activity_execution_latency_count") == 3, "two model rounds and one tool call"


async def test_a_worker_with_local_model_calls_shows_its_workflow_task_bound_on_the_endpoint(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """`dagent worker` with `DAGENT_MODEL_CALLS=local` and a cache of 8: the SDK runs at most 4 workflow tasks at
    once (`temporal_worker_task_slots_available` for the workflow worker, a figure docs/providers.md tells
    operators to watch)."""
    port = free_port()
    env = worker_env(dev_env, tmp_path, DAGENT_TASK_QUEUE=f"metrics-local-{uuid.uuid4().hex[:8]}",
                     DAGENT_MODEL_CALLS="local", DAGENT_MAX_CACHED_WORKFLOWS="8")
    worker = WorkerProcess(env, tmp_path / "worker.log", "--metrics-port", str(port))
    try:
        await wait_for(worker.ready, "worker ready", 60, lambda: f"worker log:\n{worker.log()}")
        samples = scrape(port)
    finally:
        worker.kill()
    workflow_slots = {"worker_type": "WorkflowWorker"}
    assert total(samples, "temporal_worker_task_slots_available", **workflow_slots) == 4, samples
    assert total(samples, "temporal_worker_task_slots_used", **workflow_slots) == 0
