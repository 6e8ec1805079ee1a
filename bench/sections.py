"""The benchmark sections, one method each: footprint, latency, throughput, history, approval, waiting, long,
conversation."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from bench.approvals_list import baseline_lists, product_lists
from bench.config import BASELINE, PRODUCT, SMALL, Config, log
from bench.conversation import measure_baseline_conversation, measure_conversation
from bench.footprint import dagent_command, time_and_cpu, time_command, time_to_first_poll
from bench.measure import (
    bounded_gather,
    cpu_seconds,
    guarded,
    history_stats,
    median,
    percentile,
    slope,
    start_workers,
    stop_workers,
    store_bytes,
    tool_rounds_done,
)
from bench.scenario import Scenario
from bench.sides import BaselineSide, ProductSide, Run, Side, WorkerProcess, product_settings
from durable_agent.agent.models import ToolSuccess

RESUME_CALL_ID = "call_r1_0"  # the first round's call, as both sides' scripted model names it


@dataclass
class Bench:
    cfg: Config
    product: ProductSide
    baseline: BaselineSide
    server_pid: int
    server_db: Path | None = None  # the dev server's SQLite file (None: in memory)
    # the footprint, throughput and waiting sections also run the project with the sandbox off (the opt-in)
    product_unsandboxed: ProductSide | None = None
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def sides(self) -> list[Side]:
        return [self.product, self.baseline]

    @property
    def all_sides(self) -> list[Side]:
        return [self.product, *([self.product_unsandboxed] if self.product_unsandboxed else []), self.baseline]

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
        """This project's conversation, then the baseline's (a new workflow per turn with the transcript so far
        as its input), one after the other, each with its own worker."""
        await start_workers([self.product], "conversation")
        out = await guarded(measure_conversation(
            self.product.agent, self.product.client, turns=self.cfg.conversation_turns,
            payload_dir=Path(product_settings(self.product.address, self.product.workdir).payload_dir)),
            [self.product], 3600)
        out["memory"] = stop_workers([self.product])
        await start_workers([self.baseline], "conversation")
        baseline = await guarded(measure_baseline_conversation(self.baseline, turns=self.cfg.conversation_turns),
                                 [self.baseline], 3600)
        baseline["memory"] = stop_workers([self.baseline])
        return {PRODUCT: out, BASELINE: baseline}

    async def throughput(self) -> dict[str, Any]:
        """Prompts/s of bursts of concurrent prompts, and the CPU each side's worker (and the server) spent per
        prompt during them. The project runs twice: with its defaults (sandbox on) and with the sandbox off."""
        cfg = self.cfg
        sides = self.all_sides
        fresh = await start_workers(sides, "throughput", reuse="throughput" not in cfg.fresh_for)
        rates: dict[str, list[float]] = {s.name: [] for s in sides}
        cpu: dict[str, list[float]] = {s.name: [] for s in sides}
        server_cpu: dict[str, list[float]] = {s.name: [] for s in sides}
        client_cpu: dict[str, list[float]] = {s.name: [] for s in sides}
        for rep in range(cfg.throughput_repeats):
            for side in sides[rep % len(sides):] + sides[:rep % len(sides)]:
                scenario = Scenario(rounds=cfg.throughput_rounds)

                async def burst(side: Side = side, scenario: Scenario = scenario) -> None:
                    runs = await asyncio.gather(*(side.start(scenario) for _ in range(cfg.throughput_prompts)))
                    await asyncio.gather(*(side.finish(r) for r in runs))

                worker = self._worker(side)
                cpu0, server0 = cpu_seconds(worker.pid), cpu_seconds(self.server_pid)
                client0 = time.process_time()
                t0 = time.perf_counter()
                await guarded(burst(), sides, 300)
                rates[side.name].append(cfg.throughput_prompts / (time.perf_counter() - t0))
                cpu[side.name].append((cpu_seconds(worker.pid) - cpu0) / cfg.throughput_prompts * 1000)
                server_cpu[side.name].append((cpu_seconds(self.server_pid) - server0) / cfg.throughput_prompts * 1000)
                client_cpu[side.name].append((time.process_time() - client0) / cfg.throughput_prompts * 1000)
                log(f"  throughput {side.name}: {rates[side.name][-1]:.1f} prompts/s, worker CPU "
                    f"{cpu[side.name][-1]:.1f} ms/prompt, server CPU {server_cpu[side.name][-1]:.1f} ms/prompt, "
                    f"client CPU {client_cpu[side.name][-1]:.1f} ms/prompt")
        out: dict[str, Any] = {"prompts": cfg.throughput_prompts, "rounds": cfg.throughput_rounds,
                               "repeats": cfg.throughput_repeats, "samples": rates, "cpu_samples": cpu}
        for name, values in rates.items():
            out[name] = {"prompts_per_s": median(values), "worker_cpu_ms_per_prompt": median(cpu[name]),
                         "server_cpu_ms_per_prompt": median(server_cpu[name]),
                         "client_cpu_ms_per_prompt": median(client_cpu[name])}
        out["memory"] = stop_workers(sides, keep=True)
        out["fresh_workers"] = fresh
        return out

    async def history(self) -> dict[str, Any]:
        cfg = self.cfg
        fresh = await start_workers(self.sides, "history", reuse="history" not in cfg.fresh_for)
        cases = [(n, SMALL) for n in cfg.history_rounds] + [(n, cfg.big_size) for n in cfg.big_rounds]
        out: dict[str, Any] = {"bytes_measure": "sum of HistoryEvent.ByteSize() over fetch_history()"}
        for side in self.sides:
            per_case: dict[str, Any] = {}
            for n, size in cases:
                worker = self._worker(side)
                cpu0 = cpu_seconds(worker.pid)
                t0 = time.perf_counter()
                run = await side.start(Scenario(rounds=n, size=size))
                await guarded(side.finish(run), self.sides, 300)
                elapsed = time.perf_counter() - t0
                worker_cpu = cpu_seconds(worker.pid) - cpu0
                stats = await history_stats(run.wf)
                stats["latency_ms"] = elapsed * 1000  # start -> result of this one prompt
                stats["per_round_ms"] = elapsed * 1000 / n
                stats["worker_cpu_ms"] = worker_cpu * 1000
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
        by_update: dict[str, list[float]] = {s.name: [] for s in self.sides if isinstance(s, ProductSide)}
        for rep in range(cfg.approval_repeats):
            for side in self.interleaved(rep):
                samples[side.name].append(await guarded(self._approve_once(side), self.sides, 60) * 1000)
                if isinstance(side, ProductSide):
                    by_update[side.name].append(
                        await guarded(self._approve_once(side, update=True), self.sides, 60) * 1000)
        out: dict[str, Any] = {"unit": "ms", "repeats": cfg.approval_repeats, "samples": samples,
                               "update_samples": by_update}
        for name, values in samples.items():
            out[name] = {"approve_to_result_ms": median(values), "approve_to_result_spread_ms": _spread(values)}
            log(f"  approve->result {name}: {median(values):.1f} ms")
        for name, values in by_update.items():
            out[name] |= {"approve_update_to_result_ms": median(values), "approve_update_spread_ms": _spread(values)}
            log(f"  approve (update, wait) -> result returned {name}: {median(values):.1f} ms")
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

    async def _approve_once(self, side: Side, *, update: bool = False) -> float:
        """Seconds from the decision to the call's result at the client: by signal, then `get` polled (issue 6's
        measure; the baseline's only door), or (`update`, this project) by the `approve_call` update, whose reply
        is the call's result once it has run."""
        run = await side.start(Scenario(rounds=1, approve=1))
        call_id = await side.wait_waiting(run)
        await asyncio.sleep(0.05)  # let the worker go idle: time the decision, not the tail of the pause
        if update:
            assert isinstance(side, ProductSide) and run.prompt is not None
            t0 = time.perf_counter()
            output = await run.prompt.approve(call_id, by="bench", wait=True)
            elapsed = time.perf_counter() - t0
            if output is None or not isinstance(output.result, ToolSuccess):
                raise RuntimeError(f"{run.wf.id}: the approve_call update returned {output!r}")
        else:
            elapsed = await _approve_and_see_result(side, run, call_id)
        await side.finish(run)
        return elapsed

    async def footprint(self) -> dict[str, Any]:
        """Cold starts (`dagent --help`, `dagent ls`, each side's worker from spawn to its first poll) and each
        side's worker RSS once warmed up and idle, with its peak so far. Medians of `cold_repeats`."""
        cfg = self.cfg
        stop_workers(self.all_sides)
        env = self.product.worker_env()
        commands = {"help": [*dagent_command(), "--help"],
                    "ls": [*dagent_command(), "ls", "--address", self.product.address]}
        out: dict[str, Any] = {"repeats": cfg.cold_repeats, "cli_ms": {}}
        for name, args in commands.items():
            await asyncio.to_thread(time_command, args, env)  # not timed: writes the bytecode, as an install does
            timed = [await asyncio.to_thread(time_and_cpu, args, env) for _ in range(cfg.cold_repeats)]
            samples, cpu = [wall * 1000 for wall, _ in timed], [used * 1000 for _, used in timed]
            out["cli_ms"][name] = {"samples": samples, "median": median(samples), "cpu_median": median(cpu)}
            log(f"  cold start dagent {name}: median {median(samples):.0f} ms (CPU {median(cpu):.0f} ms)")
        for side in self.all_sides:
            polls = [await guarded(time_to_first_poll(side), [side], 90) * 1000 for _ in range(cfg.cold_repeats)]
            await start_workers([side], "footprint", approval=True)
            await asyncio.sleep(cfg.settle_s)
            memory = self._worker(side).memory()
            side.stop_worker()
            out[side.name] = {"first_poll_ms": polls, "first_poll_median_ms": median(polls),
                              "idle_rss": memory["rss"], "peak": memory["peak"]}
            log(f"  footprint {side.name}: first poll median {median(polls):.0f} ms, idle RSS "
                f"{memory['rss'] / 2**20:.0f} MiB (peak {memory['peak'] / 2**20:.0f} MiB)")
        return out

    async def waiting(self) -> dict[str, Any]:
        """Worker RSS while many prompts wait for approval, against the same worker's idle RSS; the approvals
        list's latency; resume latency of waiting prompts against fresh 1-round prompts. One side at a time
        (the project with the sandbox on, then off, then the baseline), each on its own fresh worker."""
        cfg = self.cfg
        stop_workers(self.all_sides)
        out: dict[str, Any] = {"prompts": cfg.waiting_prompts, "batch": cfg.waiting_batch}
        for side in self.all_sides:
            await start_workers([side], "waiting", approval=True)
            await asyncio.sleep(cfg.settle_s)
            idle = self._worker(side).memory()
            cpu0, server0 = cpu_seconds(self._worker(side).pid), cpu_seconds(self.server_pid)
            store0 = store_bytes(self.server_db)
            t0 = time.perf_counter()
            runs = await guarded(self._fill_waiting(side), [side], 3600)
            seconds = time.perf_counter() - t0
            cpu = cpu_seconds(self._worker(side).pid) - cpu0
            server_cpu = cpu_seconds(self.server_pid) - server0
            await asyncio.sleep(cfg.settle_s)
            store1 = store_bytes(self.server_db)
            stored = None if store0 is None or store1 is None else (store1 - store0) / len(runs)
            loaded = self._worker(side).memory()
            with_queries = cfg.waiting_prompts <= cfg.query_list_max
            if isinstance(side, ProductSide):
                lists = await guarded(product_lists(side, cfg.list_repeats, with_queries=with_queries), [side], 3600)
            else:
                assert isinstance(side, BaselineSide)
                lists = await guarded(baseline_lists(side, cfg.list_repeats), [side], 3600) if with_queries else {}
            resume, fresh = await guarded(self._resume(side, runs), [side], 1200)
            after = self._worker(side).memory()
            out[side.name] = {"idle_rss": idle["rss"], "waiting_rss": loaded["rss"], "peak": after["peak"],
                              "ratio": loaded["rss"] / idle["rss"], "seconds_to_all_waiting": seconds,
                              "worker_cpu_seconds": cpu, "server_cpu_seconds": server_cpu,
                              "server_store_bytes_per_prompt": stored, "lists": lists,
                              "resume_ms": resume, "resume_median_ms": median(resume),
                              "resume_p99_ms": percentile(resume, 99), "fresh_ms": fresh,
                              "fresh_median_ms": median(fresh), "fresh_p99_ms": percentile(fresh, 99)}
            listed = ", ".join(f"{name} {median(v['ms']):.0f} ms ({v['rows'][-1]} rows)" for name, v in lists.items())
            log(f"  waiting {side.name}: idle {idle['rss'] / 2**20:.0f} MiB, {cfg.waiting_prompts} waiting "
                f"{loaded['rss'] / 2**20:.0f} MiB ({seconds:.1f} s to get them all waiting; CPU: worker {cpu:.1f} s, "
                f"server {server_cpu:.1f} s; server store {'?' if stored is None else f'{stored / 1024:.1f} KiB'} per "
                f"prompt); lists: {listed}; approve -> result p50/p99 {median(resume):.1f}/"
                f"{percentile(resume, 99):.1f} ms, fresh 1-round prompt {median(fresh):.1f}/"
                f"{percentile(fresh, 99):.1f} ms")
            await self._close_waiting(side, runs)
            side.stop_worker()
        return out

    async def _resume(self, side: Side, runs: list[Run]) -> tuple[list[float], list[float]]:
        """Approve `resume_samples` of the waiting prompts, spread from the oldest to the newest (the oldest
        are long out of a small workflow cache), one at a time: ms from the decision sent to its result shown
        by a query. The call id is the scripted model's, so nothing queries (and pages in) a prompt before.
        Each is followed by a fresh 1-round prompt (start -> result) on the same worker, for comparison."""
        count = min(self.cfg.resume_samples, len(runs))
        step = max(1, len(runs) // max(count, 1))
        resumed, fresh = [], []
        for run in runs[::step][:count]:
            resumed.append(await _approve_and_see_result(side, run, RESUME_CALL_ID) * 1000)
            fresh.append(await side.run(Scenario(rounds=1)) * 1000)
        return resumed, fresh

    async def _close_waiting(self, side: Side, runs: list[Run]) -> None:
        """Terminate the prompts still waiting, so that the next side's approvals list is its own."""
        async def close(run: Run) -> None:
            try:
                await run.wf.terminate(reason="bench: waiting section over")
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
        await bounded_gather([lambda r=run: close(r) for run in runs], self.cfg.start_concurrency)

    @staticmethod
    def _worker(side: Side) -> WorkerProcess:
        assert side.worker is not None
        return side.worker

    async def _fill_waiting(self, side: Side) -> list[Run]:
        """Start the prompts in batches, each once the previous batch waits: a steady stream of arrivals
        rather than 1,000 simultaneous starts (which would mostly measure a workflow-cache stampede)."""
        cfg = self.cfg
        runs: list[Run] = []
        while len(runs) < cfg.waiting_prompts:
            batch = min(cfg.waiting_batch, cfg.waiting_prompts - len(runs))
            runs += await bounded_gather([lambda: side.start(Scenario(rounds=1, approve=1))] * batch,
                                         cfg.start_concurrency)
            await self._all_waiting(side, len(runs))
        return runs

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


def _spread(values: list[float]) -> list[float]:
    """The least and the largest sample."""
    return [min(values), max(values)] if values else []


async def _approve_and_see_result(side: Side, run: Run, call_id: str) -> float:
    """Seconds from sending the approval to the call's result being visible through the side's client."""
    t0 = time.perf_counter()
    await side.approve(run, call_id)
    while True:
        if await side.result_visible(run, call_id):
            return time.perf_counter() - t0
        await asyncio.sleep(0.005)  # each poll is a query the worker answers: do not flood it
