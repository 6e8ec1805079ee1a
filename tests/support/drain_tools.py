"""A 3-second tool for the drain test, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.support.drain_tools:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.drain_tools:model
    DAGENT_TEST_LEDGER=/abs/path/ledger.jsonl

`drain.work` (always a regular activity, so a worker's shutdown can cancel it) writes `started`, then after
`WORK_SECONDS` `finished`, or `cancelled` if the worker cancels it, each with the worker's pid. The model
calls it once, then answers with its result.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from tests.support.jsonl import append_line
from tests.support.ledger import ledger_path

WORK_SECONDS = 3.0


class Job(BaseModel):
    name: str


@tool("drain.work", local=False, timeout=timedelta(minutes=2), heartbeat_timeout=timedelta(seconds=5))
async def drain_work(args: Job, ctx: ToolContext) -> str:
    """Work for three seconds."""
    mark = {"key": ctx.idempotency_key, "pid": os.getpid(), "attempt": ctx.attempt}
    append_line(ledger_path(), {"kind": "started", **mark})
    try:
        await asyncio.sleep(WORK_SECONDS)
    except asyncio.CancelledError:
        append_line(ledger_path(), {"kind": "cancelled", **mark})
        raise
    append_line(ledger_path(), {"kind": "finished", **mark})
    return f"{args.name} done"


plugin = Plugin("drain", tools=[drain_work])


def _script(request: ModelRequest) -> ModelResponse:
    results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    return text(f"result: {results[-1]}") if results else tool_calls(("drain.work", {"name": "report"}))


model = ScriptedModel(_script)
