"""Fast tools: a tool that leaves `local` unset runs its calls as local activities once the worker has seen
it finish fast (activities/fast_tools.py). Real dev server, scripted model; which kind of activity ran is
read from the prompt's history (ActivityTaskScheduled vs a local activity marker)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.fast_tools import FAST_SECONDS, RUNS_BEFORE_LOCAL, FastTools
from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime
from tests.support.workers import agent_worker


class N(BaseModel):
    n: int
    slow: bool = False
    progress: bool = False


@tool("calc.double")
async def double(args: N, ctx: ToolContext) -> int:
    """Double a number."""
    if args.slow:
        await asyncio.sleep(FAST_SECONDS + 0.2)
    if args.progress:
        ctx.progress("halfway", 0.5)
    return args.n * 2


@tool("calc.always_regular", local=False)
async def always_regular(args: N, ctx: ToolContext) -> int:
    """Double a number, always as a regular activity."""
    return args.n * 2


@tool("calc.checked", approval=lambda args: Approval(reason="check") if args.n > 100 else None)
async def checked(args: N, ctx: ToolContext) -> int:
    """Double a number; big ones need approval."""
    return args.n * 2


calc = Plugin("calc", tools=[double, always_regular, checked])


REGULAR_CALLS = ("dagent.invoke_tool", "dagent.tool_then_model")  # a round's only call runs with the next round


async def _kinds(client: AgentClient, calls: list[tuple[str, dict[str, Any]]], *, approve: bool = False) -> list[str]:
    """Run one prompt whose rounds make these calls one by one: 'regular' or 'local' per call, in order."""
    handle = await client.start("go")
    if approve:
        await handle.wait_until("waiting_for_approval")
        await handle.approve_all(by="alice")
    prompt = await handle.result()
    assert prompt.state == "completed", prompt.error
    assert all(isinstance(o.result, ToolSuccess) for o in prompt.output if isinstance(o, ToolOutput))
    kinds = []
    for event in (await handle.workflow.fetch_history()).events:
        if (event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and event.activity_task_scheduled_event_attributes.activity_type.name in REGULAR_CALLS):
            kinds.append("regular")
        elif (event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
              and event.marker_recorded_event_attributes.marker_name == "core_local_activity"):
            data = json.loads(event.marker_recorded_event_attributes.details["data"].payloads[0].data)
            if data.get("activity_type") == "dagent.invoke_tool":
                kinds.append("local")
    assert len(kinds) == len(calls)
    return kinds


def _model(calls: list[tuple[str, dict[str, Any]]]) -> ScriptedModel:
    return ScriptedModel([*(tool_calls(call) for call in calls), text("done")])


async def test_a_tool_seen_fast_runs_local_until_a_call_is_slow(dev_env: WorkflowEnvironment) -> None:
    calls = [("calc.double", {"n": i}) for i in range(RUNS_BEFORE_LOCAL + 1)]
    calls += [("calc.double", {"n": 9, "slow": True}), ("calc.double", {"n": 10})]
    async with agent_worker(dev_env, plugins=[calc], model=_model(calls)) as client:
        kinds = await _kinds(client, calls)
    # three fast regular calls, then local; a slow call (run local, as planned) sends the tool back for good
    assert kinds == ["regular"] * RUNS_BEFORE_LOCAL + ["local", "local", "regular"]


async def test_a_tool_that_reports_progress_stays_regular(dev_env: WorkflowEnvironment) -> None:
    calls = [("calc.double", {"n": 1, "progress": True})] + [("calc.double", {"n": i}) for i in range(4)]
    async with agent_worker(dev_env, plugins=[calc], model=_model(calls)) as client:
        assert await _kinds(client, calls) == ["regular"] * 5


async def test_local_false_approval_and_the_setting_keep_calls_regular(dev_env: WorkflowEnvironment) -> None:
    calls = [("calc.always_regular", {"n": i}) for i in range(5)]
    async with agent_worker(dev_env, plugins=[calc], model=_model(calls)) as client:
        assert await _kinds(client, calls) == ["regular"] * 5
    checked_calls = [("calc.checked", {"n": i}) for i in range(4)] + [("calc.checked", {"n": 500})]
    async with agent_worker(dev_env, plugins=[calc], model=_model(checked_calls)) as client:
        assert await _kinds(client, checked_calls, approve=True) == ["regular"] * 3 + ["local", "regular"]


def test_the_setting_turns_it_off() -> None:
    off = Settings.from_env({"DAGENT_FAST_TOOLS": "off"})
    assert Settings.from_env({}).fast_tools and not off.fast_tools
    assert not build_runtime(off, plugins=[calc], providers={}).fast_tools.enabled
    tools = FastTools(enabled=False)
    for _ in range(RUNS_BEFORE_LOCAL + 1):
        tools.observe(double, 0.0, reported_progress=False)
    assert not tools.runs_local(double)
    assert FastTools().runs_local(always_regular) is False
