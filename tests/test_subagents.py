"""Sub-agents as child PromptWorkflows: result, links and usage roll-up; approvals reaching a person through the
parent across a worker restart; cancelling the parent cancels the child."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agent.context import ToolContext
from agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from agent.models import ToolError, ToolOutput, ToolSuccess
from agent.plugins import Plugin
from agent.providers.scripted import ScriptedModel, text, tool_calls
from agent.subagents import SubAgent
from agent.tools import Approval, tool
from client import AgentClient
from tests.support.workers import TEST_SETTINGS
from workers.worker import build_runtime, create_worker

RUNS: Counter[str] = Counter()
STARTED: set[str] = set()
CHILD_INSTRUCTIONS = "You research one question."


class Query(BaseModel):
    topic: str


@tool("lookup.find")
async def find(args: Query, ctx: ToolContext) -> str:
    """Look a topic up."""
    RUNS[ctx.idempotency_key] += 1
    return f"facts about {args.topic}"


@tool("lookup.erase", approval=Approval(reason="Erasing needs a person."))
async def erase(args: Query, ctx: ToolContext) -> str:
    """Erase a topic."""
    RUNS[ctx.idempotency_key] += 1
    return f"erased {args.topic}"


@tool("lookup.ponder")
async def ponder(args: Query, ctx: ToolContext) -> str:
    """Think for a long time."""
    STARTED.add(ctx.prompt_id)
    await asyncio.sleep(60)
    return "pondered"


researcher = SubAgent("research.ask", description="Ask the researcher one question.",
                      instructions=CHILD_INSTRUCTIONS, plugins=("lookup",), max_rounds=4)
plugins = [Plugin("lookup", tools=[find, erase, ponder]), Plugin("agents", tools=[researcher.tool()])]


def _results(request: ModelRequest) -> list[ToolResultMessage]:
    return [m for m in request.messages if isinstance(m, ToolResultMessage)]


def two_level_model(child_tool: str) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if CHILD_INSTRUCTIONS in (request.instructions or ""):
            if request.round == 1:
                topic = request.messages[0].text  # type: ignore[union-attr]
                return tool_calls((child_tool, {"topic": topic}))
            return text("answer: " + _results(request)[0].content)
        if request.round == 1:
            return tool_calls(("research.ask", {"task": "tides"}), ("research.ask", {"task": "winds"}))
        return text(" | ".join(r.content for r in _results(request)))

    return ScriptedModel(script)


@asynccontextmanager
async def worker(env: WorkflowEnvironment, model: ScriptedModel, queue: str) -> AsyncIterator[AgentClient]:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": queue})
    runtime = build_runtime(settings, plugins=plugins, providers={"normal": model, "high": model})
    async with create_worker(env.client, runtime, task_queue=queue, settings=settings):
        yield AgentClient(env.client, settings)


async def test_sub_agents_run_side_by_side_as_child_prompts(dev_env: WorkflowEnvironment) -> None:
    model = two_level_model("lookup.find")
    async with worker(dev_env, model, f"tq-{uuid.uuid4().hex[:10]}") as client:
        handle = await client.start("research two things")
        prompt = await handle.result()
        calls = [o for o in prompt.output if isinstance(o, ToolOutput)]
        children = [await client.prompt(c.child_prompt_id).get() for c in calls]  # type: ignore[arg-type]
        linked: list[str] = []
        for _ in range(100):  # visibility is eventually consistent
            linked = sorted([w.id async for w in dev_env.client.list_workflows(f"ParentPromptId = '{handle.id}'")])
            if len(linked) == 2:
                break
            await asyncio.sleep(0.1)
    assert [c.result for c in calls] == [ToolSuccess(output="answer: facts about tides"),
                                         ToolSuccess(output="answer: facts about winds")]
    assert [c.child_prompt_id for c in calls] == [f"{handle.id}.{c.id}" for c in calls]
    assert linked == sorted(c.child_prompt_id for c in calls)  # type: ignore[type-var]
    assert all(child.parent_prompt_id == handle.id and child.state == "completed" for child in children)
    assert prompt.usage.model_calls == 2 + sum(child.usage.model_calls for child in children) == 6
    child_requests = [r for r in model.requests if CHILD_INSTRUCTIONS in (r.instructions or "")]
    assert {t.id for r in child_requests for t in r.tools} == {"lookup.find", "lookup.erase", "lookup.ponder"}
    assert prompt.output[-1].text == "answer: facts about tides | answer: facts about winds"  # type: ignore[union-attr]


async def test_sub_agent_approval_reaches_a_person_through_the_parent_across_a_worker_restart(
        dev_env: WorkflowEnvironment) -> None:
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    model = two_level_model("lookup.erase")
    async with worker(dev_env, model, queue) as client:
        handle = await client.start("erase two things")
        pending = []
        for _ in range(300):
            pending = await handle.pending_approvals()
            if len(pending) == 2:
                break
            await asyncio.sleep(0.05)
        assert len(pending) == 2
        calls = [o for o in (await handle.get()).output if isinstance(o, ToolOutput)]
    assert [p.path for p in pending] == [[c.child_prompt_id] for c in calls]
    assert [p.tool_call_id for p in pending] == [f"{c.id}/call_r1_0" for c in calls]
    assert [p.reason for p in pending] == ["Erasing needs a person."] * 2
    async with worker(dev_env, model, queue) as client:  # a new worker: everything replays
        decided = await handle.approve(pending[0].tool_call_id, by="ann", wait=True)
        assert decided is not None and decided.decision.decision == "approved"  # type: ignore[union-attr]
        await handle.reject(pending[1].tool_call_id, by="ann", reason="keep it")
        prompt = await handle.result()
        assert await handle.pending_approvals() == []
    first, second = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert first.result == ToolSuccess(output="answer: erased tides")
    assert second.result == ToolSuccess(output="answer: Error: The call was rejected by ann: keep it")
    assert RUNS[f"{first.child_prompt_id}/call_r1_0"] == 1 and RUNS[f"{second.child_prompt_id}/call_r1_0"] == 0


async def test_cancelling_the_parent_cancels_the_running_child(dev_env: WorkflowEnvironment) -> None:
    model = two_level_model("lookup.ponder")
    async with worker(dev_env, model, f"tq-{uuid.uuid4().hex[:10]}") as client:
        handle = await client.start("ponder")
        for _ in range(300):
            if sum(1 for p in STARTED if p.startswith(f"{handle.id}.")) == 2:
                break
            await asyncio.sleep(0.05)
        await handle.cancel()
        prompt = await handle.result()
        calls = [o for o in prompt.output if isinstance(o, ToolOutput)]
        statuses = [(await dev_env.client.get_workflow_handle(c.child_prompt_id).describe()).status  # type: ignore[arg-type]
                    for c in calls]
        children = [await client.prompt(c.child_prompt_id).get() for c in calls]  # type: ignore[arg-type]
    assert prompt.state == "cancelled"
    assert [c.result for c in calls] == [ToolError(error="The prompt was cancelled before this call finished.")] * 2
    assert statuses == [WorkflowExecutionStatus.CANCELED] * 2
    assert [child.state for child in children] == ["cancelled"] * 2
