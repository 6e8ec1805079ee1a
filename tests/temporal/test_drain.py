"""Graceful drain (issue 27): SIGTERM lets a running tool finish on its worker instead of running it twice.

Real dev server, workers as `dagent worker` subprocesses (tests/temporal/test_durability.py's rig). Worker A runs a
3-second tool (tests/support/drain_tools.py); A gets SIGTERM as soon as the tool starts, and worker B is
started. With the drain period longer than the tool, the tool finishes once, on A, A exits 0 after it, and
the prompt's next model round runs on B. With a period shorter than the tool, the tool is cancelled when the
period ends and runs again on B: the period is what `DAGENT_GRACEFUL_SHUTDOWN` says.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType

from durable_agent.client import PromptHandle
from durable_agent.workflows.names import MODEL_ROUND_ACTIVITY
from tests.support.jsonl import read_lines
from tests.temporal.test_durability import Rig, WorkerProcess


class DrainRig(Rig):
    grace = "20s"

    def worker_env(self) -> dict[str, str]:
        env = super().worker_env()
        env.update({"DAGENT_PLUGINS": "tests.support.drain_tools:plugin",
                    "DAGENT_MODEL_NORMAL": "scripted:tests.support.drain_tools:model",
                    "DAGENT_GRACEFUL_SHUTDOWN": self.grace})
        return env

    def marks(self) -> list[dict[str, Any]]:
        return read_lines(self.ledger)

    async def tool_started(self, wait_s: float = 20) -> dict[str, Any]:
        deadline = time.monotonic() + wait_s
        while not any(m["kind"] == "started" for m in self.marks()):
            assert time.monotonic() < deadline, f"the tool never started\n{self.diagnostics()}"
            await asyncio.sleep(0.05)
        return next(m for m in self.marks() if m["kind"] == "started")


@pytest_asyncio.fixture
async def rig(tmp_path: Path) -> AsyncIterator[DrainRig]:
    setup = DrainRig(tmp_path)
    try:
        await setup.start()
        yield setup
    finally:
        await setup.close()


async def _exited(worker: WorkerProcess, wait_s: float) -> tuple[int, float]:
    """The worker's exit code and the monotonic time it was seen gone."""
    deadline = time.monotonic() + wait_s
    while worker.alive():
        assert time.monotonic() < deadline, f"{worker.name} still running {wait_s:.0f} s after SIGTERM:\n" \
                                            f"{worker.tail()}"
        await asyncio.sleep(0.05)
    return worker.proc.returncode, time.monotonic()


async def _activity_workers(handle: PromptHandle) -> list[tuple[str, str]]:
    """(activity type, identity of the worker that started it) for every activity of the prompt, in order."""
    history = await handle.workflow.fetch_history()
    scheduled: dict[int, str] = {}
    started: list[tuple[str, str]] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            started.append((scheduled[attrs.scheduled_event_id], attrs.identity))
    return started


async def test_sigterm_lets_the_running_tool_finish_once_and_the_prompt_completes_elsewhere(rig: DrainRig) -> None:
    first = await rig.start_worker()
    handle = await rig.client.start("do the drain job", user_id="drain")
    started = await rig.tool_started()
    assert started["pid"] == first.pid
    first.proc.send_signal(signal.SIGTERM)
    signalled_at = time.monotonic()
    second = await rig.start_worker()
    code, gone_at = await _exited(first, 30)
    prompt = await rig.finish(handle, 40, "prompt after its worker was drained")

    marks = rig.marks()
    assert [(m["kind"], m["pid"]) for m in marks] == [("started", first.pid), ("finished", first.pid)], marks
    assert code == 0, first.tail()
    # A stayed up while its tool worked (not cancelled at once), then exited without waiting out the period.
    assert 1.5 < gone_at - signalled_at < 15, f"{gone_at - signalled_at:.1f} s\n{first.tail()}"
    assert "draining" in first.tail()
    assert prompt.output[-1].text == "result: report done"  # type: ignore[union-attr]
    runs = await _activity_workers(handle)
    tools = [identity for kind, identity in runs if kind != MODEL_ROUND_ACTIVITY]
    assert len(tools) == 1 and tools[0].startswith(f"{first.pid}@"), runs
    assert runs[-1][1].startswith(f"{second.pid}@"), f"the last model round ran on {runs[-1][1]}, not B: {runs}"


class ShortGraceRig(DrainRig):
    grace = "1s"


@pytest_asyncio.fixture
async def short_rig(tmp_path: Path) -> AsyncIterator[ShortGraceRig]:
    setup = ShortGraceRig(tmp_path)
    try:
        await setup.start()
        yield setup
    finally:
        await setup.close()


async def test_a_tool_longer_than_the_period_is_cancelled_at_its_end_and_runs_again(short_rig: ShortGraceRig) -> None:
    rig = short_rig
    first = await rig.start_worker()
    handle = await rig.client.start("do the drain job", user_id="drain")
    await rig.tool_started()
    first.proc.send_signal(signal.SIGTERM)
    signalled_at = time.monotonic()
    code, gone_at = await _exited(first, 20)
    second = await rig.start_worker()
    await rig.finish(handle, 60, "prompt after a short drain")

    kinds = [(m["kind"], m["pid"], m["attempt"]) for m in rig.marks()]
    assert kinds == [("started", first.pid, 1), ("cancelled", first.pid, 1),
                     ("started", second.pid, 2), ("finished", second.pid, 2)], kinds
    assert code == 0, first.tail()
    assert gone_at - signalled_at < 2.9, f"A waited {gone_at - signalled_at:.1f} s, more than its 1 s period"


def test_compose_gives_the_worker_longer_than_its_drain_period() -> None:
    """docker-compose.yml: the engine's SIGKILL comes after the worker's own drain period has run out."""
    from durable_agent.config.durations import parse_duration
    from durable_agent.workers.settings import Settings
    from tests.temporal.test_compose import _resolved_config

    worker = _resolved_config()["services"]["worker"]
    grace = Settings.from_env({"DAGENT_GRACEFUL_SHUTDOWN": worker["environment"]["DAGENT_GRACEFUL_SHUTDOWN"]})
    assert worker.get("stop_signal", "SIGTERM") == "SIGTERM"
    assert parse_duration(worker["stop_grace_period"]) >= grace.graceful_shutdown + timedelta(seconds=10)


def test_drain_period_setting() -> None:
    from durable_agent.workers.settings import Settings

    assert Settings.from_env({}).graceful_shutdown == timedelta(seconds=30)
    assert Settings.from_env({"DAGENT_GRACEFUL_SHUTDOWN": "1m30s"}).graceful_shutdown == timedelta(seconds=90)
    assert Settings.from_env({"DAGENT_GRACEFUL_SHUTDOWN": "0"}).graceful_shutdown == timedelta(0)
    with pytest.raises(ValueError, match="DAGENT_GRACEFUL_SHUTDOWN must be a duration such as 30s") as info:
        Settings.from_env({"DAGENT_GRACEFUL_SHUTDOWN": "soon"})
    assert "\n" not in str(info.value)
