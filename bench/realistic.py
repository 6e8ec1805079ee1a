"""Where users pay: Temporal billable actions per prompt at a real model's latency, ours against the hand-rolled
loop in the same run, and what watching a prompt costs.

    .venv/bin/python -m bench.realistic            # ~0 s, 2 s and 10 s model calls, then the watchers (~12 min)
    .venv/bin/python -m bench.realistic --quick    # one prompt per latency, 10 s watches (~7 min)
    .venv/bin/python -m bench.realistic --report bench/results/realistic.json

Both sides call the real OpenAI SDK (ours: the `openai:` provider, streaming with DAGENT_STREAM_TEXT=1; the
baseline: `responses.create`) against `bench/paced_llm.py`, a fake Responses server that answers after a time to
first token with 60 tokens at 50/s. Workload: the bench's one trivial tool (`bench.echo`), K=5 tool rounds = 6
model calls and 5 tool calls per prompt (`bench.scenario`). Actions come from the dev server's own `action` metric
(started with `--metrics-port`; labels `action_type`, `namespace`), read before and after each prompt once the
server has exported them; one prompt runs at a time. Per side and latency: actions per prompt and per model round
by action type, the prompt's wall time beyond the model's own (the fake server's time serving its calls), the
time between model calls (one call's end to the next call's arrival: a round without the prompt's start and end),
history bytes, and worker and server CPU per prompt.

Sides: the hand-rolled loop (`bench/baseline.py`: one model activity and one tool activity per round, no
heartbeats), ours with its defaults, ours with `DAGENT_STREAM_TEXT=1` (streamed text published to watchers
every 0.5 s while the model streams), and ours with `DAGENT_MODEL_CALLS=local` on client and worker (each model
call a local activity in the workflow task that takes the tools' results; docs/providers.md says what it gives
up). Per side and latency the overhead's spread (least and largest prompt) and where it goes: workflow tasks per
prompt, the server-timed phases of their histories (`bench/round_phases.py`) and the activities' time beyond the
model's.

Watchers (`--watch-seconds`, default 30): with one prompt running (a 10-minute model call) and one waiting for
approval, each of these runs alone while the actions are counted, scaled to a minute, less what the two prompts
cost by themselves in the same time (measured first): `dagent watch` of each prompt (the CLI, a subprocess),
`dagent pending` (one run), the chat page's stream of each prompt (`GET /prompts/{id}/events`, what chat.js
opens: replayed over HTTP with httpx, no browser) and the inbox's (`GET /approvals/events`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.actions import HEARTBEAT, settled, since
from bench.config import BASELINE, PRODUCT, REPO, RESULTS, log
from bench.measure import cpu_seconds, history_stats
from bench.paced_llm import FakeCall, Pace, PacedLLM, function_call_outputs_after_last_user, serve_paced_llm
from bench.round_phases import phases
from bench.scenario import Scenario, next_step
from bench.sides import BaselineSide, ProductSide, Side, product_settings
from durable_agent.cli.devserver import DevServer
from durable_agent.cli.devserver.ports import free_port
from durable_agent.workers.worker import connect

ROUNDS = 5  # tool rounds per prompt: 6 model calls
LIVE_TEXT = "durable-agent+live-text"
LOCAL_MODEL = "durable-agent+local-model-calls"
LATENCIES: dict[str, Pace] = {  # 60 tokens at 50/s after the time to first token
    "~0 s": Pace(first_token_seconds=0.0, tokens=60, tokens_per_second=0),
    "2 s": Pace(first_token_seconds=0.8, tokens=60, tokens_per_second=50),
    "10 s": Pace(first_token_seconds=8.8, tokens=60, tokens_per_second=50),
}
PROMPTS = {"~0 s": 5, "2 s": 3, "10 s": 1}  # per side (the overhead is a median: its spread is printed)
API_KEY = "bench-realistic-key-0123456789"


def respond(body: dict[str, Any]) -> list[FakeCall]:
    """The scenario's model, from the request itself: one call of the request's tool per round, then text."""
    text, results = function_call_outputs_after_last_user(body)
    step = next_step(Scenario.parse(text), results)
    tools = body.get("tools") or []
    name = tools[0].get("name") if tools else "bench.echo"
    return [FakeCall(name, dict(arguments), id=f"call_{results}_{i}") for i, arguments in enumerate(step.calls)]


class RealProduct(ProductSide):
    def __init__(self, client: Client, address: str, workdir: Path, base_url: str, *, stream_text: str = "",
                 model_calls: str = "activity") -> None:
        super().__init__(client, address, workdir, {"tool": "", "model_calls": model_calls})
        self.base_url, self.stream_text = base_url, stream_text
        self.name = LIVE_TEXT if stream_text == "1" else LOCAL_MODEL if model_calls == "local" else PRODUCT

    def worker_env(self) -> dict[str, str]:
        return super().worker_env() | {"DAGENT_MODEL_NORMAL": "openai:paced-model", "OPENAI_API_KEY": "sk-bench",
                                       "OPENAI_BASE_URL": self.base_url, "DAGENT_STREAM_TEXT": self.stream_text}


class RealBaseline(BaselineSide):
    def __init__(self, client: Client, address: str, workdir: Path, base_url: str) -> None:
        super().__init__(client, address, workdir, {})
        self.base_url = base_url

    def worker_env(self) -> dict[str, str]:
        return super().worker_env() | {"BENCH_OPENAI_BASE_URL": self.base_url}


@dataclass
class Sample:
    actions: Counter[str]
    wall_s: float
    model_s: float
    history_bytes: int
    worker_cpu_s: float
    server_cpu_s: float
    workflow_tasks: int
    phases_ms: dict[str, float]  # per prompt: the sum of each server-timed phase (bench/round_phases.py)
    gaps_ms: list[float]  # each round's time between one model call's end and the next one's arrival


OVERHEAD_PHASES = ("wft_schedule_to_start", "wft_start_to_complete", "activity_schedule_to_start",
                   "activity_complete_to_wft_schedule")


async def measure_prompt(side: Side, llm: PacedLLM, metrics: str, server_pid: int) -> Sample:
    assert side.worker is not None
    before = await settled(metrics)
    worker0, server0, t0 = cpu_seconds(side.worker.pid), cpu_seconds(server_pid), time.monotonic()
    run = await side.start(Scenario(rounds=ROUNDS))
    await side.finish(run)
    wall = time.monotonic() - t0
    worker1, server1 = cpu_seconds(side.worker.pid), cpu_seconds(server_pid)
    actions = since(await settled(metrics), before)
    history = await history_stats(run.wf)
    events = list((await run.wf.fetch_history()).events)
    tasks = sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    model_s, gaps = llm.model_seconds(since=t0), llm.gaps(since=t0)
    found = {name: sum(values) for name, values in phases(events).items()}
    # what the activities spent beyond the model's own serving time (the SDK client, transcript, planning, tool);
    # model calls that ran as local activities ran inside workflow tasks: their time comes off those tasks'
    activities, model_ms = found.get("activity_start_to_complete", 0.0), model_s * 1000
    if activities >= model_ms:
        found["activity_beyond_model"] = activities - model_ms
    else:
        found["activity_beyond_model"] = activities
        found["wft_start_to_complete"] = found.get("wft_start_to_complete", 0.0) - model_ms
    return Sample(actions, wall, model_s, int(history["bytes"]), worker1 - worker0, server1 - server0, tasks, found,
                  [gap * 1000 for gap in gaps])


def summarize(samples: list[Sample]) -> dict[str, Any]:
    kinds = sorted({kind for sample in samples for kind in sample.actions})
    per_prompt = {kind: statistics.mean(s.actions[kind] for s in samples) for kind in kinds}
    total = sum(per_prompt.values())
    overheads = sorted((s.wall_s - s.model_s) * 1000 for s in samples)
    overhead = statistics.median(overheads) / 1000
    names = sorted({name for s in samples for name in s.phases_ms})
    wall = statistics.median(s.wall_s for s in samples)
    return {
        "prompts": len(samples), "actions_per_prompt": total, "actions_per_round": total / (ROUNDS + 1),
        "by_type_per_prompt": per_prompt, "heartbeats_per_prompt": per_prompt.get(HEARTBEAT, 0.0),
        "wall_s": wall, "model_s": statistics.median(s.model_s for s in samples),
        "overhead_ms": overhead * 1000, "overhead_ms_per_round": overhead * 1000 / (ROUNDS + 1),
        "between_calls_ms": statistics.median(gap for s in samples for gap in s.gaps_ms),
        "overhead_ms_samples": overheads, "overhead_ms_min": overheads[0], "overhead_ms_max": overheads[-1],
        "workflow_tasks_per_prompt": statistics.median(s.workflow_tasks for s in samples),
        "phases_ms_per_prompt": {name: statistics.median(s.phases_ms.get(name, 0.0) for s in samples)
                                 for name in names},
        "overhead_pct_of_round": 100 * overhead / wall if wall else 0.0,
        "history_bytes": statistics.median(s.history_bytes for s in samples),
        "worker_cpu_ms": 1000 * statistics.median(s.worker_cpu_s for s in samples),
        "server_cpu_ms": 1000 * statistics.median(s.server_cpu_s for s in samples),
    }


async def latencies(sides: Sequence[Side], llm: PacedLLM, metrics: str, server_pid: int,
                    prompts: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, count in prompts.items():
        pace = llm.pace = LATENCIES[label]
        samples: dict[str, list[Sample]] = {side.name: [] for side in sides}
        for rep in range(count):
            for side in (sides if rep % 2 == 0 else list(reversed(sides))):
                samples[side.name].append(await measure_prompt(side, llm, metrics, server_pid))
        out[label] = {"pace": pace.__dict__, "model_call_s": pace.seconds,
                      **{name: summarize(found) for name, found in samples.items()}}
        log(f"  {label}: " + ", ".join(f"{name} {out[label][name]['actions_per_prompt']:.1f} actions/prompt"
                                       for name in samples))
    return out


# --- watchers ----------------------------------------------------------------------------------------------


async def _count_for(metrics: str, seconds: float, work: Any = None) -> Counter[str]:
    """Actions while `work` (an async context manager, or None: nothing) runs for `seconds`."""
    before = await settled(metrics)
    async with (work if work is not None else contextlib.nullcontext()):
        await asyncio.sleep(seconds)
    return since(await settled(metrics), before)


@contextlib.asynccontextmanager
async def cli_watch(env: dict[str, str], prompt_id: str) -> AsyncIterator[None]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "durable_agent.cli", "watch", prompt_id, env=env, cwd=REPO,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)


@contextlib.asynccontextmanager
async def sse(url: str) -> AsyncIterator[None]:
    """Hold a server-sent events stream open, reading it, as chat.js / inbox.js do (no browser)."""
    async def read() -> None:
        async with httpx.AsyncClient(timeout=None) as http, \
                http.stream("GET", url, headers={"Authorization": f"Bearer {API_KEY}"}) as response:
            async for _ in response.aiter_lines():
                pass

    task = asyncio.create_task(read())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task


async def watchers(product: RealProduct, llm: PacedLLM, metrics: str, seconds: float) -> dict[str, Any]:
    from durable_agent.api import create_app
    from durable_agent.api.config import ApiConfig, ApiKey
    from durable_agent.api.server import serve_in_background

    llm.pace = Pace(first_token_seconds=0, tokens=1, tokens_per_second=0)
    waiting = await product.agent.start(Scenario(rounds=1, approve=1).text(), user_id="bench", max_rounds=2)
    await waiting.wait_until("waiting_for_approval")
    # each count gets a fresh running prompt (its model call must outlast the count, within the provider's 120 s
    # timeout), started before the count begins and terminated after it
    llm.pace = Pace(first_token_seconds=min(110.0, seconds + 60), tokens=1, tokens_per_second=50)

    async def count(work: Any, prompt: str) -> Counter[str]:
        running = await product.agent.start("bench rounds=1", user_id="bench", max_rounds=2)
        await asyncio.sleep(2)  # its model call is under way
        try:
            return await _count_for(metrics, seconds, work(running.id if prompt == "running" else waiting.id))
        finally:
            await running.workflow.terminate("bench: count over")

    per_minute = 60 / seconds
    out: dict[str, Any] = {"seconds": seconds}
    idle = await count(lambda _: None, "running")
    out["the two prompts alone"] = {k: v * per_minute for k, v in idle.items()}

    def less_idle(counts: Counter[str]) -> dict[str, float]:
        return {k: (counts[k] - idle[k]) * per_minute for k in counts if counts[k] - idle[k] > 0}

    cli_env = product.worker_env() | {"DAGENT_TASK_QUEUE": product.task_queue}
    for label in ("running", "waiting"):
        out[f"dagent watch ({label})"] = less_idle(await count(lambda pid: cli_watch(cli_env, pid), label))
    before = await settled(metrics)
    pending = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "durable_agent.cli", "pending", "--json", env=cli_env, cwd=REPO,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if await asyncio.wait_for(pending.wait(), 60) != 0:
        raise RuntimeError("dagent pending failed")
    out["dagent pending (one run)"] = dict(since(await settled(metrics), before))
    config = ApiConfig(api_keys=[ApiKey(principal="bench", key=API_KEY, roles=["admin", "approver"])])
    async with serve_in_background(create_app(product.agent, config)) as url:
        for label in ("running", "waiting"):
            out[f"chat page stream ({label})"] = less_idle(
                await count(lambda pid: sse(f"{url}/prompts/{pid}/events"), label))
        out["inbox stream"] = less_idle(await count(lambda _: sse(f"{url}/approvals/events"), "running"))
    with contextlib.suppress(Exception):
        await waiting.workflow.terminate("bench over")
    return out


# --- report ------------------------------------------------------------------------------------------------

SIDES = (BASELINE, PRODUCT, LIVE_TEXT, LOCAL_MODEL)


def render(results: dict[str, Any]) -> str:
    lines = ["Actions per prompt (K=5 tool rounds = 6 model calls), per round in brackets; heartbeats of them",
             "",
             "| model call | hand-rolled | Durable Agent (defaults) | ours / hand-rolled "
             "| ours + live text (DAGENT_STREAM_TEXT=1) | ours, model calls local (DAGENT_MODEL_CALLS=local) |",
             "|---|---|---|---|---|---|"]
    for label, row in results["latency"].items():
        base, ours = row[BASELINE], row[PRODUCT]
        extra = " | ".join(_actions(row[name]) if name in row else "-" for name in (LIVE_TEXT, LOCAL_MODEL))
        lines.append(f"| {label} ({row['model_call_s']:.1f} s) | {_actions(base)} | {_actions(ours)} | "
                     f"**{ours['actions_per_prompt'] / base['actions_per_prompt']:.2f}x** | {extra} |")
    lines += ["", "By action type, per prompt:", ""]
    for label, row in results["latency"].items():
        for name in [name for name in row if name in SIDES]:
            kinds = ", ".join(f"{kind.split('_', 1)[1]} {count:g}"
                              for kind, count in sorted(row[name]["by_type_per_prompt"].items()))
            lines.append(f"- {label}, {name}: {kinds}")
    lines += ["", "Overhead beyond the model: per prompt, its wall time less the model's (the median prompt, "
                  "per round in brackets, least and largest prompt); between model calls, the median round's time "
                  "from one model call's end to the next call's arrival (a round without the prompt's start and "
                  "end, which cost both sides the same)", "",
              "| model call | side | wall s | model s | overhead per prompt, ms (per round) [min-max] "
              "| between model calls, ms | % of round | history bytes | worker CPU ms | server CPU ms |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for label, row in results["latency"].items():
        for name in [name for name in row if name in SIDES]:
            r = row[name]
            spread = f" [{r['overhead_ms_min']:.0f}-{r['overhead_ms_max']:.0f}]" if "overhead_ms_min" in r else ""
            lines.append(f"| {label} | {name} | {r['wall_s']:.2f} | {r['model_s']:.2f} | {r['overhead_ms']:.0f} "
                         f"({r['overhead_ms_per_round']:.1f}){spread} | {_between(r)} | "
                         f"{r['overhead_pct_of_round']:.2f} | "
                         f"{r['history_bytes']:.0f} | {r['worker_cpu_ms']:.0f} | {r['server_cpu_ms']:.0f} |")
        for name in (PRODUCT, LOCAL_MODEL):
            if name in row and row[BASELINE]["overhead_ms"]:
                ratio = row[name]["overhead_ms"] / row[BASELINE]["overhead_ms"]
                base_gap = row[BASELINE].get("between_calls_ms")
                gap = f"**{row[name]['between_calls_ms'] / base_gap:.2f}x**" if base_gap else ""
                lines.append(f"| {label} | {name} / hand-rolled overhead | | | **{ratio:.2f}x** | {gap} | | | | |")
    lines += _phase_table(results["latency"])
    watch = results.get("watchers")
    if watch:
        lines += ["", f"Watchers: actions per minute (watched {watch['seconds']:.0f} s, less the prompts' own)", "",
                  "| watcher | actions / minute | by type |", "|---|---|---|"]
        for name, counts in watch.items():
            if name == "seconds":
                continue
            total = sum(counts.values())
            kinds = ", ".join(f"{k.split('_', 1)[1]} {v:.1f}" for k, v in sorted(counts.items())) or "none"
            unit = "actions" if "one run" in name else "/ minute"
            lines.append(f"| {name} | {total:.1f} {unit} | {kinds} |")
    return "\n".join(lines)


def _phase_table(latency: dict[str, Any]) -> list[str]:
    """Where each side's overhead goes, per prompt (medians): server-timed phases from its history."""
    rows = [(label, name, row[name]) for label, row in latency.items() for name in row
            if name in SIDES and "phases_ms_per_prompt" in row[name]]
    if not rows:
        return []
    columns = (*OVERHEAD_PHASES, "activity_beyond_model")
    lines = ["", "Where the overhead goes, ms per prompt (medians; server timestamps, 1 ms resolution): "
                 "workflow tasks, their phases, and the activities' time beyond the model's (model calls run as "
                 "local activities: their time is taken off the workflow tasks', where they ran)", "",
             "| model call | side | workflow tasks | " + " | ".join(columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for label, name, r in rows:
        found = r["phases_ms_per_prompt"]
        lines.append(f"| {label} | {name} | {r['workflow_tasks_per_prompt']:g} | "
                     + " | ".join(f"{found.get(column, 0.0):.0f}" for column in columns) + " |")
    return lines


def _between(row: dict[str, Any]) -> str:
    """The time between model calls, or "-" in a report from before the bench measured it."""
    return f"{row['between_calls_ms']:.1f}" if "between_calls_ms" in row else "-"


def _actions(row: dict[str, Any]) -> str:
    return (f"{row['actions_per_prompt']:.1f} ({row['actions_per_round']:.2f}); "
            f"{row['heartbeats_per_prompt']:.1f} heartbeats")


async def run(args: argparse.Namespace, watch_seconds: float, workdir: Path) -> dict[str, Any]:
    metrics_port = free_port()
    server = DevServer(log_file=workdir / "temporal.log", extra_args=["--metrics-port", str(metrics_port)])
    await server.start_async()
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    llm = PacedLLM(respond, pace=LATENCIES["~0 s"])
    sides: list[Side] = []
    try:
        async with serve_paced_llm(llm) as base_url:
            product_client = await connect(product_settings(server.address, workdir))
            baseline_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
            sides = [RealBaseline(baseline_client, server.address, workdir, base_url),
                     *[RealProduct(product_client, server.address, workdir, base_url, stream_text=stream)
                       for stream in ("", "1")],
                     RealProduct(product_client, server.address, workdir, base_url, model_calls="local")]
            for side in sides:
                side.start_worker("realistic")
            for side in sides:  # warm-up: imports, sandbox, the worker learning the tool is fast
                await asyncio.wait_for(side.run(Scenario(rounds=4)), 120)
            log(f"dev server {server.address}, metrics {metrics}, model {base_url}")
            chosen = [label.strip() for label in args.latencies.split(",")] if args.latencies else list(LATENCIES)
            prompts = {label: args.prompts or (1 if args.quick else PROMPTS[label]) for label in chosen}
            results: dict[str, Any] = {"latency": await latencies(sides, llm, metrics, server.pid or 0, prompts)}
            product = next(s for s in sides if isinstance(s, RealProduct) and s.name == PRODUCT)
            if not args.no_watchers:
                results["watchers"] = await watchers(product, llm, metrics, watch_seconds)
            return results
    finally:
        for side in sides:
            side.stop_worker()
        await server.stop_async()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.realistic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one prompt per side and latency, 10 s watches")
    parser.add_argument("--watch-seconds", type=float, help="how long each watcher is counted (default 30)")
    parser.add_argument("--latencies", help=f"comma-separated subset of {','.join(LATENCIES)}")
    parser.add_argument("--prompts", type=int, help="prompts per side and latency (default 5 / 3 / 1)")
    parser.add_argument("--no-watchers", action="store_true", help="skip the watchers' count")
    parser.add_argument("--out", type=Path, default=RESULTS / "realistic.json")
    parser.add_argument("--report", type=Path, metavar="JSON", help="only print an earlier run's table")
    args = parser.parse_args(argv)
    if args.report:
        print(render(json.loads(args.report.read_text())["results"]))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="dagent-realistic-"))
    started = time.monotonic()
    seconds = args.watch_seconds or (10.0 if args.quick else 30.0)
    results = asyncio.run(run(args, seconds, workdir))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"created_at": datetime.now(UTC).isoformat(), "quick": args.quick,
                                    "wall_seconds": time.monotonic() - started, "cpus": os.cpu_count(),
                                    "results": results}, indent=2, default=str))
    print(render(results))
    log(f"raw results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
