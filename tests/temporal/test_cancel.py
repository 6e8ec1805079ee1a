"""Cancelling a prompt stops its running tool, or its streaming model call, within about a second (measured
through a ledger, and for the model through the HTTP stream the provider's SDK holds open); the record says
whether a cancelled call's side effect may have happened.

Before, the cancellation reached a tool only with a heartbeat sent every 0.8 x its heartbeat timeout
(16 s by default): a 12-second tool still ran to the end and had its side effect, a 45-second tool was
stopped ~15 s after the cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from datetime import timedelta

from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ToolError, ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers import OpenAIChatProvider
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.api.server import serve_in_background
from durable_agent.workflows.prompt.workflow import CANCELLED_WHILE_RUNNING, CANCELLED_WHILE_WAITING
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


@tool("work.approved", approval=Approval(reason="Needs a yes."))
async def approved_work(args: Work, ctx: ToolContext) -> str:
    """Work that needs an approval first."""
    LEDGER.append((ctx.idempotency_key, "started", time.monotonic()))
    return "done"


plugin = Plugin("work", tools=[async_work, blocking_work, approved_work])


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
        key = f"{handle.id}/{(await handle.workflow.describe()).run_id}/{entry.id}"  # run-scoped idempotency key
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
    assert entry.result == ToolError(error=CANCELLED_WHILE_RUNNING)  # "... its side effect may have happened."


async def test_cancel_reaches_a_45_second_blocking_tool_through_ctx_cancelled(dev_env: WorkflowEnvironment) -> None:
    seen, cancelled_at, _ = await cancel_while_running(dev_env, "work.blocking", 45)
    assert "side_effect" not in seen and "stopped" in seen
    delay = seen["stopped"] - cancelled_at
    print(f"45 s tool stopped {delay:.2f} s after the cancel")
    assert delay < 10  # was ~15 s (heartbeat every 16 s); about 1 s now, loose for a loaded 2-core box


# --- a streaming model call ----------------------------------------------------------------------------

STREAM: dict[str, float] = {}  # "sent": first chunk out; "closed": the client went away


def _chunk(delta: dict[str, object]) -> str:
    body = {"id": "chatcmpl-slow", "object": "chat.completion.chunk", "created": 0, "model": "slow-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}]}
    return f"data: {json.dumps(body)}\n\n"


async def _endless_completion(request: Request) -> StreamingResponse:
    """A chat completion that starts streaming and never ends: only the client closing it stops it."""
    async def events() -> AsyncIterator[str]:
        try:
            yield _chunk({"role": "assistant", "content": ""})
            yield _chunk({"content": "Let me think about that"})
            STREAM["sent"] = time.monotonic()
            await asyncio.Event().wait()  # forever
        finally:  # Starlette cancels the stream when the client disconnects
            STREAM["closed"] = time.monotonic()

    return StreamingResponse(events(), media_type="text/event-stream")


@contextlib.asynccontextmanager
async def endless_llm() -> AsyncIterator[str]:
    """A real HTTP server (uvicorn) speaking OpenAI chat completions; yields its base URL."""
    app = Starlette(routes=[Route("/v1/chat/completions", _endless_completion, methods=["POST"])])
    async with serve_in_background(app) as url:
        yield f"{url}/v1"


async def test_cancel_stops_a_streaming_model_call(dev_env: WorkflowEnvironment) -> None:
    """The model activity heartbeats every 0.5 s, so the cancel reaches it like a tool: the SDK's stream is
    closed long before the model call's 30 s heartbeat timeout or 5 min timeout could have ended it."""
    STREAM.clear()
    async with endless_llm() as base_url:
        provider = OpenAIChatProvider(model="slow-model", api_key="sk-test", base_url=base_url, timeout=600)
        async with agent_worker(dev_env, plugins=[plugin], model=provider, stream_text=True) as client:
            handle = await client.start("think")
            for _ in range(600):
                if "sent" in STREAM:
                    break
                await asyncio.sleep(0.05)
            assert "sent" in STREAM
            cancelled_at = time.monotonic()
            await handle.cancel()
            prompt = await handle.result()
            for _ in range(400):  # 20 s at most: well before the 30 s heartbeat timeout
                if "closed" in STREAM:
                    break
                await asyncio.sleep(0.05)
    assert prompt.state == "cancelled" and prompt.output == []
    assert "closed" in STREAM, "the model's stream was still open 20 s after the cancel"
    print(f"model stream closed {STREAM['closed'] - cancelled_at:.2f} s after the cancel")


async def test_a_call_waiting_for_approval_is_recorded_as_never_run(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(lambda r: tool_calls(("work.approved", {"seconds": 1})) if r.round == 1 else text("x"))
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        handle = await client.start("work")
        await handle.wait_until("waiting_for_approval")
        await handle.cancel()
        prompt = await handle.result()
    assert prompt.state == "cancelled"
    assert prompt.output[0].result == ToolError(error=CANCELLED_WHILE_WAITING)  # type: ignore[union-attr]
    assert [k for k, e, _ in LEDGER if k.startswith(handle.id)] == []
