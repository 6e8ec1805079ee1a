"""`DAGENT_MODEL_CALLS=local` (`PromptRequest.model_local`): each model round is a local activity inside the
workflow task that takes the tools' results, so a round with a regular-activity tool costs one workflow task
instead of two. Real dev server, scripted model; what ran where is read from the prompt's history."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.model_round import UNBOUNDED_LOCAL_CALLS
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import MessageOutput, TextOutput, ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.names import INVOKE_TOOL_ACTIVITY, MODEL_ROUND_ACTIVITY, TOOL_THEN_MODEL_ACTIVITY
from tests.support.logs import capture_logs
from tests.support.workers import TEST_SETTINGS, agent_worker

TOOL_ROUNDS = 3


class N(BaseModel):
    n: int


@tool("calc.add_one", local=False)
async def add_one(args: N, ctx: ToolContext) -> int:
    """Add one, as a regular activity every time."""
    return args.n + 1


calc = Plugin("calc", tools=[add_one])


def _script(request: ModelRequest) -> ModelResponse:
    done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
    return text(f"added {done} times") if done == TOOL_ROUNDS else tool_calls(("calc.add_one", {"n": done}))


async def _history_of(prompt: PromptHandle) -> tuple[int, list[str], list[str]]:
    """Workflow tasks completed, the types of the activities scheduled, and the local activities' types."""
    events = (await prompt.workflow.fetch_history()).events
    tasks = sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events)
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    local = [json.loads(e.marker_recorded_event_attributes.details["data"].payloads[0].data)["activity_type"]
             for e in events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
             and e.marker_recorded_event_attributes.marker_name == "core_local_activity"]
    return tasks, scheduled, local


async def test_a_round_costs_one_workflow_task_with_local_model_calls(dev_env: WorkflowEnvironment) -> None:
    """Local model calls take one workflow task per round: each model round runs in the task that decided it. The
    default runs each round's only call with the next model round in one activity, which also costs one task per
    tool round, so only the first round's task is left to save."""
    async with agent_worker(dev_env, plugins=[calc], model=ScriptedModel(_script)) as agent:
        fused = await agent.start("count", user_id="u")
        local = await agent.start("count", user_id="u", model_local=True)
        records = [await fused.result(), await local.result()]
        (fused_tasks, fused_scheduled, _), (local_tasks, local_scheduled, local_local) = \
            [await _history_of(p) for p in (fused, local)]

    def outputs(record: object) -> list[object]:
        return [(o.tool, o.result.output) if isinstance(o, ToolOutput) and isinstance(o.result, ToolSuccess)
                else o.text if isinstance(o, TextOutput) else type(o).__name__ for o in record.output]  # type: ignore[attr-defined]

    assert outputs(records[0]) == outputs(records[1])  # the same record both ways
    assert outputs(records[1])[-1] == f"added {TOOL_ROUNDS} times"
    assert fused_scheduled == [MODEL_ROUND_ACTIVITY] + [TOOL_THEN_MODEL_ACTIVITY] * TOOL_ROUNDS
    assert local_scheduled == [INVOKE_TOOL_ACTIVITY] * TOOL_ROUNDS
    assert local_local == [MODEL_ROUND_ACTIVITY] * (TOOL_ROUNDS + 1)
    assert local_tasks == TOOL_ROUNDS + 1  # one task per round
    assert fused_tasks == local_tasks + 1


async def test_a_conversation_gives_its_prompts_local_model_calls(dev_env: WorkflowEnvironment) -> None:
    """DAGENT_MODEL_CALLS=local on the worker: a conversation's prompts call their model locally, whatever the
    environment of the client that started the conversation (the worker routes: workers/routing.py)."""
    async with agent_worker(dev_env, plugins=[calc], model=ScriptedModel(_script), model_calls="local") as agent:
        conversation = await agent.start_conversation(user_id="u")
        prompt = await conversation.send("count")
        await prompt.result()
        _, scheduled, local = await _history_of(prompt)
        await conversation.close()
    assert MODEL_ROUND_ACTIVITY not in scheduled and local == [MODEL_ROUND_ACTIVITY] * (TOOL_ROUNDS + 1)


@pytest.mark.parametrize("model_local", [False, True])
async def test_a_message_steering_during_the_model_call(dev_env: WorkflowEnvironment, model_local: bool) -> None:
    """What docs/providers.md says: with activities, a message that arrives while the model answers skips that
    round's calls; with local model calls the round's workflow task is still running, so the calls it plans
    run and the message reaches the next round."""
    answering = asyncio.Event()

    async def slow_first_round(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            answering.set()
            await asyncio.sleep(2.0)
            return tool_calls(("calc.add_one", {"n": 1}))
        return text("done")

    async with agent_worker(dev_env, plugins=[calc], model=ScriptedModel(slow_first_round)) as agent:
        prompt = await agent.start("add", user_id="u", model_local=model_local)
        await asyncio.wait_for(answering.wait(), 10)
        await prompt.steer("never mind")
        record = await prompt.result()
    [call] = [o for o in record.output if isinstance(o, ToolOutput)]
    steered = [o for o in record.output if isinstance(o, MessageOutput) and o.source == "steer"]
    assert [m.text for m in steered] == ["never mind"]
    if model_local:
        assert call.result == ToolSuccess(output=2)
    else:
        assert isinstance(call.result, ToolError) and call.result.error.startswith("Skipped")


async def test_cancelling_during_a_local_model_call_cancels_the_prompt(dev_env: WorkflowEnvironment) -> None:
    """The cancellation reaches the workflow when the SDK next heartbeats the workflow task that runs the call
    (at 80% of the task's 10 s timeout), not at once as with an activity: within 8 s, as docs/providers.md says."""
    answering = asyncio.Event()

    async def never_answers(request: ModelRequest) -> ModelResponse:
        answering.set()
        await asyncio.sleep(60)
        return text("too late")

    async with agent_worker(dev_env, plugins=[calc], model=ScriptedModel(never_answers)) as agent:
        prompt = await agent.start("add", user_id="u", model_local=True)
        await asyncio.wait_for(answering.wait(), 10)
        asked = time.monotonic()
        await prompt.cancel()
        record = await asyncio.wait_for(prompt.result(), 20)
        took = time.monotonic() - asked
    assert record.state == "cancelled" and not any(isinstance(o, TextOutput) for o in record.output)
    assert took < 12.0, took


@pytest.mark.parametrize("queue", ["DAGENT_MODEL_TASK_QUEUE", "DAGENT_MODEL_TASK_QUEUE_HIGH", "DAGENT_PROVIDER_QUEUES"])
def test_local_model_calls_with_a_model_queue_are_refused(queue: str) -> None:
    value = "anthropic=models-anthropic" if queue == "DAGENT_PROVIDER_QUEUES" else "models"
    with pytest.raises(ValueError, match=f"DAGENT_MODEL_CALLS=local runs model calls on the workflow's worker: "
                                         f"unset {queue}"):
        Settings.from_env({"DAGENT_MODEL_CALLS": "local", queue: value})
    with pytest.raises(ValueError, match="DAGENT_MODEL_CALLS must be activity or local, not 'remote'"):
        Settings.from_env({"DAGENT_MODEL_CALLS": "remote"})
    assert Settings.from_env({"DAGENT_MODEL_CALLS": "local"}).model_calls == "local"
    assert Settings.from_env({}).model_calls == "activity"


async def _abandoned_tasks(prompts: list[PromptHandle]) -> int:
    """Workflow tasks a worker started and never finished (timed out start to close: 10 s each). A task that
    waited past the sticky queue's timeout for a free slot (schedule to start) is not one: it moves on to the
    shared queue at once."""
    abandoned = 0
    for prompt in prompts:
        async for event in prompt.workflow.fetch_history_events():
            abandoned += (event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT and
                          event.workflow_task_timed_out_event_attributes.timeout_type
                          == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE)
    return abandoned


async def _run_at_once(dev_env: WorkflowEnvironment, settings: Settings, count: int) -> tuple[int | None, int]:
    """`count` prompts with local model calls started at once on a worker built from `settings`: the workflow
    tasks the worker runs at once, and how many of the prompts' workflow tasks it abandoned."""
    client = Client(dev_env.client.service_client, namespace=dev_env.client.namespace,
                    plugins=[DurableAgentPlugin(settings)])
    model = ScriptedModel(_script)
    runtime = build_runtime(settings, plugins=[calc], providers={"normal": model, "high": model})
    async with create_worker(client, runtime, task_queue=settings.task_queue, settings=settings) as worker:
        agent = AgentClient(client, settings)
        prompts = await asyncio.gather(*(agent.start("count", user_id="u", model_local=True) for _ in range(count)))
        records = await asyncio.wait_for(asyncio.gather(*(p.result() for p in prompts)), 60)
    assert {r.state for r in records} == {"completed"}
    return worker.config(active_config=True).get("max_concurrent_workflow_tasks"), await _abandoned_tasks(prompts)


async def test_more_prompts_than_the_cache_holds_never_abandon_a_workflow_task(dev_env: WorkflowEnvironment) -> None:
    """A local model call holds its prompt's workflow task, and so its place in the workflow cache, for the whole
    call. With more workflow tasks at once than the cache can spare (the SDK's default of 100 would be, against this
    test's cache of 8: 8 to 21 tasks abandoned in a run), the SDK evicts prompts in the middle of their model
    calls, and those tasks time out start to close (10 s each); a worker with DAGENT_MODEL_CALLS=local runs half
    as many tasks at once as it caches (`Settings.workflow_task_slots`)."""
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", "max_cached_workflows": 8,
                                                "model_calls": "local"})
    assert await _run_at_once(dev_env, settings, 24) == (4, 0)


async def test_a_worker_not_told_of_local_model_calls_says_so_once(dev_env: WorkflowEnvironment) -> None:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    with capture_logs() as logs:
        slots, _ = await _run_at_once(dev_env, settings, 2)
    assert slots is None  # the SDK's default
    said = [entry for entry in logs if entry["event"] == UNBOUNDED_LOCAL_CALLS]
    assert len(said) == 1 and said[0]["log_level"] == "warning"
