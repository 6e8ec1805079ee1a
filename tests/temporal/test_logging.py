"""Logs through the standard library on a real dev server: a handler the test installs on the `durable_agent`
logger (as a team's logging setup would) sees one INFO line per step of a prompt with an approval, each with
the prompt, run, call and trace ids; OTLP log export, turned on, delivers the same lines to a real OTLP/HTTP
receiver on loopback; importing and running the library configures no logging of the process."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from durable_agent.agent.logging import LIBRARY_LOGGER, get_logger
from durable_agent.client import AgentClient
from durable_agent.config.observability import ObservabilityConfig, configure_log_export, flush_traces
from durable_agent.workers.plugin import DurableAgentPlugin
from tests.support.otlp import OtlpReceiver
from tests.support.processes import WorkerProcess
from tests.support.workers import TEST_SETTINGS
from tests.temporal.test_metrics import wait_for, worker_env
from tests.temporal.test_tracing import run_approval_prompt, traced_worker

STEPS = ["prompt started", "approval requested", "approval decided", "prompt finished"]


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured(level: int = logging.INFO) -> Iterator[Captured]:
    ours = logging.getLogger(LIBRARY_LOGGER)
    handler, previous = Captured(), ours.level
    ours.addHandler(handler)
    ours.setLevel(level)
    try:
        yield handler
    finally:
        ours.removeHandler(handler)
        ours.setLevel(previous)


def lifecycle(records: list[logging.LogRecord], prompt_id: str) -> list[logging.LogRecord]:
    return [r for r in records if r.name == "durable_agent.prompt" and getattr(r, "prompt_id", None) == prompt_id]


async def test_a_stdlib_handler_sees_every_step_of_a_prompt_with_ids_and_trace_id(
        dev_env: WorkflowEnvironment) -> None:
    with captured() as handler:
        async with traced_worker(dev_env) as agent:
            prompt_id, trace_id = await run_approval_prompt(agent, "approval for the log")
            handle = agent.prompt(prompt_id)
            run_id = (await handle.workflow.describe()).run_id
    steps = lifecycle(handler.records, prompt_id)
    assert [r.event for r in steps] == STEPS, [r.getMessage() for r in handler.records]  # type: ignore[attr-defined]
    for record in steps:
        assert record.levelno == logging.INFO
        assert record.run_id == run_id  # type: ignore[attr-defined]
        assert record.trace_id == trace_id, record.getMessage()  # type: ignore[attr-defined]
        assert f"prompt_id={prompt_id}" in record.getMessage(), "a plain %(message)s formatter shows the ids"
    requested, decided = steps[1], steps[2]
    assert requested.call_id == decided.call_id and requested.call_id  # type: ignore[attr-defined]
    assert requested.tool == "demo.pay"  # type: ignore[attr-defined]
    assert (decided.decision, decided.decided_by) == ("approved", "alice")  # type: ignore[attr-defined]
    assert steps[-1].state == "completed"  # type: ignore[attr-defined]
    every_text = " ".join(r.getMessage() for r in handler.records)
    assert "approval for the log" not in every_text, "no prompt text in the log lines"

    with captured() as replaying:  # a new worker replaying the whole history writes no step again
        await Replayer(workflows=[], plugins=[DurableAgentPlugin(TEST_SETTINGS)]).replay_workflow(
            await handle.workflow.fetch_history())
    assert not lifecycle(replaying.records, prompt_id), [r.getMessage() for r in replaying.records]


async def test_otlp_log_export_delivers_the_steps_to_a_receiver(dev_env: WorkflowEnvironment) -> None:
    ours = logging.getLogger(LIBRARY_LOGGER)
    previous = ours.level
    with OtlpReceiver() as receiver:
        config = ObservabilityConfig(logs="otlp", service_name="logs-test")
        provider = configure_log_export(config, exporter=OTLPLogExporter(endpoint=f"{receiver.endpoint}/v1/logs"))
        try:
            assert ours.level == logging.INFO, "export on: our loggers get DAGENT_LOG_LEVEL when unset"
            async with traced_worker(dev_env) as agent:
                prompt_id, trace_id = await run_approval_prompt(agent, "approval exported")
            flush_traces()
            deadline = time.monotonic() + 10
            while len(mine := [r for r in receiver.log_records()
                               if r.attributes.get("prompt_id") == prompt_id]) < len(STEPS):
                assert time.monotonic() < deadline, receiver.log_records()
                await asyncio.sleep(0.1)
        finally:
            for handler in [h for h in ours.handlers if type(h).__name__ == "LoggingHandler"]:
                ours.removeHandler(handler)
            ours.setLevel(previous)
            provider.shutdown()
    steps = [r for r in mine if r.attributes.get("event") in STEPS]
    assert [r.attributes["event"] for r in steps] == STEPS
    assert all(r.severity == "INFO" and r.service_name == "logs-test" for r in steps)
    assert {r.trace_id for r in steps} == {trace_id}, "the record's trace context is the prompt's trace"
    assert {r.attributes["trace_id"] for r in steps} == {trace_id}
    assert steps[1].attributes["call_id"] == steps[2].attributes["call_id"]
    assert "approval exported" not in str([r.body for r in mine])


async def test_dagent_worker_writes_json_lines_and_exports_them_over_otlp(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """Our CLI end to end: `dagent worker` (stderr not a terminal) writes each step as a JSON line on stderr and,
    with OTEL_LOGS_EXPORTER=otlp, sends the same records to the collector, with the prompt's trace id."""
    with OtlpReceiver() as receiver:
        env = worker_env(dev_env, tmp_path, DAGENT_TASK_QUEUE=f"logs-{uuid.uuid4().hex[:8]}",
                         DAGENT_PLUGINS="tests.scenarios:plugin", DAGENT_MODEL_NORMAL="scripted:tests.scenarios:model",
                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_LOGS_EXPORTER="otlp",
                         OTEL_METRICS_EXPORTER="none", OTEL_BLRP_SCHEDULE_DELAY="100", OTEL_SERVICE_NAME="cli-logs")
        worker = WorkerProcess(env, tmp_path / "worker.log")
        try:
            await wait_for(worker.ready, "worker ready", 60, worker.log)
            settings = TEST_SETTINGS.model_copy(update={"task_queue": env["DAGENT_TASK_QUEUE"],
                                                        "temporal_address": env["TEMPORAL_ADDRESS"],
                                                        "payload_dir": env["DAGENT_PAYLOAD_DIR"]})
            handle = await (await AgentClient.connect(settings)).start("approval from the cli", user_id="logs")
            await handle.wait_until("waiting_for_approval")
            [pending] = await handle.pending_approvals()
            await handle.approve(pending.tool_call_id, by="alice")
            prompt = await handle.result()

            def exported() -> bool:
                return {"prompt finished"} <= {r.attributes.get("event") for r in receiver.log_records()
                                               if r.attributes.get("prompt_id") == prompt.id}

            await wait_for(exported, "the steps at the receiver", 20, lambda: str(receiver.log_records()))
        finally:
            worker.kill()
    exported_steps = [r for r in receiver.log_records() if r.attributes.get("prompt_id") == prompt.id]
    assert [r.attributes["event"] for r in exported_steps] == STEPS
    assert {r.trace_id for r in exported_steps} == {prompt.trace_id} and prompt.trace_id
    assert {r.service_name for r in exported_steps} == {"cli-logs"}
    lines = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines() if line.startswith("{")]
    written = [line for line in lines
               if line.get("prompt_id") == prompt.id and line["logger"] == "durable_agent.prompt"]
    assert [line["event"] for line in written] == STEPS
    assert all(line["level"] == "info" and line["trace_id"] == prompt.trace_id and line["run_id"]
               for line in written)
    assert written[1]["call_id"] == pending.tool_call_id and written[3]["state"] == "completed"
    assert "approval from the cli" not in (tmp_path / "worker.log").read_text()


def test_the_library_configures_no_logging_of_the_process() -> None:
    """Importing the library and logging through it adds no handler anywhere and sets no level: a process
    without logging setup sees our warnings through Python's last-resort handler, and nothing else."""
    import durable_agent.workers.plugin  # noqa: F401  (the worker's modules, as a team's worker imports them)

    root = logging.getLogger()
    assert not [h for h in root.handlers if type(h).__module__.startswith("durable_agent")]
    assert logging.getLogger(LIBRARY_LOGGER).handlers == []
    with captured(logging.WARNING) as handler:
        get_logger("dagent.mcp").warning("mcp server left out", server="files")
        get_logger("dagent.mcp").info("not at warning")
    [record] = handler.records
    assert record.name == "durable_agent.mcp"
    assert record.getMessage() == "mcp server left out server=files"
    assert record.server == "files"  # type: ignore[attr-defined]
