"""Calls of one model response run side by side (one activity each, scheduled in the same workflow task) and
enter the record in the model's order, whatever order they finish in. Concurrency is read from the
workflow history, never from wall-clock timings."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolError, ToolOutput, ToolSuccess, WidgetOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.workflows.prompt.workflow import CANCELLED_WHILE_RUNNING
from tests.support.workers import agent_worker

RUNNING: set[str] = set()


class Nap(BaseModel):
    tag: str
    seconds: float


@tool("nap.take", timeout=timedelta(seconds=60))
async def nap(args: Nap, ctx: ToolContext) -> str:
    """Sleep, show a widget, answer with the tag."""
    RUNNING.add(args.tag)
    try:
        await asyncio.sleep(args.seconds)
    finally:
        RUNNING.discard(args.tag)
    ctx.display_widget("nap", {"tag": args.tag})
    return f"rested {args.tag}"


@tool("nap.alone", sequential=True)
async def nap_alone(args: Nap, ctx: ToolContext) -> str:
    """Sleep, never next to another call."""
    await asyncio.sleep(args.seconds)
    return f"alone {args.tag}"


plugin = Plugin("nap", tools=[nap, nap_alone])


def first_round(calls: list[tuple[str, object]]) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(*calls)  # type: ignore[arg-type]
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return text(" | ".join(r.content for r in results))

    return ScriptedModel(script)


def tool_activity_timeline(history: WorkflowHistory) -> list[tuple[str, int]]:
    """("scheduled" | "closed", scheduled event id) for every tool activity, in history order."""
    names: dict[int, str] = {}
    timeline: list[tuple[str, int]] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            names[event.event_id] = attrs.activity_type.name
            if attrs.activity_type.name == "dagent.invoke_tool":
                timeline.append(("scheduled", event.event_id))
        for field in ("activity_task_completed_event_attributes", "activity_task_failed_event_attributes",
                      "activity_task_timed_out_event_attributes", "activity_task_canceled_event_attributes"):
            if event.HasField(field):
                scheduled = getattr(event, field).scheduled_event_id
                if names.get(scheduled) == "dagent.invoke_tool":
                    timeline.append(("closed", scheduled))
    return timeline


def most_in_flight(timeline: list[tuple[str, int]]) -> int:
    in_flight = peak = 0
    for kind, _ in timeline:
        in_flight += 1 if kind == "scheduled" else -1
        peak = max(peak, in_flight)
    return peak


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([0.0, 0.05, 0.15, 0.3, 0.6]), min_size=2, max_size=5))
async def test_results_enter_the_record_in_the_models_order(dev_env: WorkflowEnvironment,
                                                             delays: list[float]) -> None:
    calls = [("nap.take", {"tag": f"t{i}", "seconds": d}) for i, d in enumerate(delays)]
    model = first_round(calls)  # type: ignore[arg-type]
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        handle = await client.start("nap")
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    tags = [f"t{i}" for i in range(len(delays))]
    entries = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert [e.input["tag"] for e in entries] == tags  # type: ignore[index]
    assert [e.result for e in entries] == [ToolSuccess(output=f"rested {t}") for t in tags]
    widgets = [o for o in prompt.output if isinstance(o, WidgetOutput)]
    assert [w.data["tag"] for w in widgets] == tags  # type: ignore[index]
    assert [w.tool_call_id for w in widgets] == [e.id for e in entries]
    assert [type(o).__name__ for o in prompt.output] == ["ToolOutput"] * len(tags) + ["WidgetOutput"] * len(tags) + [
        "TextOutput"]
    seen = [m.content for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert seen == [f"rested {t}" for t in tags]
    timeline = tool_activity_timeline(history)
    assert [kind for kind, _ in timeline[:len(tags)]] == ["scheduled"] * len(tags)  # all started together
    assert len({e.started_at for e in entries}) == 1


async def test_sequential_tool_runs_alone_and_a_prompt_can_cap_concurrency(dev_env: WorkflowEnvironment) -> None:
    calls = [("nap.take", {"tag": "a", "seconds": 0.2}), ("nap.take", {"tag": "b", "seconds": 0.1}),
             ("nap.alone", {"tag": "c", "seconds": 0.1}), ("nap.take", {"tag": "d", "seconds": 0.1}),
             ("nap.take", {"tag": "e", "seconds": 0.1})]
    async with agent_worker(dev_env, plugins=[plugin], model=first_round(calls)) as client:  # type: ignore[arg-type]
        handle = await client.start("nap")
        prompt = await handle.result()
        timeline = tool_activity_timeline(await handle.workflow.fetch_history())
    assert prompt.output[-1].text == "rested a | rested b | alone c | rested d | rested e"  # type: ignore[union-attr]
    scheduled = [event for kind, event in timeline if kind == "scheduled"]
    a, b, c, d, e = scheduled
    order = [(kind, {a: "a", b: "b", c: "c", d: "d", e: "e"}[event]) for kind, event in timeline]
    assert order[:2] == [("scheduled", "a"), ("scheduled", "b")]
    assert order[4:7] == [("scheduled", "c"), ("closed", "c"), ("scheduled", "d")]  # c alone, after a and b

    capped = [("nap.take", {"tag": f"t{i}", "seconds": 0.1}) for i in range(5)]
    async with agent_worker(dev_env, plugins=[plugin], model=first_round(capped)) as client:  # type: ignore[arg-type]
        handle = await client.start("nap", max_parallel_tools=2)
        prompt = await handle.result()
        timeline = tool_activity_timeline(await handle.workflow.fetch_history())
    assert prompt.output[-1].text == " | ".join(f"rested t{i}" for i in range(5))  # type: ignore[union-attr]
    assert most_in_flight(timeline) == 2


async def test_steer_skips_the_calls_not_started_yet(dev_env: WorkflowEnvironment) -> None:
    calls = [("nap.take", {"tag": "slow", "seconds": 1.5}), ("nap.take", {"tag": "b", "seconds": 0}),
             ("nap.take", {"tag": "c", "seconds": 0})]
    async with agent_worker(dev_env, plugins=[plugin], model=first_round(calls)) as client:  # type: ignore[arg-type]
        handle = await client.start("nap", max_parallel_tools=1)
        for _ in range(300):
            if "slow" in RUNNING:
                break
            await asyncio.sleep(0.02)
        await handle.steer("stop napping")
        prompt = await handle.result()
    results = [o.result for o in prompt.output if isinstance(o, ToolOutput)]
    skipped = ToolError(error="Skipped: the user sent a new message before this call ran.")
    assert results == [ToolSuccess(output="rested slow"), skipped, skipped]
    assert prompt.state == "completed"


async def test_cancel_cancels_every_call_in_flight(dev_env: WorkflowEnvironment) -> None:
    calls = [("nap.take", {"tag": f"long{i}", "seconds": 30}) for i in range(3)]
    async with agent_worker(dev_env, plugins=[plugin], model=first_round(calls)) as client:  # type: ignore[arg-type]
        handle = await client.start("nap")
        for _ in range(500):
            if {"long0", "long1", "long2"} <= RUNNING:
                break
            await asyncio.sleep(0.02)
        assert {"long0", "long1", "long2"} <= RUNNING
        await handle.cancel()
        prompt = await handle.result()
        status = (await handle.workflow.describe()).status
        history = await handle.workflow.fetch_history()
    assert status == WorkflowExecutionStatus.CANCELED and prompt.state == "cancelled"
    errors = [o.result for o in prompt.output if isinstance(o, ToolOutput)]
    assert errors == [ToolError(error=CANCELLED_WHILE_RUNNING)] * 3
    requested = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED]
    assert len(requested) == 3
