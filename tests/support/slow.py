"""A long tool for the heartbeat test: the first attempt works for a minute, later attempts finish at once."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool


class Job(BaseModel):
    name: str


@tool("slow.work", timeout=timedelta(minutes=5), heartbeat_timeout=timedelta(seconds=3))
async def slow_work(args: Job, ctx: ToolContext) -> str:
    """Work for a long time."""
    with Path(os.environ["DAGENT_TEST_LEDGER"]).open("a") as ledger:  # noqa: ASYNC230
        ledger.write(json.dumps({"attempt": ctx.attempt, "pid": os.getpid()}) + "\n")
    if ctx.attempt == 1:
        await asyncio.sleep(60)
    return f"{args.name} done on attempt {ctx.attempt}"


plugin = Plugin("slow", tools=[slow_work])


def _script(request: ModelRequest) -> ModelResponse:
    results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    return text(results[-1]) if results else tool_calls(("slow.work", {"name": "report"}))


model = ScriptedModel(_script)
