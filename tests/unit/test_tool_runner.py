"""ToolRunner (workflows/prompt/tool_runner.py) on a plain host: calls side by side within their limit, results in
place, side outputs in the model's order, failures (and the ones that fail the prompt), a user message skipping
what has not started, local calls, a call with the next model round in one activity, and sub-agents."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from durable_agent.agent.errors import PromptFailedError
from durable_agent.agent.models import (
    DataOutput,
    Prompt,
    ToolError,
    ToolOutput,
    ToolSuccess,
    Usage,
    WidgetOutput,
)
from durable_agent.agent.tools import ToolOptions
from durable_agent.workflows.activity_refs import INVOKE_TOOL, TOOL_THEN_MODEL
from durable_agent.workflows.prompt.approvals import ApprovalDesk
from durable_agent.workflows.prompt.round_input import RoundInputs
from durable_agent.workflows.prompt.tool_runner import INFRASTRUCTURE_ATTEMPTS, SKIPPED_BY_STEER, ToolRunner
from durable_agent.workflows.protocol import (
    PlannedCall,
    PromptRequest,
    ReadyCall,
    RoundResult,
    SubAgentCall,
    ToolInvocation,
    ToolInvocationResult,
    ToolThenModel,
    ToolThenModelResult,
)
from tests.unit.conftest import PlainHost, activity_failure, context_of, fails


class Runner:
    def __init__(self, host: PlainHost, request: PromptRequest | None = None, *, steered: bool = False) -> None:
        self.context = context_of(host, request)
        self.record = self.context.record
        self.steered = steered
        self.tools = ToolRunner(self.context, ApprovalDesk(self.context, steered=self._steered).children,
                                steered=self._steered)

    def _steered(self) -> bool:
        return self.steered

    def calls(self, *calls: PlannedCall) -> list[tuple[ToolOutput, PlannedCall]]:
        return [(self.record.open_call(call), call) for call in calls]


async def test_calls_run_side_by_side_within_the_limit_and_side_outputs_keep_the_models_order(host: PlainHost) -> None:
    runner = Runner(host, PromptRequest(max_parallel_tools=2))
    running, most = 0, 0
    finish_order: list[str] = []

    async def tool(call: ToolInvocation) -> ToolInvocationResult:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(5 if call.id == "slow" else 1):  # the first call finishes last
            await asyncio.sleep(0)
        running -= 1
        finish_order.append(call.id)
        widget = WidgetOutput(widget="card", data=call.id)
        return ToolInvocationResult(result=ToolSuccess(output=f"done {call.id}"), side_outputs=[widget])

    host.answers[INVOKE_TOOL.name] = tool
    calls = runner.calls(*(ReadyCall(id=i, tool="lookup", input={"q": i}) for i in ("slow", "fast", "third")))
    await runner.tools.run(calls)
    assert most == 2 and finish_order[0] == "fast" and finish_order[-1] != "fast"
    assert [entry.result for entry, _ in calls] == [ToolSuccess(output=f"done {i}") for i in ("slow", "fast", "third")]
    widgets = [o.data for o in runner.record.prompt.output if isinstance(o, WidgetOutput)]
    assert widgets == ["slow", "fast", "third"]  # the model's order, not the order they finished in
    assert [call.input for _, call, _ in host.ran] == [{"q": "slow"}, {"q": "fast"}, {"q": "third"}]


async def test_a_failed_call_is_an_error_result_and_a_fail_mode_call_fails_the_prompt_in_order(host: PlainHost) -> None:
    runner = Runner(host)
    host.answers[INVOKE_TOOL.name] = fails(activity_failure("card declined", type="ToolRaised"))
    [(entry, _)] = calls = runner.calls(ReadyCall(id="c1", tool="pay"))
    await runner.tools.run(calls)
    assert entry.result == ToolError(error="Tool call failed: card declined") and entry.finished_at is not None
    assert runner.tools.failed_tools == ["pay"] and ("tool_call", ("pay", "error")) in host.metrics.calls
    fatal = runner.calls(ReadyCall(id="c2", tool="pay", options=ToolOptions(failure_mode="fail", local=False)))
    with pytest.raises(PromptFailedError, match="tool 'pay' failed: Tool call failed: card declined"):
        await runner.tools.run(fatal)


async def test_a_user_message_skips_the_calls_not_started(host: PlainHost) -> None:
    runner = Runner(host, steered=True)
    calls = runner.calls(ReadyCall(id="c1", tool="pay"), ReadyCall(id="c2", tool="mail"))
    await runner.tools.run(calls)
    assert host.ran == [] and [entry.result for entry, _ in calls] == [ToolError(error=SKIPPED_BY_STEER)] * 2


async def test_a_local_call_runs_as_a_local_activity_with_the_tools_attempts_and_timeout(host: PlainHost) -> None:
    runner = Runner(host)
    host.answers[INVOKE_TOOL.name] = lambda call: ToolInvocationResult(result=ToolSuccess(output=1))
    await runner.tools.run(runner.calls(ReadyCall(id="c1", tool="add", input={"a": 1}, options=ToolOptions(
        local=True, max_attempts=2, timeout=timedelta(seconds=7)))))
    [(name, invocation, options)] = host.ran
    assert name == INVOKE_TOOL.name and options["local"] is True
    assert options["retry_policy"].maximum_attempts == 2 + INFRASTRUCTURE_ATTEMPTS
    assert options["start_to_close_timeout"].total_seconds() == 7 and options["summary"].startswith("tool add")
    assert (invocation.id, invocation.input, invocation.user_id) == ("c1", {"a": 1}, "owner")


async def test_a_call_with_the_next_model_round_returns_that_rounds_result(host: PlainHost) -> None:
    runner = Runner(host)
    [(entry, call)] = runner.calls(ReadyCall(id="c1", tool="lookup"))
    then = RoundInputs(runner.context).ahead(2, "run-1")
    answered = RoundResult(text="the answer")

    def fused(request: ToolThenModel) -> ToolThenModelResult:
        assert request.round.round == 2 and request.entry_index == 0
        return ToolThenModelResult(tool=ToolInvocationResult(result=ToolSuccess(output="found")), round=answered)

    host.answers[TOOL_THEN_MODEL.name] = fused
    assert await runner.tools.invoke(entry, call, entry.input, then) == answered
    assert entry.result == ToolSuccess(output="found") and "then model round 2" in host.ran[0][2]["summary"]


async def test_a_sub_agent_call_runs_a_child_prompt_whose_answer_is_the_result(host: PlainHost) -> None:
    runner = Runner(host, PromptRequest(budgets=["user:ann"]))
    host.child = lambda request: Prompt(id=request.prompt_id or "", user_id=request.user_id, state="completed",
                                        output=[DataOutput(data={"total": 3})], usage=Usage(input_tokens=10))
    [(entry, _)] = calls = runner.calls(ReadyCall(id="c1", tool="helper", input={"task": "sum"},
                                                     agent=SubAgentCall(instructions="add up")))
    await runner.tools.run(calls)
    assert entry.result == ToolSuccess(output={"total": 3}) and runner.record.prompt.usage.input_tokens == 10
    [(request, child_id)] = host.started
    assert child_id == entry.child_prompt_id and child_id.startswith("wf-1.c1.")
    assert (request.input, request.budgets, request.parent.tool_call_id) == ("sum", ["user:ann"], "c1")  # type: ignore[union-attr]
    host.child = lambda request: Prompt(id="x", user_id="owner", state="failed", error="model down")
    [(failed, _)] = again = runner.calls(ReadyCall(id="c2", tool="helper", agent=SubAgentCall(instructions="x")))
    await runner.tools.run(again)
    assert failed.result == ToolError(error="Sub-agent 'helper' ended failed: model down")
