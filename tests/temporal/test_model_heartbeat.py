"""A worker SIGKILLed in the middle of a model call: the call's heartbeat timeout (seconds, not the 5-minute
start-to-close timeout) lets another worker retry it promptly. Real dev server, real `dagent worker` processes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from durable_agent.workflows.prompt.round_input import MODEL_HEARTBEAT_TIMEOUT
from tests.temporal.test_durability import Rig, ledger_lines, started_rig


@pytest_asyncio.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with started_rig(tmp_path, "tests.support.slow_model") as setup:
        yield setup


async def test_model_call_stranded_on_a_killed_worker_is_retried_within_seconds(rig: Rig) -> None:
    assert MODEL_HEARTBEAT_TIMEOUT.total_seconds() <= 15
    first = await rig.start_worker()
    second = await rig.start_worker()  # already polling: the retry needs no worker start-up
    handle = await rig.client.start("answer slowly")
    deadline = time.monotonic() + 30
    while not ledger_lines(rig.ledger):
        assert time.monotonic() < deadline, rig.diagnostics()
        await asyncio.sleep(0.1)
    victim = first if ledger_lines(rig.ledger)[0]["pid"] == first.pid else second
    survivor = second if victim is first else first
    await asyncio.sleep(1.5)  # well inside the call: the provider is "generating"
    victim.sigkill()
    killed_at = time.monotonic()
    while len(ledger_lines(rig.ledger)) < 2:
        assert time.monotonic() - killed_at < 30, f"no retry 30 s after the kill\n{rig.diagnostics()}"
        await asyncio.sleep(0.1)
    retried_after = time.monotonic() - killed_at
    prompt = await rig.finish(handle, 30, "prompt after its model call's worker died")
    attempts = ledger_lines(rig.ledger)
    assert [(a["round"], a["attempt"]) for a in attempts] == [(1, 1), (1, 2)], attempts
    assert attempts[1]["pid"] == survivor.pid
    assert prompt.output[-1].text == "answered on attempt 2"  # type: ignore[union-attr]
    assert prompt.usage.model_calls == 1  # the lost call is not counted
    # Heartbeat timeout 10 s + retry backoff 1 s + a poll: about 12 s (it was 31 s with the 30 s timeout).
    assert retried_after < 20, f"retried {retried_after:.1f} s after the kill"
