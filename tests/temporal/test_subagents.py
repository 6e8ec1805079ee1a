"""Sub-agents as child PromptWorkflows: result, links and usage roll-up; approvals reaching a person through the
parent (also two levels deep, and across worker SIGKILLs while the child runs a tool and while it waits);
cancelling the parent cancels the child."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import re
import sys
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import Approval, tool
from durable_agent.api import create_app
from durable_agent.api.server import serve_in_background
from durable_agent.cli.follow import follow
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.worker import build_runtime, create_worker, create_workers
from durable_agent.workflows.prompt.workflow import CANCELLED_WHILE_RUNNING
from durable_agent.workflows.protocol import PendingApproval
from tests.support.api import api_config, auth, key_pair
from tests.support.ledger import CHARGE_AMOUNT
from tests.support.workers import TEST_SETTINGS, agent_worker
from tests.temporal.test_durability import Rig

T = TypeVar("T")
RUNS: Counter[str] = Counter()
STARTED: set[str] = set()
CHILD_INSTRUCTIONS = "You research one question."
MANAGER_INSTRUCTIONS = "You hand every question to the researcher."


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
manager = SubAgent("team.ask", description="Ask the manager, who asks the researcher.",
                   instructions=MANAGER_INSTRUCTIONS, plugins=("agents",), max_rounds=4)
plugins = [Plugin("lookup", tools=[find, erase, ponder]), Plugin("agents", tools=[researcher.tool()]),
           Plugin("managers", tools=[manager.tool()])]


def _runs(workflow_id: str | None, call_id: str = "call_r1_0") -> int:
    """Runs of a call, by idempotency key: `<workflow id>/<run id>/<call id>` (run-scoped since version 2)."""
    return sum(n for key, n in RUNS.items() if key.startswith(f"{workflow_id}/") and key.endswith(f"/{call_id}")
               and key.count("/") == (workflow_id or "").count("/") + 2)


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


def three_level_model() -> ScriptedModel:
    """top -> team.ask (manager) -> research.ask (researcher) -> lookup.erase, which needs approval."""
    def script(request: ModelRequest) -> ModelResponse:
        instructions = request.instructions or ""
        if request.round > 1:
            return text("answer: " + _results(request)[0].content)
        if CHILD_INSTRUCTIONS in instructions:
            return tool_calls(("lookup.erase", {"topic": request.messages[0].text}))  # type: ignore[union-attr]
        if MANAGER_INSTRUCTIONS in instructions:
            return tool_calls(("research.ask", {"task": request.messages[0].text}))  # type: ignore[union-attr]
        return tool_calls(("team.ask", {"task": "tides"}), ("team.ask", {"task": "winds"}))

    return ScriptedModel(script)


async def _pending_approvals(handle: PromptHandle, count: int) -> list[PendingApproval]:
    """The parent's pending approvals once `count` are listed (children report theirs by signal)."""
    for _ in range(300):
        pending = await handle.pending_approvals()
        if len(pending) == count:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {count} pending approvals, last: {pending}")


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
    # `<prompt>.<call>.<random>`: a predictable call id never makes a predictable child id (agent/ids.py)
    assert all(re.fullmatch(rf"{re.escape(handle.id)}\.{c.id}\.[0-9a-f]{{8}}", c.child_prompt_id or "") for c in calls)
    assert linked == sorted(c.child_prompt_id for c in calls)  # type: ignore[type-var]
    assert all(child.parent_prompt_id == handle.id and child.state == "completed" for child in children)
    assert prompt.usage.model_calls == 2 + sum(child.usage.model_calls for child in children) == 6
    child_requests = [r for r in model.requests if CHILD_INSTRUCTIONS in (r.instructions or "")]
    assert {t.id for r in child_requests for t in r.tools} == {"lookup.find", "lookup.erase", "lookup.ponder"}
    assert prompt.output[-1].text == "answer: facts about tides | answer: facts about winds"  # type: ignore[union-attr]


async def test_sub_agent_approvals_are_decided_through_the_parent_by_a_new_worker(
        dev_env: WorkflowEnvironment) -> None:
    """Two children wait side by side; the parent's watchers are told (as `dagent run` would print it); a new
    (in-process) worker replays them and the parent forwards an approval and a rejection. The SIGKILL version is
    the test below."""
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    model = two_level_model("lookup.erase")
    async with worker(dev_env, model, queue) as client:
        handle = await client.start("erase two things")
        pending = await _pending_approvals(handle, 2)
        calls = [o for o in (await handle.get()).output if isinstance(o, ToolOutput)]
        shown = io.StringIO()
        watched = await asyncio.wait_for(
            follow(handle, Console(file=shown, width=300), interactive=False, approver="ann"), 60)
    assert [p.path for p in pending] == [[c.child_prompt_id] for c in calls]
    assert [p.tool_call_id for p in pending] == [f"{c.id}/call_r1_0" for c in calls]
    # `dagent run`/`watch` of the parent hear of the child's request and print how to decide it on the parent
    assert watched == "waiting_for_approval"
    assert any(f"dagent approve {handle.id} {p.tool_call_id}\n" in shown.getvalue() for p in pending)  # the first
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
    assert _runs(first.child_prompt_id) == 1 and _runs(second.child_prompt_id) == 0


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
    assert [c.result for c in calls] == [ToolError(error=CANCELLED_WHILE_RUNNING)] * 2
    assert statuses == [WorkflowExecutionStatus.CANCELED] * 2
    assert [child.state for child in children] == ["cancelled"] * 2


async def _dagent(env: dict[str, str], *args: str) -> tuple[int, str]:
    """The `dagent` CLI as a subprocess, awaited without blocking the in-process worker's event loop."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "durable_agent.cli", *args, env=env,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode()


async def test_approvals_of_a_sub_agents_sub_agent_are_listed_and_decided_from_the_top_prompt(
        dev_env: WorkflowEnvironment, tmp_path: Path) -> None:
    """Two levels deep: the grandchild's approvals appear in the top prompt's `pending_approvals` (and in
    `dagent pending`) as `<call>/<call>/<call>` with the whole path, and `dagent approve|reject <top> <id>`
    reaches the grandchild through the middle prompt."""
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
           "DAGENT_TASK_QUEUE": queue, "DAGENT_FILE_DIR": str(tmp_path / "files"), "DAGENT_LOG_LEVEL": "WARNING"}
    async with worker(dev_env, three_level_model(), queue) as client:
        handle = await client.start("erase two things via the manager", user_id=f"u-{queue}")
        pending = await _pending_approvals(handle, 2)
        managers = [o for o in (await handle.get()).output if isinstance(o, ToolOutput)]
        middles = [await client.prompt(m.child_prompt_id).get() for m in managers]  # type: ignore[arg-type]
        researchers = [next(o for o in m.output if isinstance(o, ToolOutput)) for m in middles]
        expected_paths = [[m.child_prompt_id, r.child_prompt_id] for m, r in zip(managers, researchers, strict=True)]
        assert [p.path for p in pending] == expected_paths
        assert [p.tool_call_id for p in pending] == [f"{m.id}/{r.id}/call_r1_0"
                                                     for m, r in zip(managers, researchers, strict=True)]
        assert [(p.tool, p.input, p.reason) for p in pending] == [
            ("lookup.erase", {"topic": "tides"}, "Erasing needs a person."),
            ("lookup.erase", {"topic": "winds"}, "Erasing needs a person.")]

        listed = ""
        for _ in range(100):  # visibility is eventually consistent
            code, listed = await _dagent(env, "pending", "--user", f"u-{queue}")
            if all(p.tool_call_id in listed for p in pending):
                break
            await asyncio.sleep(0.2)
        assert code == 0, listed
        for p in pending:
            line = next(line for line in listed.splitlines() if p.tool_call_id in line)
            assert line.startswith(handle.id) and "lookup.erase" in line
            assert " -> ".join([handle.id, *p.path]) in line

        approved = await _dagent(env, "approve", handle.id, pending[0].tool_call_id, "--by", "ann")
        rejected = await _dagent(env, "reject", handle.id, pending[1].tool_call_id, "--by", "ann", "--reason", "keep")
        prompt = await handle.result()
        assert await handle.pending_approvals() == []
    assert approved[0] == 0 and "erased tides" in approved[1], approved[1]
    assert rejected[0] == 0 and "rejected by ann: keep" in rejected[1], rejected[1]
    first, second = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert first.result == ToolSuccess(output="answer: answer: erased tides")
    assert second.result == ToolSuccess(output="answer: answer: Error: The call was rejected by ann: keep")
    assert [_runs(r.child_prompt_id) for r in researchers] == [1, 0]


class DelegationRig(Rig):
    """The durability rig (dev server on a SQLite file, workers as processes) with the delegation plugins."""

    def worker_env(self) -> dict[str, str]:
        return {**super().worker_env(),
                "DAGENT_PLUGINS": "tests.support.ledger:plugin,tests.support.delegation:survey_plugin,"
                                  "tests.support.delegation:plugin",
                "DAGENT_MODEL_NORMAL": "scripted:tests.support.delegation:model"}


async def _eventually(rig: Rig, check: Callable[[], Awaitable[T | None]], what: str, wait_s: float = 60) -> T:
    async def poll() -> T:
        while True:
            found = await check()
            if found is not None:
                return found
            await asyncio.sleep(0.1)

    return await rig.within(poll(), wait_s, what)


async def test_sub_agent_survives_worker_sigkills_while_running_a_tool_and_while_waiting_for_approval(
        tmp_path: Path) -> None:
    """The worker running the child's slow tool is SIGKILLed: a new worker retries the call (after its 2 s
    heartbeat timeout) and the child goes on to a call that needs approval, which the parent lists. That worker
    is SIGKILLed too while the child waits; the approval, sent to the parent, reaches the child through a third
    worker, which runs the charge exactly once."""
    rig = DelegationRig(tmp_path)
    try:
        await rig.start()
        first = await rig.start_worker()
        handle = await rig.client.start("Delegate the books.", user_id="delegation")
        async def child_started() -> str | None:
            prompt = await handle.get()
            return next((o.child_prompt_id for o in prompt.output if isinstance(o, ToolOutput) and o.child_prompt_id),
                        None)

        child_id = await _eventually(rig, child_started, "the sub-agent to start")
        assert child_id.startswith(f"{handle.id}.call_r1_0.")

        async def survey_attempts() -> list[dict[str, Any]] | None:
            return rig.lines(child_id, "survey.attempt") or None

        await _eventually(rig, survey_attempts, "the child's survey to start")
        first.sigkill()  # mid-tool
        second = await rig.start_worker()

        async def pending() -> list[PendingApproval] | None:
            return await handle.pending_approvals() or None

        [waiting] = await _eventually(rig, pending, "the child's approval to reach the parent")
        second.sigkill()  # while the child waits for approval
        third = await rig.start_worker()
        decided = await rig.within(handle.approve(waiting.tool_call_id, by="ann", wait=True), 60, "the approval")
        prompt = await rig.finish(handle, 60, "the parent after two SIGKILLs")
        child = await rig.client.prompt(child_id).get()
    finally:
        await rig.close()
    assert waiting.tool_call_id == "call_r1_0/call_r2_0" and waiting.path == [child_id]
    assert (waiting.tool, waiting.input) == ("ledger.charge", {"amount": CHARGE_AMOUNT})
    assert decided is not None and decided.decision is not None and decided.decision.by == "ann"
    attempts = rig.lines(child_id, "survey.attempt")
    assert [(a["attempt"], a["pid"]) for a in attempts] == [(1, first.pid), (2, second.pid)]
    charges = rig.lines(child_id, "charge")
    assert [(c["amount"], c["pid"]) for c in charges] == [(CHARGE_AMOUNT, third.pid)]
    assert child.parent_prompt_id == handle.id and child.state == "completed"
    charge = child.tool_call("call_r2_0")
    assert charge is not None and charge.decision is not None and charge.decision.by == "ann"
    charged = json.dumps({'status': 'charged', 'amount': CHARGE_AMOUNT}, separators=(',', ':'))
    report = f"Booked: surveyed books | {charged}"
    assert prompt.output[-1].text == f"Coordinator: {report}"  # type: ignore[union-attr]


FACTS_INSTRUCTIONS = "You count facts."
fact_counter = SubAgent("facts.count", description="Count the facts about a topic.", instructions=FACTS_INSTRUCTIONS,
                        model="high", plugins=(), max_rounds=2,
                        output_schema={"type": "object", "required": ["topic", "facts"],
                                       "properties": {"topic": {"type": "string"}, "facts": {"type": "integer"}}})


async def test_a_sub_agent_with_an_output_schema_returns_data_from_its_own_model_tier(
        dev_env: WorkflowEnvironment) -> None:
    parent_model = ScriptedModel(lambda request: tool_calls(("facts.count", {"task": "tides"})) if request.round == 1
                                 else text("got " + _results(request)[0].content))
    child_model = ScriptedModel(lambda request: text('{"topic": "tides", "facts": 3}'))
    async with agent_worker(dev_env, plugins=[Plugin("counters", tools=[fact_counter.tool()])], model=parent_model,
                            high_model=child_model) as client:
        prompt = await (await client.start("count")).result()
    [call] = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert call.result == ToolSuccess(output={"topic": "tides", "facts": 3})
    assert prompt.output[-1].text == 'got {"topic":"tides","facts":3}'  # type: ignore[union-attr]
    [child_request] = child_model.requests
    assert FACTS_INSTRUCTIONS in (child_request.instructions or "") and child_request.tools == []
    assert all(FACTS_INSTRUCTIONS not in (r.instructions or "") for r in parent_model.requests)


async def test_the_web_api_decides_a_sub_agents_call_through_the_parent(dev_env: WorkflowEnvironment) -> None:
    """POST /prompts/<parent>/approvals/<call>%2F<child call>/approve|reject, with signed decisions: the
    parent forwards each to its child (the id the parent's event stream and pages show)."""
    private_pem, public_pem = key_pair()
    model = two_level_model("lookup.erase")
    async with agent_worker(dev_env, plugins=plugins, model=model, decision_key=public_pem) as client:
        app = create_app(client, api_config(private_pem))
        async with serve_in_background(app) as url, httpx.AsyncClient(base_url=url, headers=auth("ann"),
                                                                      timeout=60) as http:
            handle = await client.start("erase two things", user_id="alice")
            first, second = await _pending_approvals(handle, 2)
            approved = await http.post(f"/prompts/{handle.id}/approvals/{quote(first.tool_call_id, safe='')}/approve")
            rejected = await http.post(f"/prompts/{handle.id}/approvals/{second.tool_call_id}/reject",
                                       json={"reason": "keep it"})
            assert approved.status_code == 200, approved.text
            assert rejected.status_code == 200, rejected.text
            prompt = await asyncio.wait_for(handle.result(), 60)
    assert approved.json()["id"] == first.tool_call_id and approved.json()["decision"]["by"] == "ann"
    assert [o.result for o in prompt.output if isinstance(o, ToolOutput)] == [
        ToolSuccess(output="answer: erased tides"),
        ToolSuccess(output="answer: Error: The call was rejected by ann: keep it")]


async def test_a_sub_agent_of_the_same_tier_calls_its_model_on_the_prompts_model_queue(
        dev_env: WorkflowEnvironment) -> None:
    """Model queues carry the rate limits: a sub-agent's model calls must not bypass them on the workflow queue."""
    tag = uuid.uuid4().hex[:8]
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"wf-{tag}", "model_task_queue": f"models-{tag}"})
    model = two_level_model("lookup.find")
    runtime = build_runtime(settings, plugins=plugins, providers={"normal": model, "high": model})
    workers = create_workers(dev_env.client, runtime, settings)
    async with workers[0], workers[1]:
        client = AgentClient(dev_env.client, settings)
        handle = await client.start("research two things")
        prompt = await handle.result()
        children = [o.child_prompt_id for o in prompt.output if isinstance(o, ToolOutput) and o.child_prompt_id]
        histories = [await client.prompt(child).workflow.fetch_history() for child in children]
    assert prompt.state == "completed" and len(children) == 2
    for history in histories:
        queues = {e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events
                  if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                  and e.activity_task_scheduled_event_attributes.activity_type.name == "dagent.model_round"}
        assert queues == {f"models-{tag}"}


async def test_a_sub_agent_of_another_tier_calls_its_model_on_its_tiers_queue(dev_env: WorkflowEnvironment) -> None:
    """The prompt knows only its own tier's queues; the worker that runs the sub-agent's prompt gives it its tier's
    (workers/routing.py), so the high tier's calls stay under the high tier's limit."""
    tag = uuid.uuid4().hex[:8]
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"wf-{tag}", "model_task_queue": f"models-{tag}",
                                                "model_task_queue_high": f"high-{tag}"})
    high_researcher = dataclasses.replace(researcher, model="high")
    model = two_level_model("lookup.find")
    runtime = build_runtime(settings, plugins=[plugins[0], Plugin("agents", tools=[high_researcher.tool()])],
                            providers={"normal": model, "high": model})
    workers = create_workers(dev_env.client, runtime, settings)
    async with AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        client = AgentClient(dev_env.client, settings)
        handle = await client.start("research two things")
        prompt = await handle.result()
        children = [o.child_prompt_id for o in prompt.output if isinstance(o, ToolOutput) and o.child_prompt_id]
        histories = [await client.prompt(child).workflow.fetch_history() for child in children]
        own = await handle.workflow.fetch_history()
    assert prompt.state == "completed" and len(children) == 2
    assert _model_queues(own) == {f"models-{tag}"}
    assert [_model_queues(history) for history in histories] == [{f"high-{tag}"}] * 2


def _model_queues(history: WorkflowHistory) -> set[str]:
    return {e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "dagent.model_round"}
