"""Where a tool round's time goes, from the histories' own timestamps, this project against the baseline.

    .venv/bin/python -m bench.round_phases                   # --tool regular, 20 rounds, 3 prompts per side
    .venv/bin/python -m bench.round_phases --tool default --rounds 50

Starts a dev server and one worker per side (as ``bench.run`` does: this project with its defaults, with the
sandbox off, and the baseline), runs prompts of N tool rounds one at a
time, and splits every round of their histories into the server-side phases (medians over all rounds):

* ``wft_schedule_to_start`` - workflow task scheduled -> picked up by the worker (dispatch, sticky queue);
* ``wft_start_to_complete`` - the worker's activation: workflow code, payload conversion, the reply;
* ``activity_schedule_to_start`` - activity scheduled -> started (eager dispatch: in the reply);
* ``activity_start_to_complete`` - the activity itself (the scripted model or the trivial tool);
* ``activity_complete_to_wft_schedule`` - the server scheduling the next workflow task.

Also the events and workflow tasks per round. Timestamps are the server's; a phase of 0 is below its 1 ms
resolution.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections import defaultdict
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.measure import start_workers
from bench.scenario import Scenario
from bench.scratch import remove_scratch, scratch_server
from bench.sides import BaselineSide, ProductSide, Side, product_settings
from durable_agent.workers.worker import connect

E = EventType


def phases(events: list[Any]) -> dict[str, list[float]]:
    """Milliseconds of each phase, one sample per occurrence in this history."""
    out: dict[str, list[float]] = defaultdict(list)
    at = {e.event_id: e.event_time.ToDatetime() for e in events}
    last_activity_completed = None
    for e in events:
        t = at[e.event_id]
        if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED and last_activity_completed is not None:
            out["activity_complete_to_wft_schedule"].append((t - last_activity_completed).total_seconds() * 1000)
            last_activity_completed = None
        elif e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = at[e.activity_task_started_event_attributes.scheduled_event_id]
            out["activity_schedule_to_start"].append((t - scheduled).total_seconds() * 1000)
        elif e.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            started = at[e.activity_task_completed_event_attributes.started_event_id]
            out["activity_start_to_complete"].append((t - started).total_seconds() * 1000)
            last_activity_completed = t
        elif e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            attrs = e.workflow_task_completed_event_attributes
            out["wft_start_to_complete"].append((t - at[attrs.started_event_id]).total_seconds() * 1000)
            out["wft_schedule_to_start"].append((at[attrs.started_event_id] - at[attrs.scheduled_event_id])
                                                .total_seconds() * 1000)
    return out


async def measure(side: Side, rounds: int, prompts: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = defaultdict(list)
    events = tasks = 0
    for _ in range(prompts):
        run = await side.start(Scenario(rounds=rounds))
        await side.finish(run)
        history = (await run.wf.fetch_history()).events
        for name, values in phases(list(history)).items():
            samples[name] += values
        events += len(history)
        tasks += sum(1 for e in history if e.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    return {"median_ms": {k: statistics.median(v) for k, v in samples.items()},
            "sum_per_round_ms": {k: sum(v) / (rounds * prompts) for k, v in samples.items()},
            "events_per_round": events / (rounds * prompts), "workflow_tasks_per_round": tasks / (rounds * prompts)}


async def main_async(rounds: int, prompts: int, tool: str) -> dict[str, Any]:
    server, workdir = scratch_server("phases")
    await server.start_async()
    sides: list[Side] = []
    try:
        options = {"tool": "" if tool == "default" else tool}
        product_client = await connect(product_settings(server.address, workdir))
        baseline_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        sides = [ProductSide(product_client, server.address, workdir, options),
                 ProductSide(product_client, server.address, workdir, options, sandbox="off"),
                 BaselineSide(baseline_client, server.address, workdir, options)]
        await start_workers(sides, "phases")
        return {side.name: await measure(side, rounds, prompts) for side in sides}
    finally:
        for side in sides:
            side.stop_worker()
        await server.stop_async()
        remove_scratch("phases", workdir)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.round_phases", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--tool", choices=["default", "local", "regular"], default="regular")
    args = parser.parse_args()
    results = asyncio.run(main_async(args.rounds, args.prompts, args.tool))
    names = sorted({k for r in results.values() for k in r["median_ms"]})
    print(f"{'phase (ms)':38} " + "  ".join(f"{side:>28}" for side in results))
    for name in names:
        print(f"{name:38} " + "  ".join(
            f"{r['median_ms'].get(name, 0):>8.1f} med {r['sum_per_round_ms'].get(name, 0):>8.1f}/round"
            for r in results.values()))
    for key in ("events_per_round", "workflow_tasks_per_round"):
        print(f"{key:38} " + "  ".join(f"{r[key]:>28.2f}" for r in results.values()))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
