"""Cancelling a prompt stops its running tool within about a second (measured through a ledger).

Before, the cancellation reached a tool only with a heartbeat sent every 0.8 x its heartbeat timeout
(16 s by default): a 12-second tool still ran to the end and had its side effect, a 45-second tool was
stopped ~15 s after the cancel.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from agent.context import ToolContext
from agent.models import ToolError, ToolOutput
from agent.plugins import Plugin
from agent.providers.scripted import ScriptedModel, text, tool_calls
from agent.tools import tool
from tests.support.workers import agent_worker

LEDGER: list[tuple[str, str, float]] = []  # (tool call key, event, time.monotonic())


class Work(BaseModel):
    seconds: float


@tool("work.async", timeout=timedelta(minutes=2))
async def async_work(args: Work, ctx: ToolContext) -> str:
    """Wait, then have a side effect."""
    LEDGER.append((ctx.idempotency_key, "started", time.monotonic()))
    try:
        await asyncio.sleep(args.seconds)
    except asyncio.CancelledError:
        LEDGER.append((ctx.idempotency_key, "stopped", time.monotonic()))
        raise
    LEDGER.append((ctx.idempotency_key, "side_effect", time.monotonic()))
    return "done"


@tool("work.blocking", timeout=timedelta(minutes=2))
async def blocking_work(args: Work, ctx: ToolContext) -> str:
    """Blocking work in a thread that checks ctx.cancelled between steps."""
    def steps() -> str:
        for _ in range(int(args.seconds * 10)):
            if ctx.cancelled:
                LEDGER.append((ctx.idempotency_key, "stopped", time.monotonic()))
                return "stopped"
            time.sleep(0.1)
        LEDGER.append((ctx.idempotency_key, "side_effect", time.monotonic()))
        return "done"

    LEDGER.append((ctx.idempotency_key, "started", time.monotonic()))
    return await asyncio.to_thread(steps)


plugin = Plugin("work", tools=[async_work, blocking_work])


def events(key: str) -> dict[str, float]:
    return {event: at for k, event, at in LEDGER if k == key}


async def cancel_while_running(env: WorkflowEnvironment, tool_id: str, seconds: float) -> tuple[dict[str, float],
                                                                                                 float, ToolOutput]:
    model = ScriptedModel(lambda r: tool_calls((tool_id, {"seconds": seconds})) if r.round == 1 else text("x"))
    async with agent_worker(env, plugins=[plugin], model=model) as client:
        handle = await client.start("work")
        for _ in range(600):
            prompt = await handle.get()
            if prompt.output:
                break
            await asyncio.sleep(0.05)
        entry = prompt.output[0]
        assert isinstance(entry, ToolOutput)
        key = f"{handle.id}/{entry.id}"
        for _ in range(600):
            if "started" in events(key):
                break
            await asyncio.sleep(0.05)
        cancelled_at = time.monotonic()
        await handle.cancel()
        prompt = await handle.result()
        for _ in range(600):  # until the tool stopped or had its side effect
            if {"stopped", "side_effect"} & set(events(key)):
                break
            await asyncio.sleep(0.05)
    assert prompt.state == "cancelled"
    final = prompt.output[0]
    assert isinstance(final, ToolOutput)
    return events(key), cancelled_at, final


async def test_cancel_stops_a_12_second_tool_before_its_side_effect(dev_env: WorkflowEnvironment) -> None:
    seen, cancelled_at, entry = await cancel_while_running(dev_env, "work.async", 12)
    assert "side_effect" not in seen and "stopped" in seen
    print(f"12 s tool stopped {seen['stopped'] - cancelled_at:.2f} s after the cancel")
    assert isinstance(entry.result, ToolError) and "cancelled" in entry.result.error


async def test_cancel_reaches_a_45_second_blocking_tool_through_ctx_cancelled(dev_env: WorkflowEnvironment) -> None:
    seen, cancelled_at, _ = await cancel_while_running(dev_env, "work.blocking", 45)
    assert "side_effect" not in seen and "stopped" in seen
    delay = seen["stopped"] - cancelled_at
    print(f"45 s tool stopped {delay:.2f} s after the cancel")
    assert delay < 10  # was ~15 s (heartbeat every 16 s); about 1 s now, loose for a loaded 2-core box
