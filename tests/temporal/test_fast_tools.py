"""Fast tools: a tool that leaves `local` unset runs its calls as local activities once the worker has seen
it finish fast (activities/fast_tools.py), except a round's only call, which runs with the next model round.
Real dev server, scripted model; which kind of activity ran is read from the prompt's history
(ActivityTaskScheduled by activity type vs a local activity marker)."""

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


Call = tuple[str, dict[str, Any]]


async def _kinds(client: AgentClient, rounds: list[list[Call]], *, approve: bool = False,
                 **options: Any) -> list[str]:
    """Run one prompt whose rounds make these calls: per call, in order, 'local' (a local activity), 'with round'
    (run with the next model round, `dagent.tool_then_model`) or 'regular' (`dagent.invoke_tool`)."""
    handle = await client.start("go", **options)
    if approve:
        await handle.wait_until("waiting_for_approval")
        await handle.approve_all(by="alice")
    prompt = await handle.result()
    cut_short = options.get("max_rounds") == len(rounds)  # no round left for the final answer
    assert prompt.state == ("stopped" if cut_short else "completed"), prompt.error
    assert all(isinstance(o.result, ToolSuccess) for o in prompt.output if isinstance(o, ToolOutput))
    kinds = []
    for event in (await handle.workflow.fetch_history()).events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            if name in KIND_OF_ACTIVITY:
                kinds.append(KIND_OF_ACTIVITY[name])
        elif (event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
              and event.marker_recorded_event_attributes.marker_name == "core_local_activity"):
            data = json.loads(event.marker_recorded_event_attributes.details["data"].payloads[0].data)
            if data.get("activity_type") == "dagent.invoke_tool":
                kinds.append("local")
    assert len(kinds) == sum(len(calls) for calls in rounds)
    return kinds


KIND_OF_ACTIVITY = {"dagent.invoke_tool": "regular", "dagent.tool_then_model": "with round"}


def _model(rounds: list[list[Call]]) -> ScriptedModel:
    return ScriptedModel([*(tool_calls(*calls) for calls in rounds), text("done")])


def _pairs(calls: list[Call]) -> list[list[Call]]:
    """Two calls a round: a round with more than one call never runs its calls with the next model round, so
    each call's kind is what the worker planned."""
    return [calls[i:i + 2] for i in range(0, len(calls), 2)]


async def test_a_tool_seen_fast_runs_local_until_a_call_is_slow(dev_env: WorkflowEnvironment) -> None:
    rounds = _pairs([("calc.double", {"n": i}) for i in range(4)]
                    + [("calc.double", {"n": 4}), ("calc.double", {"n": 9, "slow": True}),
                       ("calc.double", {"n": 10}), ("calc.double", {"n": 11})])
    async with agent_worker(dev_env, plugins=[calc], model=_model(rounds)) as client:
        kinds = await _kinds(client, rounds)
    # a round is planned before its calls run: round 2 with 2 fast runs seen (< RUNS_BEFORE_LOCAL), so regular;
    # round 3 with 4, so local; a slow call (run local, as planned) sends the tool back for good
    assert RUNS_BEFORE_LOCAL == 3
    assert kinds == ["regular"] * 4 + ["local", "local", "regular", "regular"]


async def test_a_fast_tools_only_call_runs_with_the_next_model_round(dev_env: WorkflowEnvironment) -> None:
    """One call a round: once the tool is seen fast its call is planned local, and a round whose only call it is
    runs it with the next model round in one activity (no local activity, no second activation); the last round
    allowed has no next round, so its call runs local."""
    rounds = [[("calc.double", {"n": i})] for i in range(RUNS_BEFORE_LOCAL + 2)]
    async with agent_worker(dev_env, plugins=[calc], model=_model(rounds)) as client:
        assert await _kinds(client, rounds) == ["with round"] * len(rounds)
        last_allowed = await _kinds(client, rounds, max_rounds=len(rounds))
        assert last_allowed == ["with round"] * (len(rounds) - 1) + ["local"]


async def test_a_tool_that_reports_progress_stays_regular(dev_env: WorkflowEnvironment) -> None:
    rounds = _pairs([("calc.double", {"n": 1, "progress": True}), ("calc.double", {"n": 0})]
                    + [("calc.double", {"n": i}) for i in range(4)])
    async with agent_worker(dev_env, plugins=[calc], model=_model(rounds)) as client:
        assert await _kinds(client, rounds) == ["regular"] * 6


async def test_local_false_keeps_calls_regular_and_an_approved_fast_call_runs_local(
        dev_env: WorkflowEnvironment) -> None:
    rounds = _pairs([("calc.always_regular", {"n": i}) for i in range(6)])
    async with agent_worker(dev_env, plugins=[calc], model=_model(rounds)) as client:
        assert await _kinds(client, rounds) == ["regular"] * 6
    checked = _pairs([("calc.checked", {"n": i}) for i in range(4)] + [("calc.checked", {"n": 500}),
                                                                       ("calc.checked", {"n": 5})])
    async with agent_worker(dev_env, plugins=[calc], model=_model(checked)) as client:
        kinds = await _kinds(client, checked, approve=True)
        # the last round: the call over 100, approved, runs local (in the decision's workflow task) as the
        # one beside it does: the tool was seen fast before the round was planned
        assert kinds == ["regular"] * 4 + ["local", "local"]


def test_the_setting_turns_it_off() -> None:
    off = Settings.from_env({"DAGENT_FAST_TOOLS": "off"})
    assert Settings.from_env({}).fast_tools and not off.fast_tools
    assert not build_runtime(off, plugins=[calc], providers={}).fast_tools.enabled
    tools = FastTools(enabled=False)
    for _ in range(RUNS_BEFORE_LOCAL + 1):
        tools.observe(double, 0.0, reported_progress=False)
    assert not tools.runs_local(double)
    assert FastTools().runs_local(always_regular) is False
