"""One trace per prompt across a worker crash: a prompt with a tool, an approval and a worker SIGKILLed in the
middle of a round (while a tool runs).

Worker 1 is a `python -m cli worker` subprocess exporting its spans over OTLP/HTTP to a real receiver on
loopback (bench/otlp_receiver.py, protobuf decoded with opentelemetry-proto). Worker 2 runs in this
process, with the client, on temporalio's replay-safe tracer provider and the OTel SDK's in-memory exporter.
Worker 2 replays the history worker 1 wrote: spans that ended before the crash must not be exported again.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from bench.otlp_receiver import OtlpReceiver
from bench.spans import assert_no_duplicates, finished_spans, render_tree
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from tests.support import traced
from tests.support.processes import WorkerProcess
from tests.support.workers import TEST_SETTINGS
from tests.temporal.test_tracing import traced_client

TEST_PAYLOAD_DIR = str(Path(TEST_SETTINGS.payload_dir).absolute())


async def _until(check: object, what: str, wait_s: float, diagnostics: object) -> None:
    deadline = time.monotonic() + wait_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not seen within {wait_s:.0f} s\n{diagnostics()}")  # type: ignore[operator]
        await asyncio.sleep(0.05)


async def test_one_trace_without_duplicates_across_a_worker_killed_mid_round(
        dev_env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(traced.MARKER_ENV, str(tmp_path))
    queue = f"traced-{uuid.uuid4().hex[:8]}"
    with OtlpReceiver() as receiver:
        env = dict(os.environ)
        env.update({
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "DAGENT_TASK_QUEUE": queue, "DAGENT_PLUGINS": "tests.support.traced:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:tests.support.traced:model",
            "DAGENT_PAYLOAD_DIR": TEST_PAYLOAD_DIR, "DAGENT_FILE_DIR": str(tmp_path / "files"),
            "DAGENT_WORKFLOW_SANDBOX": "strict",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_SERVICE_NAME": "dagent-test-worker",
        })
        worker1 = WorkerProcess(env, tmp_path / "worker1.log")

        def diagnostics() -> str:
            names = sorted(s.name for s in receiver.received())
            return f"received: {names}\nworker 1 log:\n{worker1.log()}"

        try:
            await _until(worker1.ready, "worker 1 ready", 60, diagnostics)
            client = await traced_client(dev_env)
            settings = TEST_SETTINGS.model_copy(update={"task_queue": queue})
            agent = AgentClient(client, settings)
            handle = await agent.start("pay the deposit for Paris", user_id="tracer")
            await handle.wait_until("waiting_for_approval")
            [pending] = await handle.pending_approvals()
            await handle.approve(pending.tool_call_id, by="alice")
            marker = tmp_path / traced.PAY_STARTED
            await _until(marker.exists, "traced.pay running on worker 1", 60, diagnostics)
            # Everything that ended on worker 1 has reached the receiver before the kill (batch delay 50 ms).
            await _until(lambda: {"dagent.approval", "execute_tool traced.lookup"} <= {
                s.name for s in receiver.received()}, "worker 1's finished spans", 30, diagnostics)
        finally:
            worker1.kill()
        assert marker.read_text() == str(worker1.pid)

        runtime = build_runtime(settings, plugins=[traced.plugin],
                                providers={"normal": traced.model, "high": traced.model})
        async with create_worker(client, runtime, task_queue=queue):
            prompt = await asyncio.wait_for(handle.result(), 90)
        assert prompt.state == "completed", prompt.error
        remote = receiver.received()
        assert receiver.service_names == {"dagent-test-worker"}

    local = [s for s in finished_spans() if s.trace_id == prompt.trace_id]
    spans = [s for s in remote + local if s.trace_id == prompt.trace_id]
    tree = render_tree(spans)
    mine = [s for s in remote + local if s.attributes.get("dagent.prompt.id") == prompt.id]
    assert {s.trace_id for s in mine} == {prompt.trace_id}, "one trace for the whole prompt"
    assert_no_duplicates(spans)
    assert Counter(s.name.split(" ")[0] if s.name.startswith("invoke_agent ") else s.name for s in spans) == Counter({
        "dagent.prompt.start": 1, "invoke_agent": 1, "dagent.round": 2, "chat scripted": 2,
        "dagent.tool_call": 2, "dagent.approval": 1, "execute_tool traced.lookup": 1,
        # the first attempt died with worker 1 (a killed process exports nothing more); the retry is here
        "execute_tool traced.pay": 1,
    }), tree
    ids = {s.span_id for s in spans}
    orphans = [s.name for s in spans if s.parent_id is not None and s.parent_id not in ids]
    assert not orphans, f"spans whose parent was never exported: {orphans}\n{tree}"
    by_name = {s.name: s for s in spans}
    pay = by_name["execute_tool traced.pay"]
    assert pay.attributes["dagent.attempt"] >= 2 and pay.attributes["dagent.tool.outcome"] == "success"
    assert {s.name for s in remote if s.trace_id == prompt.trace_id} >= {
        "dagent.approval", "execute_tool traced.lookup", "chat scripted"}, "worker 1's spans came over OTLP"
    assert by_name["dagent.approval"].attributes["dagent.approval.decided_by"] == "alice"
    texts = [v for s in spans for v in s.attributes.values() if isinstance(v, str)]
    assert not any("deposit for Paris" in t for t in texts), "no prompt text in span attributes by default"
