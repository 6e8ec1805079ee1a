"""Period budgets enforced in prompts (issue 27): each round reserves from the user's and the conversation's
ledgers and settles its spend; a spent budget stops the prompt, or (on_exhausted=ask) waits for an approver to
grant more through the approval machinery.

Real dev server and worker. The scripted model reports 400 input + 100 output tokens per call.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio.client import WorkflowHistoryEventFilterType
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.errors import DecisionRefused
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.models import MessageOutput, ToolOutput, ToolSuccess, Usage
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL, BudgetLimit, ledger_id
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from tests.support.workers import agent_worker


class Step(BaseModel):
    n: int


@tool("loop.step")
async def step(args: Step, ctx: ToolContext) -> str:
    """One more step."""
    return f"step {args.n}"


PLUGIN = Plugin("loop", tools=[step])


def _endless(request: ModelRequest) -> ModelResponse:
    response = tool_calls(("loop.step", {"n": request.round}))
    response.usage = Usage(input_tokens=400, output_tokens=100, model_calls=1)
    return response


def _one_round(request: ModelRequest) -> ModelResponse:
    response = text("done")
    response.usage = Usage(input_tokens=400, output_tokens=100, model_calls=1)
    return response


async def _activity_types(client: AgentClient, prompt_id: str) -> list[str]:
    history = await client.client.get_workflow_handle(prompt_id).fetch_history(
        event_filter_type=WorkflowHistoryEventFilterType.ALL_EVENT)
    return [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")]


async def test_user_budget_stops_prompts_and_spares_others(dev_env: WorkflowEnvironment) -> None:
    user, other = f"u-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_endless)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=1200), by="admin")
        first = await asyncio.wait_for(client.run("go", user_id=user, max_rounds=20), 60)
        # 500 tokens a round: 1000 after round 2 is under 1200, so round 3 runs; round 4 is refused.
        assert first.state == "stopped" and first.force_completed and first.rounds == 3
        assert first.budget_stop == f"user:{user} daily budget reached: 1500 tokens used of 1200"
        last = first.output[-1]
        assert isinstance(last, MessageOutput) and last.source == "budget"
        stop = first.stop
        assert stop is not None and (stop.kind, stop.principal, stop.who_can_grant) == (
            "period_budget", f"user:{user}", [])
        assert stop.resets_at == first.budgets[0].period_end and stop.resets_at is not None
        assert last.text == (f"Stopped: {first.budget_stop}. The work is not finished: whoever manages budgets may "
                             f"raise it (`dagent budget set user:{user} …`), or ask again after the budget resets at "
                             f"{stop.resets_at:%Y-%m-%d %H:%M} UTC.")
        assert [(b.principal, b.spent_tokens, b.limit.max_tokens if b.limit else None) for b in first.budgets] == [
            (f"user:{user}", 1500, 1200)]
        types = await _activity_types(client, first.id)
        assert types.count("dagent.budget_reserve") == 4 and types.count("dagent.budget_settle") == 3

        # The period's budget is spent: the user's next prompt makes no model call at all.
        second = await asyncio.wait_for(client.run("again", user_id=user, max_rounds=20), 60)
        assert second.rounds == 0 and second.usage.model_calls == 0 and second.budget_stop == first.budget_stop

        # Another user has no budget: no ledger is asked, not even once.
        free = await asyncio.wait_for(client.run("go", user_id=other, max_rounds=2), 60)
        assert free.rounds == 2 and free.budget_stop is None and free.budgets == []
        assert not any(t.startswith("dagent.budget") for t in await _activity_types(client, free.id))

        view = await client.budget(f"user:{user}")
        assert view.standing.spent_tokens == 1500 and view.standing.reservations == 0


async def test_conversation_budget_stops_its_prompts(dev_env: WorkflowEnvironment) -> None:
    user = f"c-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_one_round)) as client:
        conversation = await client.start_conversation(user_id=user)
        # Set after the conversation started: each send looks the budgets up again.
        await client.set_budget(f"conversation:{conversation.id}", BudgetLimit(period="week", max_tokens=1000))
        results = []
        for n in range(3):
            queued = await conversation.send(f"message {n}")
            handle = await conversation.prompt_started(queued.id)  # it starts once the one before has ended
            results.append(await asyncio.wait_for(handle.result(), 60))
        assert [p.budget_stop for p in results[:2]] == [None, None]
        stop = f"conversation:{conversation.id} weekly budget reached: 1000 tokens used of 1000"
        assert results[2].budget_stop == stop
        assert results[2].usage.model_calls == 0
        assert results[1].budgets[0].principal == f"conversation:{conversation.id}"
        await conversation.close()


async def test_ask_for_more_budget_through_the_approval_machinery(dev_env: WorkflowEnvironment) -> None:
    user = f"a-{uuid.uuid4().hex[:8]}"
    principal = f"user:{user}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_endless)) as client:
        await client.set_budget(principal, BudgetLimit(period="day", max_tokens=1000, on_exhausted="ask",
                                                       approvers=["role:finance"]))
        handle = await client.start("go", user_id=user, max_rounds=20)
        waiting = await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 60)
        assert waiting.rounds == 2
        [pending] = await handle.pending_approvals()
        assert pending.tool == MORE_BUDGET_TOOL
        assert pending.input == {"budget": principal, "period": "day", "unit": "tokens", "allowance": 1000.0,
                                 "spent": 1000.0, "asking": 500}  # nothing over the allowance, plus one round
        assert pending.reason.startswith(f"{principal} daily budget reached: 1000 tokens used of 1000")
        assert pending.approvers == ["role:finance"] and pending.four_eyes

        # Checked by identity: the prompt's own user may not grant it, nor someone without the role.
        with pytest.raises(DecisionRefused):
            await handle.approve(pending.tool_call_id, by=user, roles=["finance"], wait=True)
        with pytest.raises(DecisionRefused):
            await handle.approve(pending.tool_call_id, by="mallory", wait=True)
        with pytest.raises(DecisionRefused, match="asking"):  # a correction must fit the request's schema
            await handle.approve(pending.tool_call_id, by="bob", roles=["finance"], input={"asking": -5}, wait=True)
        # Approved with a correction: 500 more tokens this period (one more round), then it asks again.
        granted = await handle.approve(pending.tool_call_id, by="bob", roles=["finance"], input={"asking": 500},
                                       wait=True)
        assert isinstance(granted, ToolOutput) and isinstance(granted.result, ToolSuccess)
        assert granted.decision is not None and granted.decision.by == "bob"

        async def second_request() -> str:
            while True:
                asks = [p for p in await handle.pending_approvals() if p.tool_call_id != pending.tool_call_id]
                if asks:
                    return asks[0].tool_call_id
                await asyncio.sleep(0.1)

        again = await asyncio.wait_for(second_request(), 60)
        await handle.reject(again, by="bob", roles=["finance"], reason="enough for today", wait=True)
        done = await asyncio.wait_for(handle.result(), 60)

    assert done.state == "stopped" and done.rounds == 3 and done.usage.model_calls == 3
    assert done.budget_stop == f"{principal} daily budget reached: 1500 tokens used of 1500"
    assert done.stop is not None and done.stop.who_can_grant == ["role:finance"]
    assert "anyone with the finance role may grant more" in done.stop.next_step
    asks = [e for e in done.output if isinstance(e, ToolOutput) and e.tool == MORE_BUDGET_TOOL]
    assert [a.decision.decision if a.decision else None for a in asks] == ["approved", "rejected"]
    assert asks[0].input["asking"] == 500 and asks[0].decision and asks[0].decision.original_input  # type: ignore[index]
    assert done.budgets[0].extra_tokens == 500 and done.budgets[0].spent_tokens == 1500


HELPER_INSTRUCTIONS = "You help with one task."
helper = SubAgent("helper.ask", description="Hand a task to the helper.", instructions=HELPER_INSTRUCTIONS,
                  plugins=("loop",), max_rounds=2)


def _delegating(request: ModelRequest) -> ModelResponse:
    if HELPER_INSTRUCTIONS in (request.instructions or ""):
        response = text("helped")
    elif request.round == 1:
        response = tool_calls(("helper.ask", {"task": "one thing"}))
    else:
        response = text("done")
    response.usage = Usage(input_tokens=400, output_tokens=100, model_calls=1)
    return response


async def test_a_sub_agent_spends_its_parents_period_budget(dev_env: WorkflowEnvironment) -> None:
    user = f"s-{uuid.uuid4().hex[:8]}"
    plugins = [PLUGIN, Plugin("helpers", tools=[helper.tool()])]
    async with agent_worker(dev_env, plugins=plugins, model=ScriptedModel(_delegating)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=100_000))
        parent = await asyncio.wait_for(client.run("go", user_id=user), 60)
        assert parent.state == "completed" and parent.usage.model_calls == 3  # two rounds here, one in the helper
        [call] = [e for e in parent.output if isinstance(e, ToolOutput) and e.tool == "helper.ask"]
        assert call.child_prompt_id is not None
        child = await client.prompt(call.child_prompt_id).get()
        assert [b.principal for b in child.budgets] == [f"user:{user}"]
        assert "dagent.budget_reserve" in await _activity_types(client, child.id)
        view = await client.budget(f"user:{user}")
        assert view.standing.spent_tokens == 1500 and view.standing.reservations == 0


async def test_a_spent_daily_budget_is_back_the_next_day(skip_env: WorkflowEnvironment) -> None:
    """Time-skipping server: the user's prompts stop once the day's budget is spent; a day later they run."""
    user = f"d-{uuid.uuid4().hex[:8]}"
    async with agent_worker(skip_env, plugins=[PLUGIN], model=ScriptedModel(_one_round)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=500))
        try:
            await _spend_a_day(skip_env, client, user)
        finally:  # a ledger left with no worker holds the shared time-skipping server's clock at its day end
            await client.client.get_workflow_handle(ledger_id(f"user:{user}")).terminate("test over")


async def _spend_a_day(skip_env: WorkflowEnvironment, client: AgentClient, user: str) -> None:
    """Spend the day's budget (the next prompt stops), skip a day, and run again."""
    with skip_env.auto_time_skipping_disabled():  # else waiting on a result skips to the ledger's day end
        first = await asyncio.wait_for(client.run("hello", user_id=user), 60)
        second = await asyncio.wait_for(client.run("again", user_id=user), 60)
    assert first.budget_stop is None and first.usage.model_calls == 1
    assert second.budget_stop == f"user:{user} daily budget reached: 500 tokens used of 500"
    await skip_env.sleep(timedelta(days=1))
    with skip_env.auto_time_skipping_disabled():
        third = await asyncio.wait_for(client.run("next day", user_id=user), 60)
        view = await client.budget(f"user:{user}")
    assert third.budget_stop is None and third.usage.model_calls == 1
    assert view.standing.spent_tokens == 500 and [p.spent_tokens for p in view.past] == [500]
    assert third.budgets[0].period_start == first.budgets[0].period_start + timedelta(days=1)  # type: ignore[operator]


async def test_a_raw_start_naming_a_bad_budget_fails_with_the_reason(dev_env: WorkflowEnvironment) -> None:
    """A start from any Temporal client with a budget principal that is not `user:`/`conversation:` fails the
    prompt at once with the reason (no ledger is started for it)."""
    prompt_id = f"raw-budget-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel([text("x")])) as client:
        await client.client.start_workflow("PromptWorkflow", {"input": "hi", "budgets": ["bob"]}, id=prompt_id,
                                           task_queue=client.settings.task_queue)
        prompt = await asyncio.wait_for(client.prompt(prompt_id).result(), 60)
    assert prompt.state == "failed" and "invalid PromptRequest input" in (prompt.error or "")
    reason = "budgets.0: Value error, budget principal 'bob' must be user:<id> or conversation:<id>"
    assert reason in (prompt.error or "")
