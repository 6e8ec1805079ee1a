"""What a prompt costs in Temporal billable actions, counted by the server itself (its `action` metric), with the
real OpenAI provider against a model that answers at a real model's pace.

Before, the model and tool activities heartbeated every 0.5 s: a 2-second model call cost 3-4
`RecordActivityTaskHeartbeat` actions, a prompt of 3 such calls ~11 more actions than a hand-rolled loop's. Now
a call heartbeats once per 0.8 x its heartbeat timeout (liveness), streamed text rides those beats unless
`stream_text=True` asks for it live, and a cancellation reaches a running call through a free long poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest_asyncio
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from bench.actions import HEARTBEAT, settled, since
from bench.paced_llm import FakeCall, Pace, PacedLLM, function_call_outputs_after_last_user, serve_paced_llm
from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers import OpenAIResponsesProvider
from durable_agent.agent.tools import tool
from durable_agent.workflows.protocol import TextDelta
from tests.support.workers import agent_worker

TWO_SECOND_CALL = Pace(first_token_seconds=0.8, tokens=60, tokens_per_second=50)  # 2.0 s, streamed
ROUNDS = 2  # tool rounds per prompt: 3 model calls


class Numbers(BaseModel):
    a: int
    b: int


class Wait(BaseModel):
    seconds: float


@tool("math.add", local=False)
async def add(args: Numbers, ctx: ToolContext) -> int:
    """Add two numbers."""
    return args.a + args.b


@tool("work.wait", local=False, heartbeat_timeout=timedelta(seconds=2), timeout=timedelta(minutes=2))
async def wait(args: Wait, ctx: ToolContext) -> str:
    """Wait this long (heartbeat timeout 2 s: liveness beats every 1.6 s)."""
    await asyncio.sleep(args.seconds)
    return "waited"


PLUGIN = Plugin("costs", tools=[add, wait])


def _respond(body: dict[str, Any]) -> Sequence[FakeCall]:
    text, results = function_call_outputs_after_last_user(body)
    if text.startswith("wait"):
        return [FakeCall("work.wait", {"seconds": float(text.split()[1])})] if results == 0 else []
    return [FakeCall("math.add", {"a": results, "b": 1})] if results < ROUNDS else []


@pytest_asyncio.fixture(scope="module")
async def metered() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    """A dev server of its own with `--metrics-port`, so the actions counted are this module's alone."""
    from durable_agent.cli.devserver import extra_args_for_start_local
    from durable_agent.cli.devserver.binaries import temporal_cli_path
    from durable_agent.cli.devserver.ports import free_port
    from durable_agent.workers.plugin import DurableAgentPlugin
    from tests.support.workers import TEST_SETTINGS

    port = free_port()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(), plugins=[DurableAgentPlugin(TEST_SETTINGS)],
        dev_server_extra_args=[*extra_args_for_start_local(), "--metrics-port", str(port)])
    async with env:
        yield env, f"http://127.0.0.1:{port}/metrics"


@pytest_asyncio.fixture
async def paced() -> AsyncIterator[tuple[PacedLLM, OpenAIResponsesProvider]]:
    llm = PacedLLM(_respond, pace=TWO_SECOND_CALL)
    async with serve_paced_llm(llm) as base_url:
        yield llm, OpenAIResponsesProvider(model="paced-model", api_key="sk-test", base_url=base_url, timeout=60)


async def test_two_second_model_calls_send_no_heartbeat(metered: tuple[WorkflowEnvironment, str],
                                                         paced: tuple[PacedLLM, OpenAIResponsesProvider]) -> None:
    """Calls shorter than 0.8 x their heartbeat timeout (model 10 s, tool 20 s) need no liveness beat, and
    streamed text without a live watcher asked for rides none: the prompt costs what its activities cost."""
    env, metrics = metered
    llm, provider = paced
    async with agent_worker(env, plugins=[PLUGIN], model=provider) as client:
        before = await settled(metrics)
        prompt = await (await client.start("add twice")).result()
        used = since(await settled(metrics), before)
    assert prompt.state == "completed", prompt.error
    assert len([o for o in prompt.output if isinstance(o, ToolOutput)]) == ROUNDS
    assert len(llm.calls) == ROUNDS + 1 and all(served >= 1.9 for _, served in llm.calls)
    assert used[HEARTBEAT] == 0, used  # was 3-4 per 2 s call (every 0.5 s)
    activities = used["command_ScheduleActivityTask"]
    # a hand-rolled loop: one start + one activity per model call and per tool call, no heartbeat
    assert sum(used.values()) <= 1 + (ROUNDS + 1) + ROUNDS, used
    assert 1 <= activities <= 2 * ROUNDS + 1, used


async def test_live_text_costs_heartbeats_only_when_asked_for(metered: tuple[WorkflowEnvironment, str],
                                                              paced: tuple[PacedLLM, OpenAIResponsesProvider]) -> None:
    """`stream_text=True` (DAGENT_STREAM_TEXT=1): a watcher sees the text while the model streams it, at one
    heartbeat per 0.5 s of streaming."""
    env, metrics = metered
    _, provider = paced
    async with agent_worker(env, plugins=[PLUGIN], model=provider, stream_text=True) as client:
        before = await settled(metrics)
        handle = await client.start("add twice")
        deltas = [item async for _, item in handle.live() if isinstance(item, TextDelta)]
        prompt = await handle.result()
        used = since(await settled(metrics), before)
    assert prompt.state == "completed", prompt.error
    assert deltas and {d.round for d in deltas} >= {1}, "no streamed text reached the watcher"
    assert all(TWO_SECOND_CALL.text()[d.offset:d.offset + len(d.text)] == d.text for d in deltas)
    # 3 calls streaming ~1.2 s each: 2-3 beats each; far fewer than every chunk, more than none
    assert 3 <= used[HEARTBEAT] <= 4 * (ROUNDS + 1), used


async def test_a_long_call_beats_once_per_share_of_its_heartbeat_timeout(
        metered: tuple[WorkflowEnvironment, str], paced: tuple[PacedLLM, OpenAIResponsesProvider]) -> None:
    """Liveness still holds: a 5 s tool with a 2 s heartbeat timeout finishes (it would time out without beats),
    at 3 beats (1.6 s apart), not 10."""
    env, metrics = metered
    llm, provider = paced
    llm.pace = Pace(first_token_seconds=0.0, tokens=3, tokens_per_second=0)
    async with agent_worker(env, plugins=[PLUGIN], model=provider) as client:
        before = await settled(metrics)
        prompt = await (await client.start("wait 5")).result()
        used = since(await settled(metrics), before)
    assert prompt.state == "completed", prompt.error
    entry = next(o for o in prompt.output if isinstance(o, ToolOutput))
    assert entry.result.model_dump().get("output") == "waited", entry.result
    assert 2 <= used[HEARTBEAT] <= 4, used


async def test_cancel_reaches_a_running_call_within_a_second_for_one_heartbeat(
        metered: tuple[WorkflowEnvironment, str], paced: tuple[PacedLLM, OpenAIResponsesProvider]) -> None:
    """A cancelled prompt closes at once; the call notices the close through a long poll (no action) and one
    heartbeat brings it the cancellation: the tool stops within about a second, whatever the liveness cadence."""
    env, metrics = metered
    llm, provider = paced
    llm.pace = Pace(first_token_seconds=0.0, tokens=3, tokens_per_second=0)
    stopped: list[float] = []

    @tool("work.long", local=False, timeout=timedelta(minutes=2))
    async def long_work(args: Wait, ctx: ToolContext) -> str:
        """Work for a long time."""
        try:
            await asyncio.sleep(args.seconds)
        except asyncio.CancelledError:
            stopped.append(time.monotonic())
            raise
        return "done"

    def respond(body: dict[str, Any]) -> Sequence[FakeCall]:
        return [] if function_call_outputs_after_last_user(body)[1] else [FakeCall("work.long", {"seconds": 60})]

    llm.respond = respond
    async with agent_worker(env, plugins=[Plugin("long", tools=[long_work])], model=provider) as client:
        handle = await client.start("work long")
        await handle.wait_until("running")
        for _ in range(200):
            if any(isinstance(o, ToolOutput) for o in (await handle.get()).output):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)  # well into the call: its close watch is on
        before = await settled(metrics)
        cancelled_at = time.monotonic()
        await handle.cancel()
        prompt = await handle.result()
        for _ in range(100):
            if stopped:
                break
            await asyncio.sleep(0.05)
        used = since(await settled(metrics), before)
    assert prompt.state == "cancelled"
    assert stopped, "the tool was still running 5 s after the cancel"
    delay = stopped[0] - cancelled_at
    assert delay < 1.5, f"the cancel reached the tool {delay:.2f} s after it was sent"
    assert used[HEARTBEAT] <= 1, used  # the one that brought the cancellation (its liveness beat is 16 s away)
