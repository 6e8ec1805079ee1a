"""A round's only regular tool call and the next model round in one activity (`dagent.tool_then_model`, issue 28):
the same record as two activities, one activity and one workflow task per round fewer, the tool never run twice
when its worker dies during the model call, and every case the workflow must decide between the two left to it.
Real dev server, real workers, scripted models."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.tool_then_model import CHECKPOINT_MAX_BYTES
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.models import MessageOutput, Prompt, TextOutput, ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import RetryableModelError
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import ToolFailed, tool
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.prompt.tool_runner import SKIPPED_BY_STEER
from tests.support.workers import TEST_SETTINGS, agent_worker

RUNS: list[int] = []  # the `n` of each run of step.run, in order (cleared by each test)
GATE: dict[str, asyncio.Event] = {}  # step.run waits for GATE["open"] when the test sets one


class StepInput(BaseModel):
    n: int


@tool("step.run", local=False)
async def step_run(args: StepInput, ctx: ToolContext) -> dict[str, int]:
    """Run one step."""
    RUNS.append(args.n)
    if (gate := GATE.get("open")) is not None:
        await gate.wait()
    ctx.state["last"] = args.n
    if args.n == 2:  # side outputs: entries after the call's own, which the next round reads
        ctx.add_file(f"step-{args.n}.txt", f"step {args.n}", summary=f"the notes of step {args.n}")
        ctx.display_widget("step", {"n": args.n}, fallback_text=f"step {args.n} shown")
    return {"step": args.n}


@tool("step.must", local=False, failure_mode="fail")
async def step_must(args: StepInput, ctx: ToolContext) -> str:
    """A step whose failure ends the prompt."""
    RUNS.append(args.n)
    raise ToolFailed("no")


@tool("step.stuck_once", local=False, timeout=timedelta(seconds=1))
async def step_stuck_once(args: StepInput, ctx: ToolContext) -> str:
    """A step stuck on its first attempt."""
    RUNS.append(args.n)
    if ctx.attempt == 1:
        await asyncio.sleep(60)
    return "unstuck"


@tool("step.big", local=False)
async def step_big(args: StepInput, ctx: ToolContext) -> str:
    """A step with a large result."""
    RUNS.append(args.n)
    return "x" * (CHECKPOINT_MAX_BYTES + 1)


steps = Plugin("steps", tools=[step_run, step_must, step_stuck_once, step_big])


def _reset() -> None:
    RUNS.clear()
    GATE.clear()


def _activities(events: list[HistoryEvent]) -> list[str]:
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]


def _workflow_tasks(events: list[HistoryEvent]) -> int:
    return sum(1 for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)


def _fused_results(events: list[HistoryEvent]) -> list[dict[str, Any]]:
    scheduled = {e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name for e in events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    return [json.loads(e.activity_task_completed_event_attributes.result.payloads[0].data) for e in events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and scheduled[e.activity_task_completed_event_attributes.scheduled_event_id] == "dagent.tool_then_model"]


async def _history(handle: PromptHandle) -> list[HistoryEvent]:
    return list((await handle.workflow.fetch_history()).events)


async def _run(env: WorkflowEnvironment, model: ScriptedModel, *, apart: bool = False,
               **options: Any) -> tuple[Prompt, list[HistoryEvent]]:
    """One prompt on a fresh worker with the steps plugin and `model`, run to its end (at most 30 s): its record
    and its history. `apart`: model rounds named to the worker's own queue as a model queue, which keeps every call
    and model round an activity of its own (tool_then_model.fusable)."""
    async with agent_worker(env, plugins=[steps], model=model) as client:
        if apart:
            options["model_task_queue"] = client.settings.task_queue
        handle = await client.start("go", **options)
        prompt = await asyncio.wait_for(handle.result(), 30)
        return prompt, await _history(handle)


def _without_times(prompt: Prompt) -> dict[str, Any]:
    """What a prompt's record says, without when (timestamps differ between any two runs) and without where its
    files are stored (under the prompt's id)."""
    data = prompt.model_dump(mode="json", exclude={"id", "created_at", "finished_at", "trace_id"})
    for entry in data["output"]:
        for key in ("started_at", "finished_at", "content_ref"):
            entry.pop(key, None)
    return data


async def test_one_regular_call_runs_with_the_next_model_round_and_the_record_is_the_same(
        dev_env: WorkflowEnvironment) -> None:
    """Three rounds of one call each: after the first model round, each call and the model round that reads its
    result are one activity. The record (outputs and the side outputs the second call adds, rounds, usage, plugin
    state) is the record of the same prompt run as separate activities (`apart`), and the model was
    sent the same messages, the file's summary and the widget's text included."""
    _reset()
    script = [tool_calls(("step.run", {"n": 1})), tool_calls(("step.run", {"n": 2}), text="two"), text("done")]
    fused_model, apart_model = ScriptedModel(script), ScriptedModel(script)
    fused_prompt, fused_events = await _run(dev_env, fused_model)
    apart_prompt, apart_events = await _run(dev_env, apart_model, apart=True)
    assert RUNS == [1, 2, 1, 2]  # each call ran once in each prompt
    assert _activities(fused_events) == ["dagent.model_round", "dagent.tool_then_model", "dagent.tool_then_model"]
    assert _activities(apart_events) == ["dagent.model_round", "dagent.invoke_tool"] * 2 + ["dagent.model_round"]
    assert _workflow_tasks(apart_events) - _workflow_tasks(fused_events) == 2  # one per call
    assert fused_prompt.state == "completed" and fused_prompt.rounds == 3
    assert _without_times(fused_prompt) == _without_times(apart_prompt)
    assert [e.result for e in fused_prompt.output if isinstance(e, ToolOutput)] == [
        ToolSuccess(output={"step": 1}), ToolSuccess(output={"step": 2})]
    assert fused_prompt.plugin_state["steps"] == {"last": 2}  # the tool's state change, kept by the record
    assert [entry.type for entry in fused_prompt.output] == ["tool", "text", "tool", "file", "widget", "text"]
    assert [r.round for r in fused_prompt.model_rounds] == [1, 2, 3]
    assert [[m.model_dump() for m in r.messages] for r in fused_model.requests] == [
        [m.model_dump() for m in r.messages] for r in apart_model.requests]
    # Every fused activity ran its model round: none left it to the workflow.
    assert [("round" in result, result.get("skipped")) for result in _fused_results(fused_events)] == [
        (True, None), (True, None)]


async def test_the_tool_is_not_run_again_when_its_worker_dies_during_the_model_call(
        dev_env: WorkflowEnvironment) -> None:
    """The worker running the activity stops while the model answers (after the tool ran). The next attempt, on
    another worker, finds the tool's result checkpointed in the heartbeat details: it returns it without running
    the tool, and the workflow calls the model itself."""
    _reset()
    entered = asyncio.Event()

    async def hangs_after_the_tool(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(("step.run", {"n": 7}))
        entered.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    first = build_runtime(settings, plugins=[steps], providers={"normal": ScriptedModel(hangs_after_the_tool)})
    async with create_worker(dev_env.client, first, task_queue=settings.task_queue, settings=settings,
                             graceful_shutdown_timeout=timedelta(0)):
        client = AgentClient(dev_env.client, settings)
        handle = await client.start("go", prompt_id=f"dies-{uuid.uuid4().hex[:6]}")
        await asyncio.wait_for(entered.wait(), 30)
        await _until(lambda: _checkpointed(handle), "the tool's result is in the heartbeat details")
    assert RUNS == [7]
    second_model = ScriptedModel(lambda request: text("done"))
    second = build_runtime(settings, plugins=[steps], providers={"normal": second_model})
    async with create_worker(dev_env.client, second, task_queue=settings.task_queue, settings=settings):
        prompt = await asyncio.wait_for(handle.result(), 60)
        events = await _history(handle)
    assert RUNS == [7]  # not run again
    assert prompt.state == "completed"
    [entry, answer] = prompt.output
    assert isinstance(entry, ToolOutput) and entry.result == ToolSuccess(output={"step": 7})
    assert answer == TextOutput(text="done")
    [result] = _fused_results(events)
    assert "round" not in result and "earlier attempt" in result["skipped"]
    assert _activities(events) == ["dagent.model_round", "dagent.tool_then_model", "dagent.model_round"]
    assert len(second_model.requests) == 1 and second_model.requests[0].round == 2


async def _checkpointed(handle: PromptHandle) -> bool:
    description = await handle.workflow.describe()
    return any(len(pending.heartbeat_details.payloads) == 2
               for pending in description.raw_description.pending_activities)


async def _until(check: Callable[[], Any], what: str, seconds: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.05)


async def test_a_model_error_after_the_tool_leaves_the_round_to_the_workflow(dev_env: WorkflowEnvironment) -> None:
    """The model fails right after the tool: the activity still returns the tool's result (the tool is not
    retried), and the workflow calls the model round as its own activity, with that activity's retries."""
    _reset()
    calls: list[int] = []

    def fails_once_after_the_tool(request: ModelRequest) -> ModelResponse:
        calls.append(request.round)
        if request.round == 1:
            return tool_calls(("step.run", {"n": 3}))
        if calls.count(2) == 1:
            raise RetryableModelError("overloaded", status=529)
        return text("done")

    prompt, events = await _run(dev_env, ScriptedModel(fails_once_after_the_tool))
    assert RUNS == [3] and calls == [1, 2, 2]
    assert prompt.state == "completed" and prompt.output[-1] == TextOutput(text="done")
    assert _activities(events) == ["dagent.model_round", "dagent.tool_then_model", "dagent.model_round"]
    [result] = _fused_results(events)
    assert "RetryableModelError" in result["skipped"]


async def test_a_message_sent_while_the_tool_runs_outdates_the_answer_read_with_its_result(
        dev_env: WorkflowEnvironment) -> None:
    """A steer that arrives while the tool runs is not in the model round that runs after it in the same activity:
    that round's calls are skipped (as when a message arrives during a model call), and the next round reads the
    message."""
    _reset()
    GATE["open"] = asyncio.Event()
    model = ScriptedModel([tool_calls(("step.run", {"n": 1})), tool_calls(("step.run", {"n": 2})), text("ok")])
    async with agent_worker(dev_env, plugins=[steps], model=model) as client:
        handle = await client.start("go")
        await _until(lambda: _ran(1), "the tool runs")
        await handle.steer("stop and say ok")
        GATE["open"].set()
        prompt = await handle.result()
    assert RUNS == [1]
    first, skipped, message, answer = prompt.output
    assert isinstance(first, ToolOutput) and first.result == ToolSuccess(output={"step": 1})
    assert isinstance(skipped, ToolOutput) and skipped.result == ToolError(error=SKIPPED_BY_STEER)
    assert message == MessageOutput(role="user", source="steer", text="stop and say ok")
    assert answer == TextOutput(text="ok")
    last = model.requests[-1].messages[-1]
    assert "stop and say ok" in json.dumps(last.model_dump(mode="json"))


async def _ran(n: int) -> bool:
    return n in RUNS


async def test_a_failure_that_ends_the_prompt_calls_no_model(dev_env: WorkflowEnvironment) -> None:
    """A call whose failure ends the prompt (`failure_mode="fail"`): its activity stops after the tool."""
    _reset()
    model = ScriptedModel([tool_calls(("step.must", {"n": 9})), text("never")])
    prompt, events = await _run(dev_env, model)
    assert prompt.state == "failed" and "step.must" in (prompt.error or "")
    assert RUNS == [9] and len(model.requests) == 1
    [result] = _fused_results(events)
    assert "round" not in result and "ends the prompt" in result["skipped"]


async def test_rounds_the_workflow_decides_between_run_apart(dev_env: WorkflowEnvironment) -> None:
    """Two calls in one response, and a call in the last round allowed: each runs as its own tool activity."""
    _reset()
    model = ScriptedModel([tool_calls(("step.run", {"n": 1}), ("step.run", {"n": 2})),
                           tool_calls(("step.run", {"n": 3}))])
    prompt, events = await _run(dev_env, model, max_rounds=2)
    assert prompt.state == "stopped" and prompt.force_completed and sorted(RUNS) == [1, 2, 3]
    assert _activities(events) == ["dagent.model_round", "dagent.invoke_tool", "dagent.invoke_tool",
                                   "dagent.model_round", "dagent.invoke_tool"]


async def test_the_tool_keeps_its_own_timeout(dev_env: WorkflowEnvironment) -> None:
    """The activity may run for the tool's timeout plus a model call, but its tool part is stopped at the tool's
    own timeout (1 s here) and the attempt retried, as `dagent.invoke_tool`'s start-to-close timeout would."""
    _reset()
    model = ScriptedModel([tool_calls(("step.stuck_once", {"n": 4})), text("done")])
    prompt, events = await _run(dev_env, model)  # within 30 s: not the 60 s the first attempt would take
    assert RUNS == [4, 4] and prompt.output[0].result == ToolSuccess(output="unstuck")  # type: ignore[union-attr]
    [result] = _fused_results(events)
    assert "round" in result  # the second attempt ran the tool, then the model
    [retried] = [e.activity_task_started_event_attributes for e in events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
                 and e.activity_task_started_event_attributes.attempt > 1]
    assert retried.attempt == 2 and "within its timeout (1 s)" in retried.last_failure.message


async def test_a_result_too_large_to_checkpoint_leaves_the_round_to_the_workflow(dev_env: WorkflowEnvironment) -> None:
    """Every heartbeat of the model part would carry the checkpoint: a result over CHECKPOINT_MAX_BYTES is returned
    at once and the workflow calls the model round (which receives it by reference)."""
    _reset()
    model = ScriptedModel([tool_calls(("step.big", {"n": 5})), text("done")])
    prompt, events = await _run(dev_env, model)
    assert prompt.state == "completed" and RUNS == [5]
    assert _activities(events) == ["dagent.model_round", "dagent.tool_then_model", "dagent.model_round"]
    [result] = _fused_results(events)
    assert "round" not in result and "too large to checkpoint" in result["skipped"]
    assert len(model.requests) == 2 and "x" * 100 in json.dumps(model.requests[1].model_dump(mode="json"))
