"""Where a worker spends CPU per prompt: the throughput scenario under cProfile, per side, split by thread.

    .venv/bin/python -m bench.profile_worker                        # all three sides, profiled
    .venv/bin/python -m bench.profile_worker --no-profile --bursts 3  # CPU per prompt only (no profiler overhead)
    .venv/bin/python -m bench.profile_worker --sides durable-agent-sandbox-off --top 40 --keep bench/results/prof

Starts its own dev server (`cli.devserver.DevServer`), then for each side a worker subprocess built the
way `dagent worker` builds it (`Settings.from_env`, `build_runtime`, `connect`, `create_worker`, with the
bench plugin and scripted model; `durable-agent-sandbox-off`: `DAGENT_WORKFLOW_SANDBOX=off`) or the way
`bench.baseline` does. The only difference: the worker gets a thread pool for workflow activations that
profiles each activation and records which threads ran them. After a warm-up, the parent starts bursts of
concurrent 3-round prompts (as `bench.run --sections throughput` does) between SIGUSR1 (measure) and SIGUSR2
(stop and report). The worker reports CPU per prompt by thread (`/proc/self/task/*/stat`):

* `workflow` - the activation threads: workflow code, the SDK's workflow instance, the sandbox, payload
  conversion of workflow inputs and results;
* `main` - the asyncio thread: activities, the SDK's pollers and completions, payload codec/storage;
* `core` - every other thread (the SDK's Rust core and gRPC, tokio).

With profiling on, it also prints the top functions by self time and by cumulative time in the workflow
threads and in the main thread, and self time grouped by package. The profiler slows Python code (about
1.5-2.5x), so compare the `--no-profile` CPU figures between commits and use the profile for where it goes.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import cProfile
import io
import json
import os
import pstats
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from bench.config import BASELINE, PRODUCT, PRODUCT_UNSANDBOXED, log
from bench.scenario import Scenario

SIDES = (PRODUCT, PRODUCT_UNSANDBOXED, BASELINE)
SCRIPT = Path(__file__).resolve()
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Self time grouped by where the code lives: first matching fragment of the file path wins.
GROUPS = (
    ("project: workflows/", "/workflows/"), ("project: activities/", "/activities/"), ("project: agent/", "/agent/"),
    ("project: workers/", "/workers/"), ("bench", "/bench/"),
    ("temporalio sandbox", "/temporalio/worker/workflow_sandbox/"),
    ("temporalio workflow instance", "/temporalio/worker/_workflow_instance"),
    ("temporalio converter", "/temporalio/converter"), ("temporalio contrib", "/temporalio/contrib/"),
    ("temporalio other", "/temporalio/"), ("pydantic", "/pydantic"), ("opentelemetry", "/opentelemetry/"),
    ("structlog", "/structlog/"), ("protobuf", "/google/protobuf/"),
    ("builtins (C)", "~"), ("stdlib asyncio", "/asyncio/"), ("stdlib", "/lib/python3"),
)


# --- the worker process -----------------------------------------------------------------------------


class ProfilingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The workflow activation pool: while `measuring`, each activation runs under its thread's profiler."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="temporal_workflow_")
        self.measuring = False
        self.profile = True
        self.thread_ids: set[int] = set()
        self.profilers: list[cProfile.Profile] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        return super().submit(self._run, fn, *args, **kwargs)

    def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self.measuring:
            return fn(*args, **kwargs)
        profiler = self._profiler() if self.profile else None
        if profiler is None:
            return fn(*args, **kwargs)
        profiler.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            profiler.disable()

    def _profiler(self) -> cProfile.Profile:
        profiler = getattr(self._local, "profiler", None)
        if profiler is None:
            profiler = self._local.profiler = cProfile.Profile(time.thread_time)
            with self._lock:
                self.profilers.append(profiler)
                self.thread_ids.add(threading.get_native_id())
        return profiler

    def note_threads(self) -> None:
        """Activation threads are known once they ran one activation: record them all (without profiling)."""
        self.thread_ids.update(t.native_id for t in threading.enumerate()
                               if t.name.startswith("temporal_workflow_") and t.native_id is not None)


def thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process."""
    out: dict[int, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return out


def process_cpu() -> float:
    times = os.times()
    return times.user + times.system


async def serve(side: str, report_path: Path, profile: bool) -> None:
    from temporalio.worker import Worker

    executor = ProfilingExecutor(max_workers=500)
    executor.profile = profile
    if side == BASELINE:
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        from bench.baseline import BaselineWorkflow, model_activity, tool_activity

        client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], data_converter=pydantic_data_converter)
        worker = Worker(client, task_queue=os.environ["DAGENT_TASK_QUEUE"], workflows=[BaselineWorkflow],
                        activities=[model_activity, tool_activity], workflow_task_executor=executor)
    else:
        from durable_agent.agent.logging import configure_logging
        from durable_agent.workers.settings import Settings
        from durable_agent.workers.worker import build_runtime, connect, create_worker

        settings = Settings.from_env()
        configure_logging(settings.log_level)
        runtime = build_runtime(settings)
        client = await connect(settings, metrics=True)
        worker = create_worker(client, runtime, task_queue=settings.task_queue, settings=settings,
                               workflow_task_executor=executor)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    main_profiler = cProfile.Profile(time.thread_time)  # CPU, not wall time (no epoll waits)
    start: dict[str, Any] = {}
    totals: dict[str, Any] = {"cpu": 0.0, "wall": 0.0, "windows": 0, "threads": defaultdict(float),
                              "window_cpu": []}

    def begin() -> None:
        executor.note_threads()
        start.update(cpu=process_cpu(), threads=thread_cpu(), wall=time.perf_counter())
        executor.measuring = True
        if profile:
            main_profiler.enable()

    def end() -> None:
        """Add this window to the totals and write them (with the profiles so far) to the report."""
        if profile:
            main_profiler.disable()
        executor.measuring = False
        executor.note_threads()
        totals["wall"] += time.perf_counter() - start["wall"]
        totals["window_cpu"].append(process_cpu() - start["cpu"])
        totals["cpu"] += totals["window_cpu"][-1]
        totals["windows"] += 1
        main_id = threading.main_thread().native_id
        for tid, cpu in thread_cpu().items():
            kind = "main" if tid == main_id else "workflow" if tid in executor.thread_ids else "core"
            totals["threads"][kind] += cpu - start["threads"].get(tid, 0.0)
        if profile:
            main_profiler.dump_stats(report_path.with_suffix(".main.prof"))
            if executor.profilers:
                stats = pstats.Stats(executor.profilers[0])
                for other in executor.profilers[1:]:
                    stats.add(other)
                stats.dump_stats(report_path.with_suffix(".workflow.prof"))
        report_path.with_suffix(".tmp").write_text(json.dumps(totals))
        report_path.with_suffix(".tmp").replace(report_path)  # whole, never half-written

    loop.add_signal_handler(signal.SIGUSR1, begin)
    loop.add_signal_handler(signal.SIGUSR2, end)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with worker:
        print("ready", flush=True)
        await stop.wait()


# --- the driver -------------------------------------------------------------------------------------


def group_of(filename: str) -> str:
    return next((name for name, fragment in GROUPS if fragment in filename), "other")


def grouped_self_time(stats: pstats.Stats) -> list[tuple[str, float]]:
    groups: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        groups[group_of(filename)] += tottime
    return sorted(groups.items(), key=lambda item: -item[1])


def top(stats: pstats.Stats, sort: str, count: int) -> str:
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(count)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return "\n".join(lines[start:])


def describe_profile(path: Path, title: str, prompts: int, count: int) -> None:
    if not path.exists():
        return
    stats = pstats.Stats(str(path))
    total = sum(tottime for (_, _, tottime, _, _) in stats.stats.values())  # type: ignore[attr-defined]
    print(f"\n### {title}: {total * 1000 / prompts:.1f} ms profiled per prompt (self time, under the profiler)")
    for group, seconds in grouped_self_time(stats):
        print(f"  {group:32s} {seconds * 1000 / prompts:7.2f} ms/prompt  {100 * seconds / total:5.1f} %")
    stats.strip_dirs()
    print(f"\n-- top {count} by self time (seconds over all {prompts} prompts)")
    print(top(stats, "tottime", count))
    print(f"\n-- top {count} by cumulative time")
    print(top(stats, "cumulative", count))


def side_env(side: str, address: str, task_queue: str, workdir: Path, repo: Path) -> dict[str, str]:
    from bench.sides import product_worker_env

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH", "")) if p)
    if side == BASELINE:
        return env | {"TEMPORAL_ADDRESS": address, "DAGENT_TASK_QUEUE": task_queue}
    sandbox = "off" if side == PRODUCT_UNSANDBOXED else "on"
    return env | product_worker_env(address, task_queue, workdir, sandbox=sandbox)


def _append(path: Path) -> BinaryIO:
    return open(path, "ab")


class SideWorker:
    """One side's worker process and the client side that drives its prompts."""

    def __init__(self, name: str, address: str, workdir: Path, args: argparse.Namespace, repo: Path) -> None:
        self.name, self.address, self.workdir, self.args, self.repo = name, address, workdir, args, repo
        self.kind = name.split("@")[0]  # "durable-agent+sandbox@before": that side, run from another checkout
        self.task_queue = f"prof-{name}-{uuid.uuid4().hex[:6]}"
        self.report = workdir / f"{name}.json"
        self.log_path = workdir / f"worker-{name}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.side: Any = None
        self.prompts = 0
        self.elapsed = 0.0

    async def start(self) -> None:
        from temporalio.client import Client
        from temporalio.contrib.pydantic import pydantic_data_converter

        from bench.sides import BaselineSide, ProductSide, product_settings
        from durable_agent.workers.worker import connect

        # this file run as a script: its imports (the workers, the bench plugin) come from `repo`
        cmd = [sys.executable, str(SCRIPT), "serve", "--side", self.kind, "--report", str(self.report)]
        if self.args.no_profile:
            cmd.append("--no-profile")
        with _append(self.log_path) as out:
            self.proc = await asyncio.create_subprocess_exec(
                *cmd, env=side_env(self.kind, self.address, self.task_queue, self.workdir, self.repo), cwd=self.repo,
                stdout=asyncio.subprocess.PIPE, stderr=out)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if line.strip() != b"ready":
            raise RuntimeError(f"{self.name} worker did not start: {self.log_path.read_text()[-2000:]}")
        if self.kind == BASELINE:
            client = await Client.connect(self.address, data_converter=pydantic_data_converter)
            self.side = BaselineSide(client, self.address, self.workdir, {})
        else:
            client = await connect(product_settings(self.address, self.workdir))
            self.side = ProductSide(client, self.address, self.workdir, {},
                                    sandbox="off" if self.kind == PRODUCT_UNSANDBOXED else "on")
        self.side.task_queue = self.task_queue
        for _ in range(self.args.warmup):
            await self.side.finish(await self.side.start(Scenario(rounds=self.args.rounds)))

    async def burst(self) -> None:
        """One measured burst of concurrent prompts."""
        assert self.proc is not None
        windows = json.loads(self.report.read_text())["windows"] if self.report.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        await asyncio.sleep(0.2)
        t0 = time.perf_counter()
        scenario = Scenario(rounds=self.args.rounds)
        runs = await asyncio.gather(*(self.side.start(scenario) for _ in range(self.args.prompts)))
        await asyncio.gather(*(self.side.finish(r) for r in runs))
        self.elapsed += time.perf_counter() - t0
        self.prompts += self.args.prompts
        self.proc.send_signal(signal.SIGUSR2)
        for _ in range(600):
            if self.report.exists() and json.loads(self.report.read_text())["windows"] > windows:
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{self.name} worker did not report (log {self.log_path})")

    def result(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.report.read_text())
        result.update(prompts=self.prompts, elapsed=self.elapsed)
        return result

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()


async def drive(args: argparse.Namespace, workdir: Path, db_dir: Path) -> dict[str, dict[str, Any]]:
    """Every side's worker runs throughout; bursts go to the sides in turn (rotated each round), so a change
    in the machine's load falls on all sides alike."""
    from durable_agent.cli.devserver import DevServer

    server = DevServer(db_file=db_dir / f"dagent-prof-{uuid.uuid4().hex[:8]}.db", log_file=workdir / "temporal.log")
    await server.start_async()
    from bench.config import REPO

    workers = [SideWorker(name, server.address, workdir, args, REPO) for name in args.sides]
    if args.before:
        workers += [SideWorker(f"{name}@before", server.address, workdir, args, args.before.resolve())
                    for name in args.sides if name != BASELINE]
    try:
        for worker in workers:
            await worker.start()
        log(f"{len(workers)} worker(s) warm; {args.bursts} burst(s) each of {args.prompts} concurrent "
            f"{args.rounds}-round prompts, sides in turn")
        for rep in range(args.bursts):
            for worker in workers[rep % len(workers):] + workers[:rep % len(workers)]:
                await worker.burst()
            log(f"burst {rep + 1}, worker CPU ms/prompt: "
                + "; ".join(f"{w.name} {cpu_line(w.result(), short=True)}" for w in workers))
        return {worker.name: worker.result() for worker in workers}
    finally:
        for worker in workers:
            await worker.stop()
        await server.stop_async()
        assert server.db_file is not None
        for leftover in Path(server.db_file).parent.glob(Path(server.db_file).name + "*"):
            leftover.unlink(missing_ok=True)


def per_burst(result: dict[str, Any]) -> list[float]:
    """Worker CPU ms per prompt of each burst."""
    per_window = result["prompts"] / len(result["window_cpu"])
    return [cpu * 1000 / per_window for cpu in result["window_cpu"]]


def cpu_line(result: dict[str, Any], *, short: bool = False) -> str:
    per = 1000 / result["prompts"]
    threads = result["threads"]
    bursts = per_burst(result)
    if short:
        return f"{bursts[-1]:.1f} ms"
    return (f"worker CPU {result['cpu'] * per:.1f} ms/prompt (workflow threads {threads.get('workflow', 0) * per:.1f}, "
            f"main {threads.get('main', 0) * per:.1f}, core {threads.get('core', 0) * per:.1f}); by burst "
            f"{', '.join(f'{b:.1f}' for b in bursts)} (median {statistics.median(bursts):.1f}, min {min(bursts):.1f}); "
            f"{result['prompts'] / result['elapsed']:.1f} prompts/s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_worker", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="drive", choices=("drive", "serve"), help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated subset of {','.join(SIDES)}")
    parser.add_argument("--prompts", type=int, default=100, help="concurrent prompts per burst (default 100)")
    parser.add_argument("--bursts", type=int, default=2, help="bursts measured per side (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="tool rounds per prompt (default 3)")
    parser.add_argument("--warmup", type=int, default=3, help="prompts run one by one before measuring")
    parser.add_argument("--no-profile", action="store_true", help="CPU per prompt only, no profiler")
    parser.add_argument("--top", type=int, default=25, help="functions listed per table (default 25)")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT",
                        help="also run each project side from this checkout of another commit (sides `<side>@before`, "
                             "e.g. from `git archive <commit> | tar -x -C DIR`), interleaved with this one's")
    parser.add_argument("--keep", type=Path, help="copy the .prof files (pstats) and reports to this directory")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        asyncio.run(serve(args.side, args.report, profile=not args.no_profile))
        sys.stdout.flush()
        os._exit(0)  # temporalio/sdk-python#300: a crash at interpreter exit would hide nothing but the code
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    unknown = sorted(set(args.sides) - set(SIDES))
    if unknown:
        parser.error(f"unknown sides {unknown}; choose from {','.join(SIDES)}")
    workdir = Path(tempfile.mkdtemp(prefix="dagent-prof-"))
    try:
        db_dir = Path("/dev/shm") if Path("/dev/shm").is_dir() else workdir
        results = asyncio.run(drive(args, workdir, db_dir))
        for name, result in results.items():
            prompts = result["prompts"]
            print(f"\n## {name}: {cpu_line(result)}")
            if not args.no_profile:
                describe_profile(workdir / f"{name}.workflow.prof", f"{name} workflow threads", prompts, args.top)
                describe_profile(workdir / f"{name}.main.prof", f"{name} main thread", prompts, args.top)
        if BASELINE in results:
            base = results[BASELINE]
            ratios = [f"{name} {r['cpu'] / r['prompts'] / (base['cpu'] / base['prompts']):.2f}x; "
                      f"{statistics.median(per_burst(r)) / statistics.median(per_burst(base)):.2f}x; "
                      f"{min(per_burst(r)) / min(per_burst(base)):.2f}x"
                      for name, r in results.items() if name != BASELINE]
            print("\nworker CPU per prompt, ratio to the baseline (all bursts; median burst; least burst): "
                  + ", ".join(ratios))
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            for path in workdir.glob("*.prof"):
                shutil.copy(path, args.keep / path.name)
            (args.keep / "cpu.json").write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
