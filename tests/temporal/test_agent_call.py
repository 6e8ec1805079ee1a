"""Agents from a team's own workflow (workflows/agent_call.py): a typed call starts a child PromptWorkflow whose
approval a person decides through the ordinary doors while the team's workflow waits; the prompt carries the
summary and search attributes a client's start gives, and a prompt started by a raw client gets a summary too."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent import (
    AgentClient,
    DurableAgentPlugin,
    ScriptedModel,
    build_runtime,
    results_since_last_user,
    text,
    tool_calls,
)
from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.workflows.names import PROMPT_WORKFLOW
from durable_agent.workflows.protocol import PromptRequest
from tests.support.api import PLUGIN
from tests.support.team_agents import ExpenseReview, TwoAgents
from tests.support.workers import TEST_SETTINGS


def _script(request: ModelRequest) -> ModelResponse:
    said = next(m.text for m in request.messages if isinstance(m, UserMessage))
    if said.startswith("say "):
        return text(said.removeprefix("say "))
    if results_since_last_user(request):
        return text("Paid the dinner.")
    return tool_calls(("payment.send", {"to": "bistro", "amount": 480}))


def _client(env: WorkflowEnvironment, plugin: DurableAgentPlugin) -> Client:
    return Client(env.client.service_client, namespace=env.client.namespace, plugins=[plugin])


async def test_a_team_workflow_runs_a_prompt_whose_approval_a_person_decides(dev_env: WorkflowEnvironment) -> None:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"team-{uuid.uuid4().hex[:8]}"})
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": ScriptedModel(_script)})
    client = _client(dev_env, DurableAgentPlugin(settings, runtime=runtime))
    agents = AgentClient(client, settings)
    async with Worker(client, task_queue=settings.task_queue, workflows=[ExpenseReview, TwoAgents]):
        review = await client.start_workflow(ExpenseReview.run, "ann", id=f"review-{uuid.uuid4().hex[:8]}",
                                             task_queue=settings.task_queue)
        waiting = None
        for _ in range(200):
            found = await agents.pending(user_id="ann")
            if found.rows:
                waiting = found.rows[0]
                break
            await asyncio.sleep(0.05)
        assert waiting is not None and waiting.tool == "payment.send"
        assert waiting.prompt_id.startswith(f"{review.id}.prompt-")
        prompt = agents.prompt(waiting.prompt_id)
        await prompt.approve(waiting.tool_call_id, by="fiona", roles=["finance"], wait=True)
        assert await asyncio.wait_for(review.result(), 30) == "completed: Paid the dinner."
        described = await prompt.workflow.describe()
        assert await described.static_summary() == "ann: pay the team dinner"
        assert (await described.memo_value("summary")) == "ann: pay the team dinner"
        record = await prompt.get()
        assert [d.decision.by for d in record.output if getattr(d, "decision", None)] == ["fiona"]  # type: ignore[union-attr]

        two = await client.execute_workflow(TwoAgents.run, "bo", id=f"two-{uuid.uuid4().hex[:8]}",
                                            task_queue=settings.task_queue)
        states = [(await agents.prompt(prompt_id).get()).state for prompt_id in two]
        assert len(set(two)) == 2 and states == ["completed", "completed"]


async def test_a_prompt_a_raw_client_starts_gets_a_summary(dev_env: WorkflowEnvironment) -> None:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"raw-{uuid.uuid4().hex[:8]}"})
    runtime = build_runtime(settings, plugins=[PLUGIN], providers={"normal": ScriptedModel(_script)})
    client = _client(dev_env, DurableAgentPlugin(settings, runtime=runtime))
    async with Worker(client, task_queue=settings.task_queue):
        handle = await client.start_workflow(PROMPT_WORKFLOW, PromptRequest(input="say hi", user_id="raw"),
                                             id=f"raw-{uuid.uuid4().hex[:8]}", task_queue=settings.task_queue)
        await asyncio.wait_for(handle.result(), 30)
        assert (await (await handle.describe()).memo_value("summary")) == "raw: say hi"
