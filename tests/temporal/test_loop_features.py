"""Steering, cancellation, hooks, timeouts and failure modes, structured output, cost, context limits, events."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.runtime import AgentRuntime
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolCallMessage, ToolResultMessage, UserMessage
from durable_agent.agent.models import DataOutput, MessageOutput, ToolError, ToolOutput, ToolSuccess, Usage
from durable_agent.agent.plugins import Plugin, ToolCallInfo
from durable_agent.agent.pricing import Price, PriceTable
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import create_worker
from tests.support.workers import agent_worker

STARTED = asyncio.Event()


class Value(BaseModel):
    value: str


class Delay(BaseModel):
    seconds: float


@tool("echo.say")
async def echo(args: Value, ctx: ToolContext) -> str:
    """Echo."""
    return args.value


@tool("clock.wait", timeout=timedelta(seconds=30), sequential=True)
async def wait(args: Delay, ctx: ToolContext) -> str:
    """Wait a while (heartbeats, so it can be cancelled)."""
    STARTED.set()
    await asyncio.sleep(args.seconds)
    return "waited"


@tool("clock.stuck", timeout=timedelta(seconds=1))
async def stuck(args: Delay, ctx: ToolContext) -> str:
    """Takes longer than its timeout."""
    await asyncio.sleep(args.seconds)
    return "never"


@tool("broken.strict", failure_mode="fail")
async def broken(args: Value, ctx: ToolContext) -> str:
    """Always raises; failing it fails the prompt."""
    raise RuntimeError(f"cannot handle {args.value}")


@tool("broken.lenient")
async def lenient(args: Value, ctx: ToolContext) -> str:
    """Always raises; the model is told."""
    raise RuntimeError(f"cannot handle {args.value}")


tools_plugin = Plugin("t", tools=[echo, wait, stuck, broken, lenient])


def after_round_one(*calls: tuple[str, object], final: str = "done") -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        return tool_calls(*calls) if request.round == 1 else text(final)  # type: ignore[arg-type]
    return ScriptedModel(script)


async def test_steer_skips_rest_of_batch_and_next_round_sees_message(dev_env: WorkflowEnvironment) -> None:
    STARTED.clear()
    model = after_round_one(("clock.wait", {"seconds": 1.0}), ("echo.say", {"value": "b"}),
                            ("echo.say", {"value": "c"}))
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        handle = await client.start("do three things")
        await asyncio.wait_for(STARTED.wait(), 10)
        await handle.steer("Actually, stop and tell me a joke.")
        prompt = await handle.result()
    kinds = [(o.type, getattr(o, "tool", None)) for o in prompt.output]
    assert kinds == [("tool", "clock.wait"), ("tool", "echo.say"), ("tool", "echo.say"), ("message", None),
                     ("text", None)]
    assert prompt.output[0].result == ToolSuccess(output="waited")  # type: ignore[union-attr]
    assert [o.result.error for o in prompt.output[1:3]] == [  # type: ignore[union-attr]
        "Skipped: the user sent a new message before this call ran."] * 2
    assert prompt.output[3] == MessageOutput(role="user", source="steer", text="Actually, stop and tell me a joke.")
    last = model.requests[-1].messages[-1]
    assert isinstance(last, UserMessage) and last.text == "Actually, stop and tell me a joke."


async def _until_resolved(handle, index: int) -> None:
    for _ in range(200):
        prompt = await handle.get()
        if len(prompt.output) > index and prompt.output[index].finished_at is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"output {index} never finished")


async def test_cancel_keeps_outputs_and_cancels_tool(dev_env: WorkflowEnvironment) -> None:
    STARTED.clear()
    model = after_round_one(("echo.say", {"value": "first"}), ("clock.wait", {"seconds": 25}))
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        handle = await client.start("wait long")
        await asyncio.wait_for(STARTED.wait(), 10)
        await _until_resolved(handle, 0)  # the other call of the batch, side by side with the wait
        await handle.cancel()
        prompt = await handle.result()
        status = (await handle.workflow.describe()).status
    assert status == WorkflowExecutionStatus.CANCELED
    assert prompt.state == "cancelled"
    assert prompt.output[0].result == ToolSuccess(output="first")  # type: ignore[union-attr]
    interrupted = prompt.output[1]
    assert isinstance(interrupted, ToolOutput) and isinstance(interrupted.result, ToolError)
    assert "cancelled" in interrupted.result.error


async def test_tool_timeout_and_failure_modes(skip_env: WorkflowEnvironment) -> None:
    """A tool stuck past its timeout ends, after all its attempts, as an error the model is told; a `fail` tool
    fails the prompt. On the time-skipping server: the stuck tool's 6 attempts wait 31 s of retry backoff
    between them, which that server skips (each attempt's 1 s timeout still passes in real time)."""
    model = after_round_one(("clock.stuck", {"seconds": 5}), ("broken.lenient", {"value": "x"}))
    async with agent_worker(skip_env, plugins=[tools_plugin], model=model) as client:
        prompt = await client.run("try")
        assert prompt.state == "completed"
        timed_out, raised = prompt.output[0], prompt.output[1]
        assert isinstance(timed_out.result, ToolError) and "Tool call failed" in timed_out.result.error  # type: ignore[union-attr]
        assert raised.result == ToolError(error="RuntimeError: cannot handle x")  # type: ignore[union-attr]

    strict = after_round_one(("broken.strict", {"value": "y"}), ("echo.say", {"value": "side by side"}),
                             ("clock.wait", {"seconds": 0}))
    async with agent_worker(skip_env, plugins=[tools_plugin], model=strict) as client:
        prompt = await (await client.start("strict")).result()
    assert prompt.state == "failed"
    assert prompt.error == "tool 'broken.strict' failed: RuntimeError: cannot handle y"
    # echo ran side by side with the failing call; the sequential wait after them never ran
    assert [(o.tool, o.result.type if o.result else None) for o in prompt.output] == [  # type: ignore[union-attr]
        ("broken.strict", "error"), ("echo.say", "success"), ("clock.wait", "error")]
    assert "cancelled" not in prompt.output[2].result.error  # type: ignore[union-attr]


class Answer(BaseModel):
    city: str
    temperature: int


async def test_structured_output_retries_then_records_data(dev_env: WorkflowEnvironment) -> None:
    answers = iter(['Paris, 18 degrees', '{"city": "Paris", "temperature": "warm"}',
                    '{"city": "Paris", "temperature": 18}'])
    model = ScriptedModel(lambda request: text(next(answers)))
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        handle = await client.start("weather as JSON", output_schema="tests.temporal.test_loop_features:Answer")
        prompt = await handle.result()
    assert prompt.state == "completed"
    assert prompt.output[-1] == DataOutput(data={"city": "Paris", "temperature": 18})
    notes = [o for o in prompt.output if isinstance(o, MessageOutput)]
    assert len(notes) == 2 and "not valid JSON" in notes[0].text and "temperature" in notes[1].text
    assert "matches this JSON schema" in model.requests[0].instructions
    assert isinstance(model.requests[1].messages[-1], UserMessage)  # the model was told why


async def test_structured_output_gives_up_after_retries(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(lambda request: text("not json"))
    schema = {"type": "object", "required": ["ok"]}
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        prompt = await (await client.start("json please", output_schema=schema, output_retries=1)).result()
    assert prompt.state == "failed" and "did not match the output schema" in (prompt.error or "")
    assert len(model.requests) == 2


class Guard(Plugin):
    """Rewrites arguments, blocks one tool, answers another itself, and tags every result and request."""

    name = "guard"

    async def before_model(self, request: ModelRequest) -> ModelRequest | None:
        return request.model_copy(update={"instructions": request.instructions + "\nGUARDED"})

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> ModelResponse | None:
        return response.model_copy(update={"text": (response.text or "") + " [checked]"}) if response.text else None

    async def before_tool(self, call: ToolCallInfo) -> ToolCallInfo | ToolSuccess | ToolError | None:
        if call.tool == "broken.lenient":
            return ToolError(error="blocked by policy")
        if call.tool == "clock.wait":
            return ToolSuccess(output="cached answer")
        if call.tool == "echo.say":
            return call.model_copy(update={"input": {"value": str(call.input["value"]).upper()}})  # type: ignore[index]
        return None

    async def after_tool(self, call: ToolCallInfo, result: ToolSuccess | ToolError) -> ToolSuccess | ToolError | None:
        if isinstance(result, ToolSuccess):
            return ToolSuccess(output=f"{result.output}!")
        return None


async def test_hooks_change_requests_arguments_and_results(dev_env: WorkflowEnvironment) -> None:
    model = after_round_one(("echo.say", {"value": "hi"}), ("broken.lenient", {"value": "x"}),
                            ("clock.wait", {"seconds": 60}), final="bye")
    async with agent_worker(dev_env, plugins=[tools_plugin, Guard()], model=model) as client:
        prompt = await client.run("hook me")
    results = [o.result for o in prompt.output if isinstance(o, ToolOutput)]
    assert results == [ToolSuccess(output="HI!"), ToolError(error="blocked by policy"),
                       ToolSuccess(output="cached answer!")]
    assert prompt.output[-1].text == "bye [checked]"  # type: ignore[union-attr]
    assert model.requests[0].instructions.endswith("GUARDED")


async def test_cost_from_price_table(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel([text("hello").model_copy(update={
        "usage": Usage(input_tokens=1_000_000, output_tokens=500_000, model_calls=1), "model": "gpt-test"})])
    settings = Settings(task_queue="cost-queue")
    runtime = AgentRuntime(plugins=[tools_plugin], providers={"normal": model},
                           prices=PriceTable({"gpt-test": Price(input=2.0, output=8.0)}))
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
        prompt = await AgentClient(dev_env.client, settings).run("price me")
    assert prompt.usage.cost == pytest.approx(6.0)


async def test_context_limit_trims_history_without_splitting_calls(dev_env: WorkflowEnvironment) -> None:
    def script(request: ModelRequest) -> ModelResponse:
        return tool_calls(("echo.say", {"value": f"r{request.round}"})) if request.round <= 4 else text("end")
    model = ScriptedModel(script)
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        prompt = await client.run("many rounds", context_max_messages=3)
    assert prompt.state == "completed" and len([o for o in prompt.output if isinstance(o, ToolOutput)]) == 4
    last = model.requests[-1].messages
    assert len(last) <= 3
    calls = {m.call_id for m in last if isinstance(m, ToolCallMessage)}
    results = {m.call_id for m in last if isinstance(m, ToolResultMessage)}
    assert calls == results and calls  # kept pairs whole


async def test_watcher_attached_mid_prompt_gets_every_event_once(dev_env: WorkflowEnvironment) -> None:
    STARTED.clear()
    model = after_round_one(("echo.say", {"value": "a"}), ("clock.wait", {"seconds": 1.0}),
                            ("echo.say", {"value": "c"}))
    async with agent_worker(dev_env, plugins=[tools_plugin], model=model) as client:
        handle = await client.start("watch me")
        await asyncio.wait_for(STARTED.wait(), 10)
        late = [(seq, event) async for seq, event in handle.events()]  # attaches mid-prompt, from offset 0
        prompt = await handle.result()
        resumed = [seq async for seq, _ in handle.events(from_offset=3)]
    seqs = [seq for seq, _ in late]
    assert seqs == list(range(len(late)))  # every sequence number once, in order
    added = [e.index for _, e in late if e.kind == "output_added"]
    assert added == list(range(len(prompt.output)))
    final_states = [e.state for _, e in late if e.kind == "state_changed"]
    assert final_states == ["running", "completed"]
    updated = [e for _, e in late if e.kind == "output_updated" and e.index == 1]
    assert updated and updated[-1].output == prompt.output[1]
    assert resumed == seqs[3:]


@tool("fast.add", local=True)
async def fast_add(args: Value, ctx: ToolContext) -> str:
    """A fast tool that runs as a local activity."""
    ctx.display_widget("sum", {"value": args.value})
    return args.value + "!"


async def test_local_tool_runs_as_local_activity(dev_env: WorkflowEnvironment) -> None:
    model = after_round_one(("fast.add", {"value": "x"}), ("echo.say", {"value": "y"}))
    async with agent_worker(dev_env, plugins=[Plugin("fast", tools=[fast_add, echo])], model=model) as client:
        handle = await client.start("local please")
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    assert [o.type for o in prompt.output] == ["tool", "tool", "widget", "text"]
    assert prompt.output[0].result == ToolSuccess(output="x!")  # type: ignore[union-attr]
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled == ["dagent.model_round", "dagent.invoke_tool", "dagent.model_round"]  # echo only
    markers = [e.marker_recorded_event_attributes.marker_name for e in history.events
               if e.HasField("marker_recorded_event_attributes")]
    assert markers.count("core_local_activity") == 1  # the local tool call


async def test_streamed_text_reaches_a_watcher_without_touching_history(dev_env: WorkflowEnvironment) -> None:
    from bench.watchers import Gates, PacedModel
    from durable_agent.workflows.protocol import TextDelta

    answer = "The quick brown fox jumps over the lazy dog, " * 8
    model = PacedModel([text(answer)], hold_round=1)  # holds after its first word until a delta is seen
    settings = Settings(task_queue="stream-deltas")
    runtime = AgentRuntime(plugins=[tools_plugin], providers={"normal": model}, stream_text=True)
    Gates.enabled = True
    Gates.text_seen.clear()
    deltas: list[TextDelta] = []
    try:
        async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
            handle = await AgentClient(dev_env.client, settings).start("stream it")
            async for _, item in handle.live():
                if isinstance(item, TextDelta):
                    deltas.append(item)
                    Gates.text_seen.set()
            prompt = await handle.result()
            history = await handle.workflow.fetch_history()
    finally:
        Gates.enabled = False
    assert deltas and all(d.round == 1 and d.attempt == 1 for d in deltas)
    assert all(answer[d.offset:d.offset + len(d.text)] == d.text for d in deltas)  # each a slice of the answer
    assert prompt.output[-1].text == answer  # type: ignore[union-attr]
    signals = [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]
    assert signals == []  # the streamed text went through heartbeats, not signals