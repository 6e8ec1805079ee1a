"""A worker killed during a long tool call is noticed by the heartbeat timeout, not the 5-minute timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.temporal.test_durability import Rig, ledger_lines, started_rig


@pytest_asyncio.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with started_rig(tmp_path, "tests.support.slow") as setup:
        yield setup


async def test_worker_killed_mid_tool_is_detected_by_heartbeat_timeout(rig: Rig) -> None:
    first = await rig.start_worker()
    handle = await rig.client.start("do the slow job")
    deadline = time.monotonic() + 20
    while not ledger_lines(rig.ledger):
        assert time.monotonic() < deadline, rig.diagnostics()
        await asyncio.sleep(0.1)
    first.sigkill()
    killed_at = time.monotonic()
    second = await rig.start_worker()
    prompt = await rig.finish(handle, 40, "prompt after the worker died mid-tool")
    recovered_after = time.monotonic() - killed_at
    attempts = ledger_lines(rig.ledger)
    assert [a["attempt"] for a in attempts] == [1, 2]
    assert attempts[0]["pid"] == first.pid and attempts[1]["pid"] == second.pid
    assert prompt.output[-1].text == "report done on attempt 2"  # type: ignore[union-attr]
    # Heartbeat timeout 3 s (+ retry backoff 1 s, worker start-up, sticky queue 2 s): far below 5 minutes.
    assert recovered_after < 20, f"took {recovered_after:.1f} s: the tool's heartbeat timeout did not apply"
