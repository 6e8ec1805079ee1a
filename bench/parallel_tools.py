"""Parallel tool calls: rounds whose model response asks for 3 tools that each take 200 ms.

    .venv/bin/python -m bench.parallel_tools [--rounds 5] [--repeats 3] [--calls 3] [--ms 200]

One dev server, and in this process a Durable Agent worker and the hand-rolled baseline worker
(`bench/baseline.py`, which runs a response's calls one after another), the same scripted model and tool
(`bench/scenario.py`). Per round, the tool phase is read from the workflow history (server timestamps): from
the first tool activity scheduled to the last one closed. Printed: median per side, its ratio to one tool's
time (target <= 1.2x for Durable Agent), and the ratio between the two sides.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from bench import plugin as bench_plugin
from bench.baseline import WORKFLOW_NAME, BaselineInput, BaselineWorkflow, model_activity, tool_activity
from bench.scenario import Scenario
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, connect, create_worker

TOOL_ACTIVITIES = {"dagent.invoke_tool", "baseline.tool"}
CLOSED = {EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
          EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED}


def tool_phases(history: WorkflowHistory) -> list[float]:
    """Seconds from the first tool activity scheduled to the last one closed, per model round."""
    phases: list[float] = []
    start: float | None = None
    end: float | None = None
    tools: set[int] = set()
    for event in history.events:
        at = event.event_time.ToDatetime().timestamp()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name in TOOL_ACTIVITIES:
                tools.add(event.event_id)
                start = at if start is None else start
            elif start is not None and end is not None:  # the next model round: close this phase
                phases.append(end - start)
                start = end = None
        elif event.event_type in CLOSED:
            attrs = next(getattr(event, f) for f in ("activity_task_completed_event_attributes",
                                                     "activity_task_failed_event_attributes",
                                                     "activity_task_timed_out_event_attributes",
                                                     "activity_task_canceled_event_attributes")
                         if event.HasField(f))
            if attrs.scheduled_event_id in tools:
                end = at
    if start is not None and end is not None:
        phases.append(end - start)
    return phases


async def run_product(agent: AgentClient, scenario: Scenario) -> tuple[list[float], float]:
    began = time.perf_counter()
    handle = await agent.start(scenario.text(), max_rounds=scenario.rounds + 1)
    prompt = await handle.result()
    wall = time.perf_counter() - began
    assert prompt.state == "completed", prompt.error
    return tool_phases(await handle.workflow.fetch_history()), wall


async def run_baseline(client: Client, queue: str, scenario: Scenario) -> tuple[list[float], float]:
    began = time.perf_counter()
    handle = await client.start_workflow(WORKFLOW_NAME, BaselineInput(input=scenario.text(),
                                                                      max_rounds=scenario.rounds + 1),
                                         id=f"baseline-{uuid.uuid4().hex[:10]}", task_queue=queue)
    await handle.result()
    wall = time.perf_counter() - began
    return tool_phases(await handle.fetch_history()), wall


async def main(args: argparse.Namespace) -> dict[str, Any]:
    scenario = Scenario(rounds=args.rounds, calls=args.calls, ms=args.ms)
    workdir = Path(tempfile.mkdtemp(prefix="dagent-bench-parallel-"))
    async with DevServer(db_file=None, ui_port=None) as server:
        settings = Settings(temporal_address=server.address, task_queue=f"bench-par-{uuid.uuid4().hex[:6]}",
                            file_dir=str(workdir / "files"), payload_dir=str(workdir / "payloads"))
        client = await connect(settings)
        runtime = build_runtime(settings, plugins=[bench_plugin.plugin],
                                providers={"normal": bench_plugin.model, "high": bench_plugin.model})
        baseline_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        baseline_queue = f"bench-base-{uuid.uuid4().hex[:6]}"
        agent = AgentClient(client, settings)
        results: dict[str, dict[str, list[float]]] = {"durable-agent": {"phases": [], "walls": []},
                                                      "baseline": {"phases": [], "walls": []}}
        async with create_worker(client, runtime, task_queue=settings.task_queue), \
                Worker(baseline_client, task_queue=baseline_queue, workflows=[BaselineWorkflow],
                       activities=[model_activity, tool_activity]):
            await run_product(agent, Scenario(rounds=1))  # warm-up, both sides
            await run_baseline(baseline_client, baseline_queue, Scenario(rounds=1))
            for _ in range(args.repeats):
                for side, run in (("durable-agent", lambda: run_product(agent, scenario)),
                                  ("baseline", lambda: run_baseline(baseline_client, baseline_queue, scenario))):
                    phases, wall = await run()
                    assert len(phases) == scenario.rounds, (side, phases)
                    results[side]["phases"].extend(phases)
                    results[side]["walls"].append(wall / (scenario.rounds + 1))
    return {"scenario": scenario.text(), "tool_ms": args.ms, "results": results}


def report(data: dict[str, Any]) -> str:
    one_tool = data["tool_ms"] / 1000
    medians = {side: statistics.median(r["phases"]) for side, r in data["results"].items()}
    lines = [f"parallel tool calls: {data['scenario']} (one tool takes {data['tool_ms']} ms)",
             f"{'side':<15}{'tool phase per round (median)':>32}{'x one tool':>12}{'wall per model round':>24}"]
    for side, r in data["results"].items():
        lines.append(f"{side:<15}{medians[side] * 1000:>29.0f} ms{medians[side] / one_tool:>11.2f}x"
                     f"{statistics.median(r['walls']) * 1000:>21.0f} ms")
    target = medians["durable-agent"] / one_tool
    lines.append(f"durable-agent vs baseline: {medians['durable-agent'] / medians['baseline']:.2f}x the time; "
                 f"target <= 1.2x one tool: {'PASS' if target <= 1.2 else 'FAIL'} ({target:.2f}x)")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.parallel_tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--ms", type=int, default=200)
    print(report(asyncio.run(main(parser.parse_args()))))
    sys.stdout.flush()
    os._exit(0)  # temporalio/sdk-python#300: avoid a crash at interpreter exit
