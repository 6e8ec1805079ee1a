"""ConversationWorkflow: history, follow-up queue, plugin state, continue-as-new, triggers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    Interceptor,
    StartChildWorkflowInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from durable_agent.activities.history import read_history_link
from durable_agent.activities.transcripts import HistoryChain
from durable_agent.agent.context import ToolContext
from durable_agent.agent.errors import PromptNotStartedError
from durable_agent.agent.messages import AssistantMessage, ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.models import Conversation, Prompt, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import AgentClient, ConversationHandle
from durable_agent.plugins.triggers import plugin as triggers_plugin
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.protocol import PromptRequest
from tests.support.workers import TEST_SETTINGS, agent_worker


class Note(BaseModel):
    note: str


GATE = asyncio.Event()  # memo.add waits on it, so a test can hold a prompt running while inputs queue up
GATE.set()


@tool("memo.add")
async def add_memo(args: Note, ctx: ToolContext) -> int:
    """Remember a note for later prompts."""
    memos = ctx.state.setdefault("memos", [])
    assert isinstance(memos, list)
    memos.append(args.note)
    await asyncio.wait_for(GATE.wait(), 60)
    return len(memos)


memo_plugin = Plugin("memo", tools=[add_memo])


def user_texts(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


def memo_script(request: ModelRequest) -> ModelResponse:
    """Each prompt: round 1 stores its input as a memo, round 2 answers with the memo count."""
    last_user = user_texts(request)[-1]
    results = results_since_last_user(request)
    if not results:
        return tool_calls(("memo.add", {"note": last_user}))
    return text(f"noted #{results[-1].content}: {last_user}")


async def test_history_queue_and_state_carry_across_prompts(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(memo_script)
    GATE.clear()
    async with agent_worker(dev_env, plugins=[memo_plugin], model=model) as client:
        conversation = await client.start_conversation(user_id="ann")
        first = await conversation.send("buy milk")
        second = await conversation.send("call mum")  # arrives while the first runs: queued
        third = await conversation.send("water plants")
        assert [p.id.rsplit("-", 2)[1] for p in (first, second, third)] == ["0001", "0002", "0003"]
        await conversation.prompt_started(first.id)
        snapshot = await conversation.get()
        GATE.set()
        assert snapshot.running_prompt_id == first.id and snapshot.queued == ["call mum", "water plants"]
        results = [await (await conversation.prompt_started(p.id)).result() for p in (first, second, third)]
        final = await conversation.close()
    assert [r.output[-1].text for r in results] == [  # type: ignore[union-attr]
        "noted #1: buy milk", "noted #2: call mum", "noted #3: water plants"]
    assert final.prompt_ids == [first.id, second.id, third.id]
    assert final.plugin_state["memo"] == {"memos": ["buy milk", "call mum", "water plants"]}
    assert all(r.conversation_id == final.id for r in results)
    # The third prompt's model saw both earlier prompts as history, in order.
    last_request = next(r for r in reversed(model.requests) if user_texts(r)[-1] == "water plants")
    assert user_texts(last_request) == ["buy milk", "call mum", "water plants"]
    assert any(isinstance(m, AssistantMessage) and m.text == "noted #1: buy milk" for m in last_request.messages)
    assert final.usage.model_calls == 6


async def test_continue_as_new_keeps_everything(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(memo_script)
    async with agent_worker(dev_env, plugins=[memo_plugin], model=model) as client:
        conversation = await client.start_conversation(user_id="bo", prompts_per_run=2)
        handles = [await conversation.send(f"item {i}") for i in range(7)]  # queued across several runs
        final = await conversation.close()
        runs = [e async for e in dev_env.client.list_workflows(f"WorkflowId = '{conversation.id}'")]
    assert final.runs >= 4 and len(runs) == final.runs
    assert final.prompt_ids == [h.id for h in handles]
    assert final.plugin_state["memo"] == {"memos": [f"item {i}" for i in range(7)]}
    last = await handles[-1].result()
    assert last.output[-1].text == "noted #7: item 6"  # type: ignore[union-attr]


async def _after(env: WorkflowEnvironment, skipped: timedelta, conversation: ConversationHandle, *,
                 prompts: int) -> Conversation:
    """The conversation once `skipped` has passed (time skipped) and it has started `prompts` prompts."""
    await env.sleep(skipped)
    return await _once(conversation, lambda now: len(now.prompt_ids) == prompts)


async def _once(conversation: ConversationHandle, settled: Callable[[Conversation], bool]) -> Conversation:
    """The conversation once `settled` holds for it (or after 10 s)."""
    for _ in range(200):
        now = await conversation.get()
        if settled(now):
            return now
        await asyncio.sleep(0.05)
    return now


def trigger_script(request: ModelRequest) -> ModelResponse:
    users = user_texts(request)
    if users[-1].startswith("(This prompt was started by the system"):
        return text("Reminder: " + request.instructions.split("Its message: ")[-1].split("\n")[0])
    if request.round == 1:
        return tool_calls(("trigger.create", {"message": "stretch your legs", "delay_seconds": 86400}))
    return text("I'll remind you tomorrow.")


async def test_trigger_fires_a_system_prompt_after_a_skipped_day(skip_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(trigger_script)
    async with agent_worker(skip_env, plugins=[triggers_plugin], model=model) as client:
        conversation = await client.start_conversation(user_id="cy")
        prompt = await conversation.send("remind me tomorrow to stretch")
        await conversation.prompt_started(prompt.id)  # its child workflow exists only once started
        waiting = await prompt.wait_until("waiting_for_approval")
        call = waiting.output[0]
        assert isinstance(call, ToolOutput) and call.tool == "trigger.create"
        await prompt.approve(call.id, by="cy")
        done = await prompt.result()
        assert isinstance(done.output[0], ToolOutput) and isinstance(done.output[0].result, ToolSuccess)
        before = await conversation.get()
        assert len(before.prompt_ids) == 1
        [asked] = done.scheduled  # the tool's typed side output, not a displayed output
        assert asked.id == done.output[0].result.output["id"] and asked.delay_seconds == 86400  # type: ignore[union-attr,index]
        [scheduled] = before.scheduled  # the conversation's own schedule, a day after the prompt ended
        delay = scheduled.fire_at - done.finished_at  # type: ignore[operator]
        assert scheduled.id == asked.id and timedelta(days=1) <= delay < timedelta(days=1, seconds=5)
        # The conversation no longer writes the plugin's state: the plugin's own list is as its tool left it.
        assert before.plugin_state["triggers"]["triggers"][0]["status"] == "requested"  # type: ignore[index]
        after = await _after(skip_env, timedelta(days=1, minutes=1), conversation, prompts=2)
        system = await client.prompt(after.prompt_ids[1]).result()
        await conversation.close()
    assert system.input is None and system.state == "completed"
    assert system.output[-1].text == "Reminder: stretch your legs"  # type: ignore[union-attr]
    assert after.scheduled == []


def listing_script(request: ModelRequest) -> ModelResponse:
    """Create a trigger and list it in the same prompt; list it in the next; list it and try to cancel it in
    the prompt it starts when it fires."""
    results = results_since_last_user(request)
    if user_texts(request)[-1].startswith("(This prompt was started by the system"):
        if request.round == 1:
            return tool_calls(("trigger.list", {}))
        if request.round == 2:
            fired_id = json.loads(results[-1].content)[0]["id"]
            return tool_calls(("trigger.cancel", {"id": fired_id}))
        return text("done")
    if user_texts(request)[-1] == "remind me in an hour":
        steps = [tool_calls(("trigger.create", {"message": "drink water", "delay_seconds": 3600})),
                 tool_calls(("trigger.list", {}))]
        return steps[request.round - 1] if request.round <= len(steps) else text("set")
    return tool_calls(("trigger.list", {})) if request.round == 1 else text("listed")


def _listed(prompt: Prompt, tool_name: str) -> list[ToolOutput]:
    return [o for o in prompt.output if isinstance(o, ToolOutput) and o.tool == tool_name]


async def test_trigger_list_says_what_became_of_each_trigger(skip_env: WorkflowEnvironment) -> None:
    """`trigger.list` reads the conversation's schedule (`ToolContext.conversation_schedule`), so the model is
    told a trigger is requested in the prompt that asked for it, scheduled (with when) in later prompts, and
    fired once it fired; `trigger.cancel` refuses a fired one instead of claiming to cancel it."""
    async with agent_worker(skip_env, plugins=[triggers_plugin], model=ScriptedModel(listing_script)) as client:
        conversation = await client.start_conversation(user_id="di")
        asking = await conversation.send("remind me in an hour")
        await conversation.prompt_started(asking.id)
        call = (await asking.wait_until("waiting_for_approval")).output[0]
        await asking.approve(call.id, by="di")
        asked = await asking.result()
        later = await (await conversation.send("what is scheduled?")).result()
        [waiting] = (await conversation.get()).scheduled
        after = await _after(skip_env, timedelta(hours=1, minutes=1), conversation, prompts=3)
        fired = await client.prompt(after.prompt_ids[2]).result()
        await conversation.close()
    [in_asking] = _listed(asked, "trigger.list")
    [in_later] = _listed(later, "trigger.list")
    [in_fired] = _listed(fired, "trigger.list")
    [refused] = _listed(fired, "trigger.cancel")
    as_asked = in_asking.result.output  # type: ignore[union-attr]
    assert [(t["id"], t["status"], t["fire_at"]) for t in as_asked] == [(waiting.id, "requested", None)]
    as_later = in_later.result.output  # type: ignore[union-attr]
    assert [(t["status"], t["fire_at"]) for t in as_later] == [("scheduled", waiting.fire_at.isoformat().replace(
        "+00:00", "Z"))]  # type: ignore[union-attr]
    assert [t["status"] for t in in_fired.result.output] == ["fired"]  # type: ignore[union-attr]
    assert refused.result.type == "error" and "already fired" in refused.result.error  # type: ignore[union-attr]
    assert "prompt_id" not in as_asked[0]


class Reminder(BaseModel):
    message: str
    hours: float = 0
    cancel: str | None = None


@tool("remind.later")
async def remind_later(args: Reminder, ctx: ToolContext) -> str:
    """Schedule a reminder in this conversation, or cancel one (a plugin of our own, no triggers plugin)."""
    if args.cancel:
        return ctx.cancel_scheduled_prompt(args.cancel).id
    return ctx.schedule_prompt(args.message, delay_seconds=args.hours * 3600, id=f"rem-{args.message}").id


def reminder_script(request: ModelRequest) -> ModelResponse:
    users = user_texts(request)
    if users[-1].startswith("(This prompt was started by the system"):
        return text("Due: " + request.instructions.split("Its message: ")[-1].split("\n")[0])
    if request.round > 1:
        return text("ok")
    if users[-1] == "cancel the first":
        return tool_calls(("remind.later", {"message": "-", "cancel": "rem-first"}))
    return tool_calls(("remind.later", {"message": "first", "hours": 1}),
                      ("remind.later", {"message": "second", "hours": 2}))


async def test_scheduled_prompt_side_output_is_scheduled_cancelled_and_fired(skip_env: WorkflowEnvironment) -> None:
    """`ToolContext.schedule_prompt` / `cancel_scheduled_prompt` from any plugin: the conversation schedules what
    `Prompt.scheduled` asks, drops what a later prompt cancels, fires the rest, and keeps no plugin state."""
    model = ScriptedModel(reminder_script)
    async with agent_worker(skip_env, plugins=[Plugin("remind", tools=[remind_later])], model=model) as client:
        conversation = await client.start_conversation(user_id="cy")
        first = await (await conversation.send("remind me twice")).result()
        assert [s.id for s in first.scheduled] == ["rem-first", "rem-second"]
        assert [o.type for o in first.output] == ["tool", "tool", "text"]  # not displayed, not seen by the model
        assert not any("rem-first" in str(m) for m in model.requests[-1].messages if isinstance(m, UserMessage))
        second = await (await conversation.send("cancel the first")).result()
        assert [(s.id, s.cancel) for s in second.scheduled] == [("rem-first", True)]
        # The conversation drops the cancelled one when it takes in the prompt's result, just after `result()`.
        pending = await _once(conversation, lambda now: [s.id for s in now.scheduled] != ["rem-first", "rem-second"])
        assert [s.id for s in pending.scheduled] == ["rem-second"] and pending.plugin_state == {}
        fired = await _after(skip_env, timedelta(hours=3), conversation, prompts=3)
        system = await client.prompt(fired.prompt_ids[2]).result()
        await conversation.close()
    assert fired.scheduled == [] and len(fired.prompt_ids) == 3  # the cancelled one never fired
    assert system.input is None and system.output[-1].text == "Due: second"  # type: ignore[union-attr]


@tool("vault.open", approval=Approval(reason="Opening the vault needs a person."))
async def open_vault(args: Note, ctx: ToolContext) -> str:
    """Open the vault."""
    return "opened"


def vault_script(request: ModelRequest) -> ModelResponse:
    if user_texts(request)[-1] == "open the vault" and request.round == 1:
        return tool_calls(("vault.open", {"note": "now"}))
    return text("ok")


async def test_a_cancelled_prompt_is_recorded_as_cancelled_in_the_conversation(dev_env: WorkflowEnvironment) -> None:
    """Recognised from the child's failure type (a CancelledError), not from words in its message."""
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return vault_script(request)

    async with agent_worker(dev_env, plugins=[Plugin("vault", tools=[open_vault])], model=ScriptedModel(script)) \
            as client:
        conversation = await client.start_conversation(user_id="cy")
        first = await conversation.send("open the vault")
        await conversation.prompt_started(first.id)
        await first.wait_until("waiting_for_approval")
        await first.cancel()
        second = await conversation.send("never mind")
        await conversation.prompt_started(second.id)
        await second.result()
        history = (await second.workflow.fetch_history()).events[0]
    start_input = history.workflow_execution_started_event_attributes.input.payloads[0]
    request = PromptRequest.model_validate_json(start_input.data)
    assert request.history_ref is not None  # the earlier prompt by reference: its stored record says cancelled
    store = TEST_SETTINGS.file_store()
    records = (await HistoryChain().resolve(request.history_ref,
                                            lambda ref: read_history_link(store, ref, None))).records
    assert [(p.id, p.state) for p in records] == [(first.id, "cancelled")]


class _SlowStart(Interceptor):
    """Every child workflow a conversation starts waits a one-second timer first: the gap between an input
    leaving the queue and its prompt's workflow existing (under load, the server's own delay), made wide."""

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _SlowStartInbound


class _SlowStartInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_SlowStartOutbound(outbound))


class _SlowStartOutbound(WorkflowOutboundInterceptor):
    async def start_child_workflow(self, input: StartChildWorkflowInput) -> workflow.ChildWorkflowHandle[Any, Any]:
        await workflow.sleep(1.0)
        return await super().start_child_workflow(input)


async def test_a_sent_prompt_can_be_read_at_once_however_slowly_it_starts(dev_env: WorkflowEnvironment) -> None:
    """`send` to an idle conversation returns a handle of a workflow that exists: reading it at once neither
    fails with "workflow not found" nor waits, however long the start takes."""
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    runtime = build_runtime(settings, plugins=[], providers={"normal": ScriptedModel(lambda r: text("ok")),
                                                             "high": ScriptedModel(lambda r: text("ok"))})
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue, settings=settings,
                             interceptors=[_SlowStart()]):
        conversation = await AgentClient(dev_env.client, settings).start_conversation(user_id="cy")
        for turn in range(2):
            prompt = await conversation.send(f"turn {turn}")
            assert (await prompt.get()).input == f"turn {turn}"
            assert (await prompt.result()).state == "completed"
        await conversation.close()


async def test_a_queued_prompts_handle_waits_for_its_start_or_says_it_is_queued(dev_env: WorkflowEnvironment) -> None:
    """The handle `send` returns for an input queued behind a running prompt has no workflow yet: `get()` says so
    in one line (not the server's "workflow not found"), `wait_until()` and `result()` wait for its turn."""
    GATE.clear()
    try:
        async with agent_worker(dev_env, plugins=[memo_plugin], model=ScriptedModel(memo_script)) as client:
            conversation = await client.start_conversation(user_id="dee")
            first = await conversation.send("buy milk")
            await first.wait_until("running")
            queued = await conversation.send("call mum")
            with pytest.raises(PromptNotStartedError, match=f"{queued.id} is queued in conversation"):
                await queued.get()
            waiting = asyncio.create_task(queued.result())
            await asyncio.sleep(0.3)
            assert not waiting.done()
            GATE.set()
            assert (await waiting).output[-1].text == "noted #2: call mum"  # type: ignore[union-attr]
            assert (await queued.get()).state == "completed"
            await conversation.close()
    finally:
        GATE.set()
