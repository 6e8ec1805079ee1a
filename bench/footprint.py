"""Cold starts: `dagent --help`, `dagent ls` and a worker process from spawn to its first poll.

A worker's first poll is seen from the server: `DescribeTaskQueue` lists a workflow poller on the worker's
fresh task queue. Each measurement is a new process (nothing cached in memory but the OS's file cache).
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from bench.config import REPO
from bench.sides import Side


def dagent_command() -> list[str]:
    """The `dagent` console script next to this interpreter (what a user runs), else `python -m`."""
    script = Path(sys.executable).parent / "dagent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "durable_agent.cli"]


def run_command(args: list[str], env: dict[str, str]) -> str:
    """Run one command to its end (it must succeed); its standard output."""
    done = subprocess.run(args, env=env, cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout.decode(errors="replace")


def time_command(args: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn to exit of one command (which must succeed)."""
    return time_and_cpu(args, env)[0]


def time_and_cpu(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds from spawn to exit, CPU seconds it used) of one command (which must succeed). The CPU
    time barely moves with the machine's load, which the wall time does not: it says what a quiet machine's
    wall time would be, about."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run_command(args, env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


async def has_poller(client: Client, task_queue: str) -> bool:
    reply = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace=client.namespace, task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW), retry=True)
    return bool(reply.pollers)


async def time_to_first_poll(side: Side, limit_s: float = 60.0) -> float:
    """Seconds from spawning `side`'s worker (on a fresh task queue) to the server seeing its first poll."""
    t0 = time.perf_counter()
    worker = side.start_worker("cold")
    try:
        while not await has_poller(side.client, side.task_queue):
            worker.check_alive()
            if time.perf_counter() - t0 > limit_s:
                raise TimeoutError(f"{side.name} worker did not poll within {limit_s:.0f} s")
            await asyncio.sleep(0.01)
        return time.perf_counter() - t0
    finally:
        side.stop_worker()
