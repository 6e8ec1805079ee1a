"""Derived ids and budgets inside the workflows (issue 41, review security-turn4 §2.16, 2.6): a squatter at the
id a sub-agent child used to have (`<prompt>.<call>`, started through the raw SDK) no longer fails the prompt;
a conversation's triggered turn reserves from the principals' budgets as they are when it fires."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from pydantic import BaseModel
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.agent.period_budgets import BudgetLimit, ledger_id
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.subagents import SubAgent
from durable_agent.agent.tools import Approval, tool
from durable_agent.workflows.names import CONVERSATION_WORKFLOW
from durable_agent.workflows.protocol import ConversationRequest
from tests.support.workers import agent_worker

HELPER = "You help with one task."


class Note(BaseModel):
    note: str


@tool("gate.open", approval=Approval(reason="Opening the gate needs a person."))
async def gate(args: Note, ctx: ToolContext) -> str:
    """Open the gate."""
    return f"opened {args.note}"


@tool("later.set")
async def later(args: Note, ctx: ToolContext) -> str:
    """Run a prompt later in this conversation."""
    return ctx.schedule_prompt(args.note, delay_seconds=0.5, id=f"later-{args.note}").id


helper = SubAgent("helper.ask", description="Ask the helper.", instructions=HELPER, plugins=("gates",), max_rounds=2)
PLUGINS = [Plugin("gates", tools=[gate, later]), Plugin("helpers", tools=[helper.tool()])]


def _script(request: ModelRequest) -> ModelResponse:
    if HELPER in (request.instructions or ""):
        return text("helped")
    said = " ".join(getattr(m, "text", "") or "" for m in request.messages)
    if "schedule" in said and request.round == 1:
        return tool_calls(("later.set", {"note": "tick"}))
    if "delegate" in said:
        if request.round == 1:
            return tool_calls(("gate.open", {"note": "first"}))
        if request.round == 2:
            return tool_calls(("helper.ask", {"task": "hello"}))
    results = [m.content for m in request.messages if isinstance(m, ToolResultMessage)]
    return text("done: " + " | ".join(results))


async def test_a_squatter_at_a_predictable_child_id_does_not_fail_the_prompt(dev_env: WorkflowEnvironment) -> None:
    """§2.16: the prompt waits on a call, an attacker starts a workflow at `<prompt>.call_r2_0` (the next call's
    old child id), the call is approved: the sub-agent still runs (its id carries a random part) and the prompt
    completes."""
    async with agent_worker(dev_env, plugins=PLUGINS, model=ScriptedModel(_script)) as client:
        handle = await client.start("delegate", user_id="alice")
        waiting = await handle.wait_until("waiting_for_approval")
        squat = f"{handle.id}.call_r2_0"
        await client.client.start_workflow(
            CONVERSATION_WORKFLOW, ConversationRequest(conversation_id=squat, user_id="mallory"), id=squat,
            task_queue=client.settings.task_queue)
        try:
            await handle.approve(waiting.output[-1].id, by="ann")  # type: ignore[union-attr]
            prompt = await asyncio.wait_for(handle.result(), 60)
        finally:
            await client.client.get_workflow_handle(squat).terminate("test over")
    assert prompt.state == "completed", prompt.error
    [call] = [o for o in prompt.output if isinstance(o, ToolOutput) and o.tool == "helper.ask"]
    assert call.result == ToolSuccess(output="helped"), call.result
    assert call.child_prompt_id is not None and call.child_prompt_id.startswith(f"{squat}.")


async def test_a_triggered_turn_is_under_the_budget_set_since_the_conversation_began(
        dev_env: WorkflowEnvironment) -> None:
    """§2.6: the conversation starts with no budget; then the user gets one; a turn schedules a prompt: the
    fired turn names the user's (and the conversation's) budget as it is now, and the spent budget stops it."""
    user = f"trig-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=PLUGINS, model=ScriptedModel(_script)) as client:
        conversation = await client.start_conversation(user_id=user)
        try:
            await client.set_budget(f"user:{user}", BudgetLimit(max_tokens=1))
            first = await conversation.send("schedule a reminder", user_id=user)
            await asyncio.wait_for(first.result(), 60)
            for _ in range(300):
                record = await conversation.get()
                if len(record.prompt_ids) >= 2 and record.running_prompt_id is None:
                    break
                await asyncio.sleep(0.1)
            assert len(record.prompt_ids) == 2, record
            fired = await client.prompt(record.prompt_ids[1]).result()
        finally:
            await client.client.get_workflow_handle(conversation.id).terminate("test over")
            for principal in (f"user:{user}", f"conversation:{conversation.id}"):
                with contextlib.suppress(RPCError):  # a ledger never started
                    await client.client.get_workflow_handle(ledger_id(principal)).terminate("test over")
    assert fired.input is None and f"user:{user}" in [s.principal for s in fired.budgets], fired.budgets
    assert fired.budget_stop is not None and f"user:{user}" in fired.budget_stop, fired.budget_stop
    assert fired.usage.model_calls == 0
