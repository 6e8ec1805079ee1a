"""Fair queues (issue 27): a prompt's Temporal Priority is on its start and inherited by its activities.

Real dev server (the session `dev_env`): the priority and fairness key given to `AgentClient.start` are on
the workflow (describe) and its WorkflowExecutionStarted event; the model and tool activities it schedules
carry the same priority; without one, the fairness key is the user id. Bad values are one-line errors
before anything is started (client and `dagent run`).
"""

from __future__ import annotations

import asyncio
import re
import subprocess

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.common import Priority
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import PromptHandle
from durable_agent.client.priority import fairness_key_for, prompt_priority
from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.support.workers import agent_worker


class Note(BaseModel):
    text: str


@tool("note.take", local=False)
async def note(args: Note, ctx: ToolContext) -> str:
    """Take a note."""
    return f"noted {args.text}"


def _script(request: ModelRequest) -> ModelResponse:
    if results := results_since_last_user(request):
        return text(results[-1].content)
    return tool_calls(("note.take", {"text": "x"}))


PLUGIN = Plugin("note", tools=[note])


async def _priorities(handle: PromptHandle) -> tuple[Priority, Priority, list[Priority]]:
    """(describe's priority, the started event's, each scheduled activity's)."""
    described = (await handle.workflow.describe()).raw_description.workflow_execution_info.priority
    history = await handle.workflow.fetch_history()
    started = next(e.workflow_execution_started_event_attributes.priority for e in history.events
                   if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
    activities = [e.activity_task_scheduled_event_attributes.priority for e in history.events
                  if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    return (Priority._from_proto(described), Priority._from_proto(started),
            [Priority._from_proto(p) for p in activities])


async def test_the_start_carries_the_priority_and_the_activities_inherit_it(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_script)) as client:
        given = prompt_priority("alice", priority_key=1, fairness_key="tenant-a", fairness_weight=2.0)
        urgent = await client.start("note it", user_id="alice", priority=given)
        plain = await client.start("note it", user_id="bob")
        for handle in (urgent, plain):
            assert (await asyncio.wait_for(handle.result(), 30)).state == "completed"

    described, started, activities = await _priorities(urgent)
    assert described == started == Priority(priority_key=1, fairness_key="tenant-a", fairness_weight=2.0)
    assert len(activities) >= 2  # model round, then the tool with the next model round
    # None of them sets its own: Temporal's rule for an empty activity priority is "inherit the workflow's".
    assert all(p == Priority() for p in activities), activities

    described, started, _ = await _priorities(plain)
    assert described == started == Priority(fairness_key="bob")  # fairness per user by default


def test_bad_priorities_are_one_line_errors() -> None:
    for kwargs, message in [({"priority_key": 0}, "priority must be 1 (first) to 5 (last), not 0"),
                            ({"priority_key": 6}, "not 6"),
                            ({"fairness_weight": 5000.0}, "fairness weight must be between 0.001 and 1000"),
                            ({"fairness_key": " "}, "fairness key must not be empty")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            prompt_priority("alice", **kwargs)  # type: ignore[arg-type]
    long_user = "u" * 100
    key = fairness_key_for(long_user)
    assert len(key.encode()) <= 64 and key != fairness_key_for("u" * 99 + "v")
    assert prompt_priority(long_user).fairness_key == key

    done = subprocess.run([*DAGENT_CMD, "run", "hi", "--priority", "9", "--address", "127.0.0.1:1"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr == "error: priority must be 1 (first) to 5 (last), not 9\n"


async def _first_task_started(handle: PromptHandle) -> float:
    history = await handle.workflow.fetch_history()
    event = next(e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED)
    return event.event_time.ToDatetime().timestamp()


async def test_a_backlog_is_served_in_priority_order(dev_env: WorkflowEnvironment) -> None:
    """Prompts queued while no worker polls: when one worker (one task at a time) comes, every priority-1
    prompt starts before any priority-5 one, though they were started after them (the session's dev server
    has one task-queue partition, as `dagent server` does, so the order is exact)."""
    import uuid

    from durable_agent.client import AgentClient
    from durable_agent.workers.worker import build_runtime, create_worker
    from tests.support.workers import TEST_SETTINGS

    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    client = AgentClient(dev_env.client, settings)
    model = ScriptedModel(lambda request: text("ok"))
    low = [await client.start("later", user_id="batch", priority=prompt_priority("batch", priority_key=5))
           for _ in range(3)]
    high = [await client.start("first", user_id="vip", priority=prompt_priority("vip", priority_key=1))
            for _ in range(3)]
    runtime = build_runtime(settings, plugins=[], providers={"normal": model, "high": model})
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue, settings=settings,
                             max_concurrent_workflow_tasks=1):
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in low + high)), 60)
    high_started = [await _first_task_started(h) for h in high]
    low_started = [await _first_task_started(h) for h in low]
    assert max(high_started) <= min(low_started), (high_started, low_started)
