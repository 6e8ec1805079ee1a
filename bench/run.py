"""Benchmark Durable Agent against a minimal hand-rolled Temporal agent loop, in one run.

    .venv/bin/python -m bench.run                      # full run
    .venv/bin/python -m bench.run --quick              # smoke run (~1-1.5 min)
    .venv/bin/python -m bench.run --sections latency,history

Starts its own headless dev server (``DevServer``: the flags of ``dagent server``, i.e. search attributes,
dynamic config and a SQLite ``--db-filename``; the file lives in /dev/shm unless ``--db-dir`` says
otherwise), runs every worker in its own subprocess (the project's: ``python -m cli worker`` with
``bench.plugin``; the baseline's: ``python -m bench.baseline``) so its RSS can be read from
``/proc/<pid>/status``, measures both sides with the same scripted model logic (``bench.scenario``), prints
a table and writes the raw numbers to ``bench/results/latest.json``.

Sections (``--sections``):

* ``latency`` - client ``start_workflow`` -> result for 1, 5, 20, 100 tool rounds (median of 5, sides
  interleaved); per-round overhead = least-squares slope of the medians over the round counts.
* ``throughput`` - 100 prompts of 3 tool rounds started at once on one worker; prompts/s = 100 / (first
  start -> last result); median of 2 bursts per side, interleaved.
* ``history`` - events and bytes of one prompt of 5, 20, 100 rounds (16-byte tool outputs) and of 50 rounds
  with 10 KB outputs. Bytes = sum of ``HistoryEvent.ByteSize()`` over ``fetch_history()``; payloads the
  project's data converter keeps outside history (external storage) are reported next to it.
* ``approval`` - ``approve`` signal sent -> first ``get_prompt`` (baseline: ``get_state``) query that shows
  the tool's result, median of 20; compared with one baseline round (the latency slope).
* ``waiting`` - a fresh worker's RSS (VmRSS) when idle (after a warm-up) and when 2,000 prompts wait for
  approval (started in bursts of 50, each once the previous burst waits; counted through the
  ``PromptState`` search attribute). One side at a time.
* ``long`` - one prompt of 1,000 rounds with 10 KB outputs, terminated if still running after 200 s:
  completed or not, time, rounds done, history size (the baseline hits the 50 MB history limit).
* ``conversation`` - this project only (the baseline has no conversations): a conversation of 500 one-round
  turns; its total history + payload-store bytes, and per-turn latency at turn 10 vs turn 500
  (``bench/conversation.py``).

``latency``, ``throughput``, ``waiting`` and ``long`` start fresh worker subprocesses (on new task queues);
``history`` and ``approval`` carry on with the latency section's workers (quick mode: ``throughput`` too).
Each section reports its workers' peak RSS (VmHWM) at its end.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import temporalio
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode

from agent.models import ToolOutput, ToolPending, ToolSuccess
from bench.baseline import WORKFLOW_NAME as BASELINE_WORKFLOW
from bench.baseline import BaselineInput, BaselineState, Message
from bench.conversation import measure_conversation
from bench.scenario import Scenario
from client import AgentClient, PromptHandle
from workers.devserver import DevServer
from workers.settings import Settings
from workers.worker import connect

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
SECTIONS = ("latency", "history", "approval", "throughput", "waiting", "long", "conversation")
PRODUCT, BASELINE = "durable-agent", "baseline"
SMALL = 16  # bytes of tool output in the "small" scenarios
T = TypeVar("T")


# --------------------------------------------------------------------------------------------------
# configuration


@dataclass
class Config:
    latency_rounds: tuple[int, ...] = (1, 5, 20, 100)
    latency_repeats: int = 5
    throughput_prompts: int = 100
    throughput_rounds: int = 3
    throughput_repeats: int = 2
    history_rounds: tuple[int, ...] = (5, 20, 100)
    big_rounds: int = 50
    big_size: int = 10_240
    approval_repeats: int = 20
    waiting_prompts: int = 2_000
    long_rounds: int = 1_000
    long_size: int = 10_240
    long_cap_s: float = 200.0
    start_concurrency: int = 50
    waiting_batch: int = 50  # arrivals in the waiting test: bursts of this many prompts
    # sections that start fresh worker processes; the others carry on with the previous section's workers
    fresh_for: tuple[str, ...] = ("latency", "throughput", "waiting", "long")
    settle_s: float = 2.0  # pause before reading a worker's RSS
    conversation_turns: int = 500

    @classmethod
    def quick(cls) -> Config:
        return cls(latency_rounds=(1, 5, 20), latency_repeats=2, throughput_prompts=20, throughput_repeats=1,
                   history_rounds=(5, 20, 100), big_rounds=10, approval_repeats=3, waiting_prompts=50,
                   long_cap_s=3.0, fresh_for=("latency", "waiting", "long"), settle_s=0.5,
                   conversation_turns=30)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# worker subprocesses


class WorkerProcess:
    """One worker in its own process, so its memory can be read from /proc."""

    def __init__(self, label: str, cmd: list[str], env: dict[str, str], log_path: Path) -> None:
        self.label, self.cmd, self.env, self.log_path = label, cmd, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=REPO, stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{self.label} worker exited (log {self.log_path}):\n{self.log_tail()}")

    def memory(self) -> dict[str, int]:
        """Current (VmRSS) and peak (VmHWM) resident set size in bytes."""
        self.check_alive()
        found: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key.lower()] = int(value.split()[0]) * 1024
        return {"rss": found["vmrss"], "peak": found["vmhwm"]}

    def stop(self, timeout: float = 20.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.label} worker did not stop in {timeout:.0f} s; killing pid {proc.pid}")
            proc.kill()
            proc.wait()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# --------------------------------------------------------------------------------------------------
# the two sides


@dataclass
class Run:
    """One started prompt on either side."""

    wf: WorkflowHandle[Any, Any]
    scenario: Scenario
    prompt: PromptHandle | None = None


class Side:
    name: str = ""

    def __init__(self, client: Client, address: str, workdir: Path, options: dict[str, Any]) -> None:
        self.client, self.address, self.workdir, self.options = client, address, workdir, options
        self.task_queue = ""
        self.worker: WorkerProcess | None = None

    # worker lifecycle
    def worker_command(self) -> list[str]:
        raise NotImplementedError

    def worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        return env

    def start_worker(self, section: str) -> WorkerProcess:
        self.stop_worker()
        self.task_queue = f"bench-{self.name}-{section}-{uuid.uuid4().hex[:6]}"
        self.worker = WorkerProcess(self.name, self.worker_command(), self.worker_env(),
                                    self.workdir / f"worker-{self.name}-{section}.log")
        self.worker.start()
        return self.worker

    def stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    # prompts
    async def start(self, scenario: Scenario) -> Run:
        raise NotImplementedError

    async def finish(self, run: Run) -> None:
        """Wait for the result and check it did what the scenario says."""
        raise NotImplementedError

    async def wait_waiting(self, run: Run) -> str:
        """Wait until the prompt waits for approval; the pending tool call id."""
        raise NotImplementedError

    async def approve(self, run: Run, call_id: str) -> None:
        raise NotImplementedError

    async def result_visible(self, run: Run, call_id: str) -> bool:
        """Does the query show the approved call's result yet?"""
        raise NotImplementedError

    async def run(self, scenario: Scenario) -> float:
        t0 = time.perf_counter()
        await self.finish(await self.start(scenario))
        return time.perf_counter() - t0


def product_settings(address: str, workdir: Path, task_queue: str = "") -> Settings:
    """The client settings of the project's side. Its client uses the project's own data converter
    (`workers.worker.connect`): pydantic JSON plus external storage of large payloads in a directory that
    the worker subprocess shares (DAGENT_PAYLOAD_DIR)."""
    return Settings(temporal_address=address, task_queue=task_queue or "unused",
                    payload_dir=str(workdir / "payloads"))


class ProductSide(Side):
    name = PRODUCT

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "cli", "worker"]

    def worker_env(self) -> dict[str, str]:
        env = super().worker_env()
        env.update({
            "TEMPORAL_ADDRESS": self.address,
            "DAGENT_TASK_QUEUE": self.task_queue,
            "DAGENT_PLUGINS": "bench.plugin:plugin",
            "DAGENT_MODEL_NORMAL": "scripted:bench.plugin:model",
            "DAGENT_FILE_DIR": str(self.workdir / "files"),
            "DAGENT_PAYLOAD_DIR": product_settings(self.address, self.workdir).payload_dir,
            "BENCH_LOCAL_TOOL": "1" if self.options.get("local_tool") else "",
        })
        return env

    @property
    def agent(self) -> AgentClient:
        return AgentClient(self.client, product_settings(self.address, self.workdir, self.task_queue))

    async def start(self, scenario: Scenario) -> Run:
        handle = await self.agent.start(scenario.text(), user_id="bench", max_rounds=scenario.rounds + 1)
        return Run(wf=handle.workflow, scenario=scenario, prompt=handle)

    async def finish(self, run: Run) -> None:
        assert run.prompt is not None
        prompt = await run.prompt.result()
        tools = [o for o in prompt.output if isinstance(o, ToolOutput) and isinstance(o.result, ToolSuccess)]
        if prompt.state != "completed" or prompt.force_completed or len(tools) != run.scenario.rounds:
            raise RuntimeError(f"{run.wf.id}: state={prompt.state} force_completed={prompt.force_completed} "
                               f"tool results={len(tools)}/{run.scenario.rounds} error={prompt.error}")

    async def wait_waiting(self, run: Run) -> str:
        assert run.prompt is not None
        prompt = await run.prompt.wait_until("waiting_for_approval", poll_interval=0.01)
        for entry in prompt.output:
            if isinstance(entry, ToolOutput) and isinstance(entry.result, ToolPending):
                return entry.id
        raise RuntimeError(f"{run.wf.id}: no pending call (state {prompt.state})")

    async def approve(self, run: Run, call_id: str) -> None:
        assert run.prompt is not None
        await run.prompt.approve(call_id, by="bench")

    async def result_visible(self, run: Run, call_id: str) -> bool:
        assert run.prompt is not None
        entry = (await run.prompt.get()).tool_call(call_id)
        return entry is not None and isinstance(entry.result, ToolSuccess)


class BaselineSide(Side):
    name = BASELINE

    def worker_command(self) -> list[str]:
        return [sys.executable, "-m", "bench.baseline", "--address", self.address, "--task-queue", self.task_queue]

    async def start(self, scenario: Scenario) -> Run:
        wf = await self.client.start_workflow(
            BASELINE_WORKFLOW, BaselineInput(input=scenario.text(), max_rounds=scenario.rounds + 1),
            id=f"baseline-{uuid.uuid4().hex[:16]}", task_queue=self.task_queue, result_type=list[Message])
        return Run(wf=wf, scenario=scenario)

    async def finish(self, run: Run) -> None:
        transcript: list[Message] = await run.wf.result()
        results = sum(1 for m in transcript if m.role == "tool_result")
        if results != run.scenario.rounds:
            raise RuntimeError(f"{run.wf.id}: tool results={results}/{run.scenario.rounds}")

    async def _state(self, run: Run) -> BaselineState:
        return await run.wf.query("get_state", result_type=BaselineState)

    async def wait_waiting(self, run: Run) -> str:
        while True:
            state = await self._state(run)
            if state.state == "waiting_for_approval":
                return next(m.call_id for m in reversed(state.transcript) if m.role == "tool_call")
            if state.state == "completed":
                raise RuntimeError(f"{run.wf.id}: completed without waiting")
            await asyncio.sleep(0.01)

    async def approve(self, run: Run, call_id: str) -> None:
        await run.wf.signal("approve", call_id)

    async def result_visible(self, run: Run, call_id: str) -> bool:
        state = await self._state(run)
        return any(m.role == "tool_result" and m.call_id == call_id for m in state.transcript)


# --------------------------------------------------------------------------------------------------
# helpers


async def guarded(aw: Awaitable[T], sides: Sequence[Side], limit_s: float) -> T:
    """Await with a time limit, failing fast (with the worker's log) if a worker process dies."""
    task = asyncio.ensure_future(aw)
    deadline = time.monotonic() + limit_s
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.5)
            if done:
                return task.result()
            for side in sides:
                if side.worker is not None:
                    side.worker.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {limit_s:.0f} s")
    finally:
        if not task.done():
            task.cancel()


async def bounded_gather(factories: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    semaphore = asyncio.Semaphore(limit)

    async def one(factory: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await factory()

    return await asyncio.gather(*(one(f) for f in factories))


async def start_workers(sides: Sequence[Side], section: str, *, approval: bool = False,
                        reuse: bool = False) -> bool:
    """Fresh worker subprocesses, warmed up (imports, sandbox, first workflows) before anything is timed.
    With `reuse`, a side whose worker is still running keeps it (quick mode)."""
    started = [side for side in sides if not (reuse and side.worker is not None)]
    for side in started:
        side.start_worker(section)
    for side in started:
        await guarded(side.run(Scenario(rounds=2)), [side], 90)
        if approval:
            run = await side.start(Scenario(rounds=1, approve=1))
            call_id = await guarded(side.wait_waiting(run), [side], 30)
            await side.approve(run, call_id)
            await guarded(side.finish(run), [side], 30)
    return bool(started)


def stop_workers(sides: Sequence[Side], *, keep: bool = False) -> dict[str, dict[str, int]]:
    """Each side's worker memory; then stop the workers (unless `keep`: quick mode reuses them)."""
    memory = {}
    for side in sides:
        if side.worker is not None:
            memory[side.name] = side.worker.memory()
        if not keep:
            side.stop_worker()
    return memory


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def slope(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of y over x."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


async def history_stats(wf: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """Events and bytes of a workflow's history.

    `bytes` is the sum of each event's serialized protobuf size (`HistoryEvent.ByteSize()`) over
    `fetch_history()`; `server_bytes` is what the server itself reports (`history_size_bytes`).
    """
    history = await wf.fetch_history()
    description = await wf.describe()
    info = description.raw_description.workflow_execution_info
    activity_types: dict[int, str] = {}
    completed: dict[str, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            activity_types[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            name = activity_types.get(event.activity_task_completed_event_attributes.scheduled_event_id, "?")
            completed[name] = completed.get(name, 0) + 1
    close = ""
    last = history.events[-1] if history.events else None
    if last is not None and last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        close = f"terminated: {last.workflow_execution_terminated_event_attributes.reason}"
    elif last is not None and last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
        close = f"failed: {last.workflow_execution_failed_event_attributes.failure.message}"
    return {
        "events": len(history.events),
        "bytes": sum(e.ByteSize() for e in history.events),
        "server_bytes": int(info.history_size_bytes),
        "external_payload_bytes": int(info.external_payload_size_bytes),
        "external_payload_count": int(info.external_payload_count),
        "largest_event_bytes": max((e.ByteSize() for e in history.events), default=0),
        "activities_completed": completed,
        "status": WorkflowExecutionStatus(info.status).name if info.status else "?",
        "close": close,
    }


def tool_rounds_done(stats: dict[str, Any]) -> int:
    """Tool calls completed as activities; with local tools (no activity events), model calls - 1."""
    done = stats["activities_completed"]
    tools = sum(n for name, n in done.items() if "tool" in name)
    return tools or max(0, sum(n for name, n in done.items() if "model" in name) - 1)


# --------------------------------------------------------------------------------------------------
# sections


@dataclass
class Bench:
    cfg: Config
    product: ProductSide
    baseline: BaselineSide
    server_pid: int
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def sides(self) -> list[Side]:
        return [self.product, self.baseline]

    def interleaved(self, rep: int) -> list[Side]:
        return self.sides if rep % 2 == 0 else self.sides[::-1]

    async def latency(self) -> dict[str, Any]:
        cfg = self.cfg
        fresh = await start_workers(self.sides, "latency", reuse="latency" not in cfg.fresh_for)
        samples: dict[str, dict[int, list[float]]] = {s.name: {n: [] for n in cfg.latency_rounds} for s in self.sides}
        for n in cfg.latency_rounds:
            for rep in range(cfg.latency_repeats):
                for side in self.interleaved(rep):
                    seconds = await guarded(side.run(Scenario(rounds=n)), self.sides, 300)
                    samples[side.name][n].append(seconds * 1000)
            log(f"  latency {n} rounds: " + ", ".join(
                f"{name} {median(v[n]):.1f} ms" for name, v in samples.items()))
        out: dict[str, Any] = {"unit": "ms", "repeats": cfg.latency_repeats, "samples": samples}
        for name, by_rounds in samples.items():
            medians = {n: median(v) for n, v in by_rounds.items()}
            out[name] = {"median_ms": medians,
                         "per_round_ms": slope([(float(n), m) for n, m in medians.items()])}
        out["memory"] = stop_workers(self.sides, keep=True)
        out["fresh_workers"] = fresh
        return out

    async def conversation(self) -> dict[str, Any]:
        await start_workers([self.product], "conversation")
        out = await guarded(measure_conversation(
            self.product.agent, self.product.client, turns=self.cfg.conversation_turns,
            payload_dir=Path(product_settings(self.product.address, self.product.workdir).payload_dir)),
            [self.product], 3600)
        out["memory"] = stop_workers([self.product])
        return out

    async def throughput(self) -> dict[str, Any]:
        cfg = self.cfg
        fresh = await start_workers(self.sides, "throughput", reuse="throughput" not in cfg.fresh_for)
        rates: dict[str, list[float]] = {s.name: [] for s in self.sides}
        for rep in range(cfg.throughput_repeats):
            for side in self.interleaved(rep):
                scenario = Scenario(rounds=cfg.throughput_rounds)

                async def burst(side: Side = side, scenario: Scenario = scenario) -> None:
                    runs = await asyncio.gather(*(side.start(scenario) for _ in range(cfg.throughput_prompts)))
                    await asyncio.gather(*(side.finish(r) for r in runs))

                t0 = time.perf_counter()
                await guarded(burst(), self.sides, 300)
                rates[side.name].append(cfg.throughput_prompts / (time.perf_counter() - t0))
                log(f"  throughput {side.name}: {rates[side.name][-1]:.1f} prompts/s")
        out: dict[str, Any] = {"prompts": cfg.throughput_prompts, "rounds": cfg.throughput_rounds,
                               "repeats": cfg.throughput_repeats, "samples": rates}
        for name, values in rates.items():
            out[name] = {"prompts_per_s": median(values)}
        out["memory"] = stop_workers(self.sides, keep=True)
        out["fresh_workers"] = fresh
        return out

    async def history(self) -> dict[str, Any]:
        cfg = self.cfg
        fresh = await start_workers(self.sides, "history", reuse="history" not in cfg.fresh_for)
        cases = [(n, SMALL) for n in cfg.history_rounds] + [(cfg.big_rounds, cfg.big_size)]
        out: dict[str, Any] = {"bytes_measure": "sum of HistoryEvent.ByteSize() over fetch_history()"}
        for side in self.sides:
            per_case: dict[str, Any] = {}
            for n, size in cases:
                run = await side.start(Scenario(rounds=n, size=size))
                t0 = time.perf_counter()
                await guarded(side.finish(run), self.sides, 300)
                stats = await history_stats(run.wf)
                stats["latency_ms"] = (time.perf_counter() - t0) * 1000
                per_case[f"{n}x{size}"] = stats
                log(f"  history {side.name} {n} rounds x {size} B: {stats['events']} events, "
                    f"{stats['bytes'] / 1e6:.2f} MB")
            out[side.name] = per_case
        out["memory"] = stop_workers(self.sides, keep=True)
        out["fresh_workers"] = fresh
        return out

    async def approval(self, baseline_round_ms: float | None) -> dict[str, Any]:
        cfg = self.cfg
        fresh = await start_workers(self.sides, "approval", approval=True, reuse="approval" not in cfg.fresh_for)
        samples: dict[str, list[float]] = {s.name: [] for s in self.sides}
        for rep in range(cfg.approval_repeats):
            for side in self.interleaved(rep):
                samples[side.name].append(await guarded(self._approve_once(side), self.sides, 60) * 1000)
        out: dict[str, Any] = {"unit": "ms", "repeats": cfg.approval_repeats, "samples": samples}
        for name, values in samples.items():
            out[name] = {"approve_to_result_ms": median(values)}
            log(f"  approve->result {name}: {median(values):.1f} ms")
        if baseline_round_ms is None:  # the latency section did not run: measure one baseline round here
            ones = [await self.baseline.run(Scenario(rounds=1)) for _ in range(3)]
            twenties = [await self.baseline.run(Scenario(rounds=20)) for _ in range(3)]
            baseline_round_ms = (median(twenties) - median(ones)) / 19 * 1000
            out["baseline_round_ms_source"] = "approval section: (median 20 rounds - median 1 round) / 19"
        else:
            out["baseline_round_ms_source"] = "latency section: per-round slope"
        out["baseline_round_ms"] = baseline_round_ms
        out["memory"] = stop_workers(self.sides, keep=True)
        out["fresh_workers"] = fresh
        return out

    async def _approve_once(self, side: Side) -> float:
        run = await side.start(Scenario(rounds=1, approve=1))
        call_id = await side.wait_waiting(run)
        await asyncio.sleep(0.05)  # let the worker go idle: time the decision, not the tail of the pause
        t0 = time.perf_counter()
        await side.approve(run, call_id)
        while True:
            if await side.result_visible(run, call_id):
                break
            await asyncio.sleep(0.005)  # each poll is a query the worker answers: do not flood it
        elapsed = time.perf_counter() - t0
        await side.finish(run)
        return elapsed

    async def waiting(self) -> dict[str, Any]:
        """Worker RSS while many prompts wait for approval, against the same worker's idle RSS.
        One side at a time, each on its own fresh worker process."""
        cfg = self.cfg
        stop_workers(self.sides)
        out: dict[str, Any] = {"prompts": cfg.waiting_prompts, "batch": cfg.waiting_batch}
        for side in self.sides:
            await start_workers([side], "waiting", approval=True)
            await asyncio.sleep(cfg.settle_s)
            idle = self._worker(side).memory()
            cpu0, server0 = cpu_seconds(self._worker(side).pid), cpu_seconds(self.server_pid)
            seconds = await guarded(self._fill_waiting(side), [side], 500)
            cpu = cpu_seconds(self._worker(side).pid) - cpu0
            server_cpu = cpu_seconds(self.server_pid) - server0
            await asyncio.sleep(cfg.settle_s)
            loaded = self._worker(side).memory()
            out[side.name] = {"idle_rss": idle["rss"], "waiting_rss": loaded["rss"], "peak": loaded["peak"],
                              "ratio": loaded["rss"] / idle["rss"], "seconds_to_all_waiting": seconds,
                              "worker_cpu_seconds": cpu, "server_cpu_seconds": server_cpu}
            log(f"  waiting {side.name}: idle {idle['rss'] / 2**20:.0f} MiB, {cfg.waiting_prompts} waiting "
                f"{loaded['rss'] / 2**20:.0f} MiB ({seconds:.1f} s to get them all waiting; CPU: worker {cpu:.1f} s, "
                f"server {server_cpu:.1f} s)")
            side.stop_worker()
        return out

    @staticmethod
    def _worker(side: Side) -> WorkerProcess:
        assert side.worker is not None
        return side.worker

    async def _fill_waiting(self, side: Side) -> float:
        """Start the prompts in batches, each once the previous batch waits: a steady stream of arrivals
        rather than 2,000 simultaneous starts (which would mostly measure a workflow-cache stampede)."""
        cfg = self.cfg
        t0 = time.perf_counter()
        started = 0
        while started < cfg.waiting_prompts:
            batch = min(cfg.waiting_batch, cfg.waiting_prompts - started)
            await bounded_gather([lambda: side.start(Scenario(rounds=1, approve=1))] * batch, cfg.start_concurrency)
            started += batch
            await self._all_waiting(side, started)
        return time.perf_counter() - t0

    async def _all_waiting(self, side: Side, count: int) -> None:
        """Count (visibility, one cheap call; queries would page evicted workflows back into the worker's
        cache) until every prompt of this section's task queue has `PromptState = waiting_for_approval`."""
        query = (f"TaskQueue = '{side.task_queue}' AND PromptState = 'waiting_for_approval' "
                 f"AND ExecutionStatus = 'Running'")
        while True:
            if (await side.client.count_workflows(query)).count >= count:
                return
            await asyncio.sleep(0.25)

    async def long(self) -> dict[str, Any]:
        cfg = self.cfg
        stop_workers(self.sides)
        out: dict[str, Any] = {"rounds": cfg.long_rounds, "size": cfg.long_size, "cap_s": cfg.long_cap_s}
        for side in self.sides:
            await start_workers([side], "long")
            run = await side.start(Scenario(rounds=cfg.long_rounds, size=cfg.long_size))
            t0 = time.perf_counter()
            status = WorkflowExecutionStatus.RUNNING
            while time.perf_counter() - t0 < cfg.long_cap_s:
                assert side.worker is not None
                side.worker.check_alive()
                status = (await run.wf.describe()).status or status
                if status != WorkflowExecutionStatus.RUNNING:
                    break
                await asyncio.sleep(0.25)
            elapsed = time.perf_counter() - t0
            capped = status == WorkflowExecutionStatus.RUNNING
            if capped:
                try:
                    await run.wf.terminate(reason=f"bench cap: still running after {cfg.long_cap_s:.0f} s")
                except RPCError as exc:  # it finished between the last check and now
                    if exc.status != RPCStatusCode.NOT_FOUND:
                        raise
                    status = (await run.wf.describe()).status or status
                    capped = False
            assert side.worker is not None
            memory = side.worker.memory()
            side.stop_worker()
            stats = await history_stats(run.wf)
            completed = status == WorkflowExecutionStatus.COMPLETED
            if completed:
                await side.finish(run)
            stats.update({"completed": completed, "capped": capped, "seconds": elapsed, "final_status": status.name,
                          "tool_rounds_done": tool_rounds_done(stats), "memory": memory})
            out[side.name] = stats
            log(f"  long {side.name}: {status.name} after {elapsed:.1f} s, {stats['tool_rounds_done']} tool rounds, "
                f"{stats['bytes'] / 1e6:.1f} MB history{' (capped)' if capped else ''} {stats['close']}")
        return out


# --------------------------------------------------------------------------------------------------
# report


@dataclass
class Row:
    metric: str
    product: str
    baseline: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} ms"


def mb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e6:.2f} MB" if v >= 1e5 else f"{v / 1e3:.1f} KB"


def mib(v: float | None) -> str:
    return "-" if v is None else f"{v / 2**20:.0f} MiB"


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def fx(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else "PASS" if ok else "FAIL"


def build_rows(results: dict[str, Any]) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    targets: dict[str, Any] = {}

    def target(key: str, value: float | bool | None, text: str, ok: bool | None) -> str:
        targets[key] = {"value": value, "target": text, "pass": ok}
        return verdict(ok)

    lat = results.get("latency")
    if lat:
        for n in lat[PRODUCT]["median_ms"]:
            p, b = lat[PRODUCT]["median_ms"][n], lat[BASELINE]["median_ms"][n]
            rows.append(Row(f"latency, {n} tool round{'s' if n != 1 else ''} (median of {lat['repeats']})",
                            ms(p), ms(b), fx(ratio(p, b))))
        p, b = lat[PRODUCT]["per_round_ms"], lat[BASELINE]["per_round_ms"]
        r = ratio(p, b)
        rows.append(Row("per-round overhead (slope of medians)", ms(p), ms(b), fx(r), "<= 0.75x",
                        target("per_round_overhead", r, "<= 0.75x baseline", None if r is None else r <= 0.75)))
    thr = results.get("throughput")
    if thr:
        p, b = thr[PRODUCT]["prompts_per_s"], thr[BASELINE]["prompts_per_s"]
        r = ratio(p, b)
        rows.append(Row(f"throughput, {thr['prompts']} concurrent {thr['rounds']}-round prompts "
                        f"(median of {thr['repeats']})", f"{p:.1f}/s", f"{b:.1f}/s", fx(r), ">= 1.3x",
                        target("throughput", r, ">= 1.3x baseline", None if r is None else r >= 1.3)))
    hist = results.get("history")
    if hist:
        keys = list(hist[PRODUCT])
        for key in keys:
            p, b = hist[PRODUCT][key], hist[BASELINE][key]
            n, size = key.split("x")
            label = f"history, {n} rounds" + (f" x {int(size) // 1024} KB outputs" if int(size) >= 1024 else "")
            rows.append(Row(label + ": events", str(p["events"]), str(b["events"]),
                            fx(ratio(p["events"], b["events"]))))
            r = ratio(p["bytes"], b["bytes"])
            big = int(size) >= 1024
            rows.append(Row(label + ": bytes", mb(p["bytes"]), mb(b["bytes"]), fx(r), "<= 0.15x" if big else "",
                            target("history_bytes_big", r, "<= 0.15x baseline", None if r is None else r <= 0.15)
                            if big else ""))
            ext_p, ext_b = p.get("external_payload_bytes", 0), b.get("external_payload_bytes", 0)
            if ext_p or ext_b:  # payloads the data converter keeps outside history: count them too
                rows.append(Row("  + payloads stored outside history", mb(ext_p), mb(ext_b)))
                rows.append(Row("  = history + outside", mb(p["bytes"] + ext_p), mb(b["bytes"] + ext_b),
                                fx(ratio(p["bytes"] + ext_p, b["bytes"] + ext_b))))
        small = [k for k in keys if k.endswith(f"x{SMALL}")]
        k100, k20 = next((k for k in small if k.startswith("100x")), None), next(
            (k for k in small if k.startswith("20x")), None)
        if k100 and k20:
            p = hist[PRODUCT][k100]["bytes"] / hist[PRODUCT][k20]["bytes"]
            b = hist[BASELINE][k100]["bytes"] / hist[BASELINE][k20]["bytes"]
            rows.append(Row("history growth: bytes(100) / bytes(20)", f"{p:.3f}", f"{b:.3f}", "", "<= 5.5",
                            target("history_growth", p, "bytes(100)/bytes(20) <= 5.5", p <= 5.5)))
    app = results.get("approval")
    if app:
        p, b = app[PRODUCT]["approve_to_result_ms"], app[BASELINE]["approve_to_result_ms"]
        rows.append(Row(f"approve -> result in query (median of {app['repeats']})", ms(p), ms(b), fx(ratio(p, b))))
        base_round = app["baseline_round_ms"]
        r = ratio(p, base_round)
        rows.append(Row("approve -> result / one baseline round", ms(p), f"round {ms(base_round)}", fx(r),
                        "<= 1.0x", target("approve_to_result", r, "<= 1.0x one baseline round",
                                          None if r is None else r <= 1.0)))
    wait = results.get("waiting")
    if wait:
        p, b = wait[PRODUCT], wait[BASELINE]
        rows.append(Row("worker RSS idle", mib(p["idle_rss"]), mib(b["idle_rss"]),
                        fx(ratio(p["idle_rss"], b["idle_rss"]))))
        rows.append(Row(f"worker RSS, {wait['prompts']} prompts waiting", mib(p["waiting_rss"]),
                        mib(b["waiting_rss"]), fx(ratio(p["waiting_rss"], b["waiting_rss"]))))
        rows.append(Row("  waiting RSS / idle RSS (own worker)", f"{p['ratio']:.3f}", f"{b['ratio']:.3f}", "",
                        "<= 1.3", target("waiting_rss", p["ratio"], "<= 1.3x idle", p["ratio"] <= 1.3)))
    long = results.get("long")
    if long:
        p, b = long[PRODUCT], long[BASELINE]

        def outcome(s: dict[str, Any]) -> str:
            if s["completed"]:
                return f"completed in {s['seconds']:.1f} s"
            what = "capped" if s["capped"] else s["final_status"].lower()
            return f"{what} at round {s['tool_rounds_done']} ({s['seconds']:.1f} s)"

        rows.append(Row(f"{long['rounds']}-round prompt, {long['size'] // 1024} KB outputs", outcome(p), outcome(b),
                        "", "completes", target("long_prompt", p["completed"], "completes", p["completed"])))
        rows.append(Row("  its history (events / bytes)", f"{p['events']} / {mb(p['bytes'])}",
                        f"{b['events']} / {mb(b['bytes'])}"))
        ext_p, ext_b = p.get("external_payload_bytes", 0), b.get("external_payload_bytes", 0)
        if ext_p or ext_b:
            rows.append(Row("  + payloads stored outside history", mb(ext_p), mb(ext_b)))
    conv = results.get("conversation")
    if conv:
        early, late = (str(m) if str(m) in conv["turn_ms"] else m for m in conv["marks"])
        rows.append(Row(f"conversation of {conv['turns']} turns ({conv['runs']} runs): history + payload bytes",
                        mb(conv["total_bytes"]), "-"))
        rows.append(Row("  prompts' histories / conversation's / payload store",
                        f"{mb(conv['prompt_history_bytes'])} / {mb(conv['conversation_history_bytes'])} / "
                        f"{mb(conv['payload_store_bytes'])}", "-"))
        t_early, t_late = conv["turn_ms"][early], conv["turn_ms"][late]
        rows.append(Row(f"  turn latency at turn {early} vs turn {late} (median of 10)",
                        f"{ms(t_early)} vs {ms(t_late)}", "-", fx(ratio(t_late, t_early)), "flat (~1x)"))
        sizes = conv["child_history_bytes"]
        if early in sizes and late in sizes:
            rows.append(Row(f"  one turn's prompt history at turn {early} vs {late}",
                            f"{mb(sizes[early])} vs {mb(sizes[late])}", "-", fx(ratio(sizes[late], sizes[early]))))
    for section in SECTIONS:
        data = results.get(section)
        if not data or section == "conversation":
            continue
        if section == "waiting":
            peaks = {PRODUCT: data[PRODUCT]["peak"], BASELINE: data[BASELINE]["peak"]}
        elif section == "long":
            peaks = {PRODUCT: data[PRODUCT]["memory"]["peak"], BASELINE: data[BASELINE]["memory"]["peak"]}
        else:
            peaks = {PRODUCT: data["memory"][PRODUCT]["peak"], BASELINE: data["memory"][BASELINE]["peak"]}
        carried = "" if data.get("fresh_workers", True) else " (workers carried over)"
        rows.append(Row(f"worker peak RSS (VmHWM), {section}{carried}", mib(peaks[PRODUCT]), mib(peaks[BASELINE]),
                        fx(ratio(peaks[PRODUCT], peaks[BASELINE]))))
    return rows, targets


def code_version() -> dict[str, Any]:
    """The project's git commit and uncommitted changes to its code (worker processes import it at start)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10,
                                  check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    changed = git("status", "--porcelain", "--", "agent", "workflows", "activities", "workers", "plugins")
    digest = git("diff", "HEAD", "--", "agent", "workflows", "activities", "workers", "plugins")
    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted": changed.splitlines(),
            "diff_sha1": hashlib.sha1(digest.encode()).hexdigest()[:12] if digest else ""}


def render(rows: list[Row]) -> str:
    header = Row("metric", PRODUCT, BASELINE, "ratio", "target", "result")
    table = [header, *rows]
    widths = [max(len(getattr(r, f)) for r in table) for f in ("metric", "product", "baseline", "ratio", "target",
                                                                 "verdict")]
    lines = []
    for i, r in enumerate(table):
        cells = [r.metric, r.product, r.baseline, r.ratio, r.target, r.verdict]
        lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths,
                                                                                                    strict=True))))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# main


async def run_bench(cfg: Config, sections: Sequence[str], workdir: Path, db_file: Path | None,
                    options: dict[str, Any]) -> dict[str, Any]:
    server = DevServer(db_file=db_file, log_file=workdir / "temporal.log")
    t_start = time.perf_counter()
    await server.start_async()
    log(f"dev server on {server.address} (headless, db {server.db_file or 'in memory'})")
    bench: Bench | None = None
    try:
        product_client = await connect(product_settings(server.address, workdir))
        baseline_client = await Client.connect(server.address, data_converter=pydantic_data_converter)
        bench = Bench(cfg, ProductSide(product_client, server.address, workdir, options),
                      BaselineSide(baseline_client, server.address, workdir, options), server.pid or 0)
        timings: dict[str, float] = {}
        for section in sections:
            log(f"section {section}")
            t0 = time.perf_counter()
            if section == "approval":
                latency = bench.results.get("latency")
                bench.results[section] = await bench.approval(latency[BASELINE]["per_round_ms"] if latency else None)
            else:
                bench.results[section] = await getattr(bench, section)()
            timings[section] = time.perf_counter() - t0
            log(f"section {section} done in {timings[section]:.1f} s")
        bench.results["section_seconds"] = timings
        bench.results["total_seconds"] = time.perf_counter() - t_start
        return bench.results
    finally:
        if bench is not None:
            for side in bench.sides:
                side.stop_worker()
        await server.stop_async()


def _int_keys(results: dict[str, Any]) -> dict[str, Any]:
    """JSON turned the latency round counts into strings: turn them back."""
    latency = results.get("latency")
    if latency:
        for side in (PRODUCT, BASELINE):
            latency[side]["median_ms"] = {int(k): v for k, v in latency[side]["median_ms"].items()}
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run (~1 min): fewer repeats and prompts")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    parser.add_argument("--repeats", type=int, help="latency repeats per round count")
    parser.add_argument("--waiting", type=int, help="prompts waiting for approval in the memory test")
    parser.add_argument("--waiting-batch", type=int, help="prompts per burst in the waiting test (default 50)")
    parser.add_argument("--long-cap", type=float, help="seconds before the 1,000-round prompt is terminated")
    parser.add_argument("--db-dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                        help="directory of the dev server's SQLite file (default: /dev/shm, i.e. in RAM, so the "
                             "disk's fsync latency, shared with whatever else runs on the box, does not dominate; "
                             "give a disk directory to include it)")
    parser.add_argument("--in-memory-db", action="store_true",
                        help="dev server without --db-filename (`dagent server` always uses a SQLite file)")
    parser.add_argument("--local-tool", action="store_true",
                        help="declare the project's bench tool local=True (a local activity); default: a regular "
                             "activity, like the baseline's")
    parser.add_argument("--out", type=Path, help="JSON results file (default: bench/results/latest.json, "
                                                  "quick mode: bench/results/latest-quick.json)")
    parser.add_argument("--report", type=Path, metavar="JSON",
                        help="only print the table of an earlier run's JSON file (runs nothing)")
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (server db, worker logs)")
    args = parser.parse_args(argv)
    if args.report:
        document = json.loads(args.report.read_text())
        print(render(build_rows(_int_keys(document["results"]))[0]))
        for note in document.get("notes", []):
            print(f"Note: {note}")
        print(f"{document['mode']} run of {document['created_at']}, wall time {document['wall_seconds']:.0f} s")
        return 0

    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {','.join(SECTIONS)}")
    sections = [s for s in SECTIONS if s in sections]
    cfg = Config.quick() if args.quick else Config()
    args.out = args.out or RESULTS / ("latest-quick.json" if args.quick else "latest.json")
    if args.repeats:
        cfg.latency_repeats = args.repeats
    if args.waiting:
        cfg.waiting_prompts = args.waiting
    if args.waiting_batch:
        cfg.waiting_batch = args.waiting_batch
    if args.long_cap:
        cfg.long_cap_s = args.long_cap

    workdir = Path(tempfile.mkdtemp(prefix="dagent-bench-"))
    db_file: Path | None = None
    if not args.in_memory_db:
        db_dir = args.db_dir or workdir
        db_dir.mkdir(parents=True, exist_ok=True)
        db_file = db_dir / f"dagent-bench-{uuid.uuid4().hex[:8]}.db"
    store = "in memory" if db_file is None else f"SQLite file {db_file}"
    load_before = os.getloadavg()
    version_before = code_version()
    t0 = time.perf_counter()
    try:
        results = asyncio.run(run_bench(cfg, sections, workdir, db_file, {"local_tool": args.local_tool}))
    finally:
        if db_file is not None:
            for leftover in db_file.parent.glob(db_file.name + "*"):  # the db and its -wal/-shm/-journal
                leftover.unlink(missing_ok=True)
        if args.keep_tmp:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    rows, targets = build_rows(results)
    table = render(rows)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()
    version_after = code_version()
    print(table)
    print()
    print(f"{PRODUCT} = this project (PromptWorkflow via `dagent worker`); {BASELINE} = bench/baseline.py. "
          f"ratio = {PRODUCT} / {BASELINE}.")
    print("History bytes = sum of HistoryEvent.ByteSize() over fetch_history(); payloads the project's data "
          "converter stores outside history are listed separately (server's external_payload_size_bytes).")
    print("Latency = client start_workflow -> result. Per-round overhead = least-squares slope of the latency "
          "medians over the round counts. Approve -> result = signal sent -> first get_prompt/query showing "
          "the tool result.")
    notes = [
        f"{PRODUCT} worker: the project's own defaults (workflow cache size, workflow runner, data converter "
        f"with external payload storage); bench tool is a {'local' if args.local_tool else 'regular'} activity. "
        f"{BASELINE} worker: SDK defaults (sandboxed runner, 1,000 cached workflows), pydantic converter.",
        f"Waiting test: prompts started in bursts of {cfg.waiting_batch}, each once the previous burst waits; "
        f"RSS read {cfg.settle_s:g} s after the last one waits.",
    ]
    if args.quick:
        notes.append("Quick mode: fewer repeats/prompts, smaller 'big' history case, 1,000-round prompt capped at "
                     f"{cfg.long_cap_s:g} s: a smoke run, not figures.")
    dirty = " + uncommitted changes" if version_before["uncommitted"] else ""
    notes.append(f"Project code: commit {version_before['commit'] or '?'}{dirty}.")
    if version_after != version_before:
        notes.append(f"WARNING: the project's code changed during the run (now {version_after['commit']}); "
                     "workers started after the change ran the new code.")
    for note in notes:
        print(f"Note: {note}")
    passed = sum(1 for t in targets.values() if t["pass"])
    print(f"Targets: {passed}/{len(targets)} PASS. Wall time {wall:.0f} s"
          f"{' (quick mode)' if args.quick else ''}. Dev server store: {store}. Load average (1 min) before/after: "
          f"{load_before[0]:.1f}/{load_after[0]:.1f} on {os.cpu_count()} CPUs. JSON: {args.out}")

    document = {
        "created_at": datetime.now(UTC).isoformat(),
        "mode": "quick" if args.quick else "full",
        "sections": sections,
        "config": asdict(cfg),
        "code_version": {"before": version_before, "after": version_after},
        "environment": {"python": platform.python_version(), "temporalio": temporalio.__version__,
                        "cpus": os.cpu_count(), "machine": platform.machine(),
                        "loadavg_before": load_before, "loadavg_after": load_after,
                        "dev_server_store": store},
        "wall_seconds": wall,
        "targets": targets,
        "notes": notes,
        "table": [asdict(r) for r in rows],
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
