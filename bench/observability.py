"""Per-round cost of tracing: off (the default) against on (OTLP/HTTP to a receiver on loopback), in one run.

    .venv/bin/python -m bench.observability            # 2 cycles, 5 prompts per size and mode
    .venv/bin/python -m bench.observability --quick    # 1 cycle, 3 prompts

Starts a headless dev server and an OTLP/HTTP receiver on loopback (decodes each export with
opentelemetry-proto and counts the spans), then alternates worker subprocesses (``python -m cli worker``
with ``bench.plugin``): tracing off (no OTEL_* variables) and on (``OTEL_EXPORTER_OTLP_ENDPOINT`` at the
receiver). Per-round cost = (median latency of 20-round prompts - median of 2-round prompts) / 18, so the
fixed cost of a prompt cancels out. The client is the same untraced one for both modes; what is measured is
the worker's side. "Off" has no worker to compare with that lacks the instrumentation, so the bench also
times the instrumentation's calls on OpenTelemetry's no-op tracer (what "off" runs per round) and divides by
the per-round time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path

from opentelemetry import trace

from bench.config import REPO
from bench.otlp_receiver import OtlpReceiver
from bench.scenario import Scenario
from bench.sides import WorkerProcess
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings

SHORT, LONG = 2, 20


def worker_env(address: str, queue: str, workdir: Path, otlp: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({
        "TEMPORAL_ADDRESS": address, "DAGENT_TASK_QUEUE": queue, "DAGENT_PLUGINS": "bench.plugin:plugin",
        "DAGENT_MODEL_NORMAL": "scripted:bench.plugin:model", "DAGENT_LOG_LEVEL": "WARNING",
        "DAGENT_PAYLOAD_DIR": str(workdir / "payloads"), "DAGENT_FILE_DIR": str(workdir / "files"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
    })
    if otlp:
        env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": otlp, "OTEL_SERVICE_NAME": "dagent-bench"})
    return env


async def wait_ready(worker: WorkerProcess) -> None:
    while "worker on " not in worker.log_path.read_text(errors="replace"):
        worker.check_alive()
        await asyncio.sleep(0.05)


async def measure(agent: AgentClient, rounds: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        prompt = await agent.run(Scenario(rounds=rounds).text(), user_id="bench", max_rounds=rounds + 1)
        times.append(time.perf_counter() - t0)
        if prompt.state != "completed" or prompt.rounds != rounds + 1:
            raise RuntimeError(f"bench prompt ended {prompt.state} after {prompt.rounds} rounds: {prompt.error}")
    return statistics.median(times)


def noop_instrumentation_seconds_per_round() -> float:
    """What tracing-off runs per round: the spans of a round on OpenTelemetry's no-op tracer."""
    assert not trace.get_tracer_provider().__class__.__name__.startswith("ReplaySafe")
    tracer = trace.get_tracer("durable_agent")

    def one_round() -> None:
        for name in ("dagent.round", "chat bench", "dagent.tool_call", "execute_tool bench.echo"):
            with tracer.start_as_current_span(name, attributes={"dagent.round": 1}) as span:
                span.set_attribute("dagent.tool.outcome", "success")

    number = 20_000
    return min(timeit.repeat(one_round, number=number, repeat=3)) / number


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cycles, repeats = (1, 3) if args.quick else (2, 5)
    workdir = Path(tempfile.mkdtemp(prefix="dagent-bench-otel-"))
    server = DevServer(db_file=workdir / "temporal.db", ui_port=None)
    await server.start_async()
    per_round: dict[str, list[float]] = {"off": [], "on": []}
    try:
        with OtlpReceiver() as receiver:
            settings = Settings(temporal_address=server.address, payload_dir=str(workdir / "payloads"))
            client = (await AgentClient.connect(settings)).client  # untraced: no OTEL_* in this process
            for cycle in range(cycles):
                for mode in ("off", "on"):
                    queue = f"bench-otel-{mode}-{uuid.uuid4().hex[:6]}"
                    worker = WorkerProcess(mode, [sys.executable, "-m", "durable_agent.cli", "worker"],
                                           worker_env(server.address, queue, workdir,
                                                      receiver.endpoint if mode == "on" else None),
                                           workdir / f"worker-{mode}-{cycle}.log")
                    worker.start()
                    try:
                        await wait_ready(worker)
                        agent = AgentClient(client, settings.model_copy(update={"task_queue": queue}))
                        await measure(agent, SHORT, 2)  # warm-up
                        short = await measure(agent, SHORT, repeats)
                        long = await measure(agent, LONG, repeats)
                    finally:
                        worker.stop()
                    cost = (long - short) / (LONG - SHORT)
                    per_round[mode].append(cost)
                    print(f"cycle {cycle + 1} tracing {mode:3}: {SHORT} rounds {short * 1000:7.1f} ms, "
                          f"{LONG} rounds {long * 1000:7.1f} ms -> {cost * 1000:6.2f} ms per round", flush=True)
            spans = len(receiver.received())
    finally:
        await server.stop_async()
    off, on = statistics.median(per_round["off"]), statistics.median(per_round["on"])
    noop = noop_instrumentation_seconds_per_round()
    print(f"\nper round: off {off * 1000:.2f} ms, on {on * 1000:.2f} ms; on/off = {on / off:.3f} "
          f"({(on / off - 1) * 100:+.1f} %, target <= +10 %)")
    print(f"off: the instrumentation on the no-op tracer costs {noop * 1e6:.1f} us per round = "
          f"{noop / off * 100:.3f} % of a round")
    # a prompt of r tool rounds: 1 prompt span, r + 1 rounds and model calls, r tool calls and executions
    expected = cycles * ((2 + repeats) * (4 * SHORT + 3) + repeats * (4 * LONG + 3))
    print(f"spans received over OTLP by the receiver: {spans} (expected {expected})")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can crash at interpreter teardown (sdk-python#300)
