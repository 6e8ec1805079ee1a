"""Measuring helpers: time limits, worker start/stop, CPU and history statistics."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle

from bench.scenario import Scenario
from bench.sides import Side

T = TypeVar("T")


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
        # four tool calls: a worker learns from its first three which tools are fast (README, Fast tools)
        await guarded(side.run(Scenario(rounds=4)), [side], 90)
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


def store_bytes(db_file: Path | None) -> int | None:
    """The dev server's SQLite store in use, history and visibility alike: its pages less the free ones, as a
    reader sees them (the write-ahead log's committed frames included). None without a database file."""
    if db_file is None or not db_file.exists():
        return None
    with contextlib.closing(sqlite3.connect(f"{db_file.as_uri()}?mode=ro", uri=True, timeout=30)) as db:
        pages, free, size = (db.execute(f"PRAGMA {name}").fetchone()[0]
                             for name in ("page_count", "freelist_count", "page_size"))
    return int((pages - free) * size)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (linear interpolation between the closest ranks; with few samples, near the max)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


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
