"""A coordinator that hands the ledger work to a sub-agent (the bookkeeper), loadable by a worker subprocess
for the sub-agent crash tests:

    DAGENT_PLUGINS=tests.support.ledger:plugin,tests.support.delegation:survey_plugin,tests.support.delegation:plugin
    DAGENT_MODEL_NORMAL=scripted:tests.support.delegation:model
    DAGENT_TEST_LEDGER=/abs/path/ledger.jsonl

The coordinator calls `ledger.delegate` (a sub-agent) once. The bookkeeper (a child prompt) runs
`ledger.survey` in round 1 — a slow tool that hangs on its first attempt, so a test can SIGKILL the worker
while it runs — and `ledger.charge` (needs approval) in round 2, then reports; the coordinator repeats the
report. Every survey attempt writes a `survey.attempt` ledger line with the pid of the worker running it.
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
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import tool
from tests.support.jsonl import append_line
from tests.support.ledger import CHARGE_AMOUNT, ledger_path

BOOKKEEPER_INSTRUCTIONS = "You are the bookkeeper: survey the books, then charge."
TASK = "Survey the books, then charge the customer."
SURVEY_HEARTBEAT = timedelta(seconds=2)  # a killed worker's survey is retried after this, not after its timeout


class SurveyInput(BaseModel):
    topic: str


@tool("ledger.survey", heartbeat_timeout=SURVEY_HEARTBEAT, timeout=timedelta(minutes=5))
async def survey(args: SurveyInput, ctx: ToolContext) -> str:
    """Survey the books (slow: the first attempt never finishes on its own)."""
    append_line(ledger_path(), {"kind": "survey.attempt", "key": ctx.idempotency_key, "pid": os.getpid(),
                                "attempt": ctx.attempt})
    if ctx.attempt == 1:
        await asyncio.sleep(3600)  # the test SIGKILLs this worker; the call is retried on another
    return f"surveyed {args.topic}"


bookkeeper = SubAgent("ledger.delegate", description="Hand the ledger work to the bookkeeper.",
                      instructions=BOOKKEEPER_INSTRUCTIONS, plugins=("ledger", "survey"), max_rounds=4)
survey_plugin = Plugin("survey", tools=[survey])
plugin = Plugin("delegation", tools=[bookkeeper.tool()])


def _script(request: ModelRequest) -> ModelResponse:
    results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    if BOOKKEEPER_INSTRUCTIONS in (request.instructions or ""):
        if request.round == 1:
            return tool_calls(("ledger.survey", {"topic": "books"}))
        if request.round == 2:
            return tool_calls(("ledger.charge", {"amount": CHARGE_AMOUNT}))
        return text("Booked: " + " | ".join(results))
    if request.round == 1:
        return tool_calls(("ledger.delegate", {"task": TASK}))
    return text("Coordinator: " + " | ".join(results))


model = ScriptedModel(_script, model="scripted-delegation")
