"""A plugin and a scripted model for the tracing crash test, loadable by a worker subprocess:

    DAGENT_PLUGINS=tests.support.traced:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.traced:model
    DAGENT_TEST_MARKER_DIR=/abs/dir

Round 1 asks for `traced.lookup` (no approval) and `traced.pay` (needs approval). The first attempt of
`traced.pay` writes `pay-started` into the marker directory and then hangs, so the test can kill its worker
in the middle of the round; a later attempt (on another worker) pays. Round 2 answers with text.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool

MARKER_ENV = "DAGENT_TEST_MARKER_DIR"
PAY_STARTED = "pay-started"


class Query(BaseModel):
    city: str


class Payment(BaseModel):
    amount: int


@tool("traced.lookup")
async def lookup(args: Query, ctx: ToolContext) -> str:
    """Look a city up."""
    return f"{args.city}: sunny"


@tool("traced.pay", approval=Approval(reason="Paying needs approval."), heartbeat_timeout=timedelta(seconds=2))
async def pay(args: Payment, ctx: ToolContext) -> str:
    """Pay; the first attempt hangs until its worker is killed."""
    if ctx.attempt == 1:
        (Path(os.environ[MARKER_ENV]) / PAY_STARTED).write_text(str(os.getpid()))
        await asyncio.sleep(3600)
    return f"paid {args.amount}"


plugin = Plugin("traced", tools=[lookup, pay], instructions="You look things up and pay.")


def _script(request: ModelRequest) -> ModelResponse:
    if request.round == 1:
        return tool_calls(("traced.lookup", {"city": "Paris"}), ("traced.pay", {"amount": 250}))
    return text("Looked up and paid.")


model = ScriptedModel(_script)
