"""Record workflow histories for the replay tests: `python -m tests.record_histories [--force]`.

Existing files are kept (they are the proof that histories recorded by older code still replay); only missing
ones are written. `--force` rewrites them all: only before a release, or for a history whose path changed by a
patch's drain (docs/changing-workflows.md). tests/unit/test_replay.py replays every file found here.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client, WorkflowHandle

from durable_agent.agent.messages import ModelRequest, ModelResponse, UserMessage
from durable_agent.agent.period_budgets import BudgetLimit, ledger_id
from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.cli.devserver import DevServer
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, connect, create_model_worker, create_worker
from durable_agent.workflows.budget.limits import PromptBudget
from durable_agent.workflows.protocol import ModelRouting, PendingApproval
from tests import scenarios
from tests.fakes.notify_servers import WEBHOOK_SECRET, WebhookReceiver
from tests.support.notify import notify_toml, until, wire_model, wire_plugin

OUT = Path(__file__).resolve().parent / "histories"


FORCE = "--force" in sys.argv


async def _save(name: str, handle: WorkflowHandle, run_id: str | None = None) -> None:  # type: ignore[type-arg]
    path = OUT / f"{name}.json"
    if path.exists() and not FORCE:
        print(f"kept {name}")
        return
    if run_id is not None:
        handle = handle._client.get_workflow_handle(handle.id, run_id=run_id)
    history = await handle.fetch_history()
    path.write_text(history.to_json())
    print(f"recorded {name}: {len(history.events)} events")


async def _first_pending(handle: PromptHandle) -> str:
    prompt = await handle.wait_until("waiting_for_approval")
    return next(p.tool_call_id for p in await handle.pending_approvals()) if prompt.state != "completed" else ""


async def _record(agent: AgentClient, text: str, name: str, **options: object) -> PromptHandle:
    """A prompt started with `text` and run to its end, its history saved as `name`."""
    handle = await agent.start(text, **options)  # type: ignore[arg-type]
    await handle.result()
    await _save(name, handle.workflow)
    return handle


async def _conversation(agent: AgentClient, conversation_id: str, texts: tuple[str, ...],
                        prompts_per_run: int) -> tuple[WorkflowHandle, str]:  # type: ignore[type-arg]
    """A conversation sent `texts` and closed: its handle and the id of its first run."""
    conversation = await agent.start_conversation(conversation_id=conversation_id, user_id="u1",
                                                  prompts_per_run=prompts_per_run)
    for text in texts:
        await conversation.send(text)
    await conversation.close()
    runs = [e async for e in agent.client.list_workflows(f"WorkflowId = '{conversation_id}'")]
    return conversation._handle, min(runs, key=lambda e: e.start_time).run_id


async def _conversation_with_taken_id(agent: AgentClient) -> WorkflowHandle:  # type: ignore[type-arg]
    """A conversation whose second turn's id someone started first (while the first turn waited for approval):
    the turn runs under a fresh id. Returns the closed conversation's handle."""
    conversation = await agent.start_conversation(conversation_id="hist-conversation-taken", user_id="u1")
    first = await conversation.prompt_started((await conversation.send("approval one")).id)
    queued = await conversation.send("approval two")
    await (await agent.start("completed", prompt_id=queued.id, user_id="mallory")).result()
    await first.approve(await _first_pending(first), by="alice")
    await first.result()
    running = None
    for _ in range(600):
        running = (await conversation.get()).running_prompt_id
        if running not in (None, first.id):
            break
        await asyncio.sleep(0.05)
    assert running is not None and running != queued.id, running
    second = agent.prompt(running)
    await second.approve(await _first_pending(second), by="alice")
    await conversation.close()
    return conversation._handle


async def _conversation_with_scheduled_prompts(agent: AgentClient, conversation_id: str
                                               ) -> WorkflowHandle:  # type: ignore[type-arg]
    conversation = await agent.start_conversation(conversation_id=conversation_id, user_id="u1")
    await (await conversation.send("remind")).result()
    await (await conversation.send("unremind")).result()
    for _ in range(150):  # the `soon` prompt fires a second after the first turn ended
        if len((await conversation.get()).prompt_ids) == 3:
            break
        await asyncio.sleep(0.2)
    await agent.prompt((await conversation.get()).prompt_ids[2]).result()
    await conversation.close()
    await conversation._handle.result()
    return conversation._handle


async def _child_pending(handle: PromptHandle) -> PendingApproval:
    """The first approval a sub-agent's prompt reports to its parent (by a signal, so once it arrives)."""
    pending = await handle.pending_approvals()
    while not pending:
        await asyncio.sleep(0.05)
        pending = await handle.pending_approvals()
    return pending[0]


async def _record_notified(client: Client, settings: Settings) -> None:
    with WebhookReceiver() as hooks:
        config = notify_toml(Path("/tmp/dagent-rec-notify.toml"), webhook_url=hooks.url, webhook_secret=WEBHOOK_SECRET)
        notified = settings.model_copy(update={"task_queue": "record-histories-notify", "notify_config": str(config)})
        runtime = build_runtime(notified, plugins=[wire_plugin(["webhook"], day=timedelta(seconds=1))],
                                providers={"normal": wire_model()})
        async with create_worker(client, runtime, task_queue=notified.task_queue, settings=notified):
            agent = AgentClient(client, notified)
            handle = await agent.start("wire 500 to acme", prompt_id="hist-notified", user_id="owner")
            call = await _first_pending(handle)
            await until(lambda: "escalated" in hooks.steps(), "the escalation")
            await handle.approve(call, by="carol", roles=["cfo"], wait=True)
            await handle.result()
            await _save("prompt_notified_reminded_escalated", handle.workflow)


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    async with DevServer() as server:
        settings = Settings(temporal_address=server.address, task_queue="record-histories", file_dir="/tmp/dagent-rec")
        client = await connect(settings)
        def forgetful(request: ModelRequest) -> ModelResponse:
            """The scenarios' model; in the `forget` scenario's round 2 the worker forgets every transcript."""
            first_user = next((m.text for m in request.messages if isinstance(m, UserMessage)), "")
            if first_user == "forget" and request.round == 2:
                runtime.transcripts.clear()
            return scenarios.script(request)

        runtime = build_runtime(settings, plugins=[scenarios.plugin, scenarios.agents_plugin,
                                                   scenarios.reminders_plugin],
                                providers={"normal": ScriptedModel(forgetful),
                                           "high": [scenarios.unavailable, scenarios.model]})
        agent = AgentClient(client, settings)
        async with create_worker(client, runtime, task_queue=settings.task_queue):
            await _record(agent, "completed", "prompt_completed", prompt_id="hist-completed", user_id="u1",
                          conversation_id="c1")

            waiting = await agent.start("approval", prompt_id="hist-waiting")
            await _first_pending(waiting)
            await _save("prompt_waiting_for_approval", waiting.workflow)
            await waiting.approve(await _first_pending(waiting), by="alice", input={"amount": 450})
            await waiting.result()
            await _save("prompt_approved_with_correction", waiting.workflow)

            rejected = await agent.start("approval", prompt_id="hist-rejected")
            call = await _first_pending(rejected)
            await rejected.approve("call-unknown")  # ignored and audited
            await rejected.reject(call, by="bob", reason="no")
            await rejected.result()
            await _save("prompt_rejected", rejected.workflow)

            batch = await agent.start("batch", prompt_id="hist-batch")
            await batch.approve(await _first_pending(batch), wait=True)
            await batch.result()
            await _save("prompt_deferred_batch", batch.workflow)

            await _record(agent, "parallel", "prompt_parallel_calls", prompt_id="hist-parallel")

            approvals = await agent.start("approvals", prompt_id="hist-batch-approvals")
            await _first_pending(approvals)
            pending = await approvals.pending_approvals()
            while len(pending) < 2:
                pending = await approvals.pending_approvals()
            await approvals.reject(pending[1].tool_call_id, by="bob", reason="too much")
            await approvals.approve(pending[0].tool_call_id, by="alice", input={"amount": 150})
            await approvals.result()
            await _save("prompt_batch_approvals", approvals.workflow)

            delegated = await agent.start("delegate", prompt_id="hist-sub-agent")
            child_pending = await _child_pending(delegated)  # the parent runs while its child waits
            child = agent.prompt(child_pending.path[-1])
            await _save("prompt_sub_agent_child_waiting", child.workflow)
            await delegated.approve(child_pending.tool_call_id, by="alice", input={"amount": 450})
            await delegated.result()
            await _save("prompt_sub_agent", delegated.workflow)
            await _save("prompt_sub_agent_child", child.workflow)

            await _record(agent, "invalid", "prompt_invalid_calls", prompt_id="hist-invalid")

            await _record(agent, "fail", "prompt_failed", prompt_id="hist-failed")

            steered = await agent.start("approval", prompt_id="hist-steered")
            await _first_pending(steered)
            await steered.steer("never mind, just say hi")
            await steered.result()
            await _save("prompt_steered_while_waiting", steered.workflow)

            cancelled = await agent.start("approval", prompt_id="hist-cancelled")
            await _first_pending(cancelled)
            await cancelled.cancel()
            await cancelled.result()
            await _save("prompt_cancelled_while_waiting", cancelled.workflow)

            fallback = await agent.start("completed", prompt_id="hist-fallback", model="high",
                                         model_settings={"temperature": 0.2, "max_output_tokens": 500})
            await fallback.result()
            await _save("prompt_model_fallback", fallback.workflow)

            # Rate limits per provider: the fallback round runs on the queue `model_routing` gives its provider.
            async with create_model_worker(client, runtime, task_queue="record-histories-first"), \
                    create_model_worker(client, runtime, task_queue="record-histories-scripted", rate_limit=10):
                routed = await agent.start(
                    "completed", prompt_id="hist-fallback-routed", model="high",
                    model_task_queue="record-histories-first",
                    model_routing=ModelRouting(providers={"scripted": "record-histories-scripted"}))
                await routed.result()
            await _save("prompt_fallback_on_provider_queue", routed.workflow)

            await _record(agent, "reasoning", "prompt_with_reasoning", prompt_id="hist-reasoning")

            two = ("completed one", "completed two")
            conversation, first_run = await _conversation(agent, "hist-conversation", two, 1)
            await _save("conversation_continued_as_new", conversation, run_id=first_run)
            await _save("conversation_closed", conversation)

            await _record(agent, "forget", "prompt_transcript_sent_whole", prompt_id="hist-forget")

            large = ("large one", "large two", "large three")
            by_reference, first_run = await _conversation(agent, "hist-conversation-refs", large, 2)
            await _save("conversation_history_by_reference", by_reference, run_id=first_run)
            turns = (await by_reference.result()).prompt_ids
            await _save("prompt_in_conversation_by_reference", agent.prompt(turns[1]).workflow)

            first_given = await agent.start("completed first", prompt_id="hist-given-0")
            given = await agent.start("large given", prompt_id="hist-given-history",
                                      history=[await first_given.result()])
            await given.result()
            await _save("prompt_with_given_history", given.workflow)

            # A start without a workflow version (a raw-SDK client's input): the unversioned path.
            await _record(agent, "parallel", "prompt_unversioned", prompt_id="hist-unversioned",
                          workflow_version=None)

            # By now this worker has seen demo.echo and demo.pay finish fast many times: fast tools run local
            # (three calls in one round).
            fast = await agent.start("parallel", prompt_id="hist-fast-tools")
            await fast.result()
            if b"core_local_activity" not in (await fast.workflow.fetch_history()).to_json().encode():
                raise SystemExit("hist-fast-tools ran no tool as a local activity")
            await _save("prompt_fast_tools", fast.workflow)
            # A fast tool's call that is its round's only one runs with the next model round (ReadyCall.fast).
            fused = await agent.start("completed", prompt_id="hist-fast-call-with-next-round")
            await fused.result()
            history = await fused.workflow.fetch_history()
            if not any(b'"fast":true' in payload.data for event in history.events
                       for payload in event.activity_task_completed_event_attributes.result.payloads):
                raise SystemExit("hist-fast-call-with-next-round planned no fast call")
            recorded = history.to_json()
            if "dagent.tool_then_model" not in recorded or "core_local_activity" in recorded:
                raise SystemExit("hist-fast-call-with-next-round ran a fast call as a local activity")
            await _save("prompt_fast_call_with_next_round", fused.workflow)

            # Conversation turns get unguessable ids; a turn whose id was taken runs under a fresh one.
            await _save("conversation_turn_id_taken", await _conversation_with_taken_id(agent))
            # A token budget stops the loop after the round that reached it (workflows/budget/limits.py).
            await _record(agent, "parallel", "prompt_budget_stopped", prompt_id="hist-budget",
                          budget=PromptBudget(max_tokens=1))
            # Period budgets (agent/period_budgets.py): a spent user budget stops the prompt; an `ask` budget waits
            # on a dagent.more_budget call, approved with a correction; a conversation's budget.
            await agent.set_budget("user:hist-budget", BudgetLimit(period="month", max_tokens=1))
            await _record(agent, "parallel", "prompt_period_budget_stopped", prompt_id="hist-period-budget",
                          user_id="hist-budget")
            await agent.set_budget("user:hist-ask", BudgetLimit(period="month", max_tokens=1, on_exhausted="ask",
                                                                approvers=["role:finance"]))
            asking = await agent.start("parallel", prompt_id="hist-more-budget", user_id="hist-ask")
            await asking.approve(await _first_pending(asking), by="bob", roles=["finance"], input={"asking": 100000},
                                 wait=True)
            await asking.result()
            await _save("prompt_more_budget_approved", asking.workflow)
            await _save("budget_ledger", agent.client.get_workflow_handle(ledger_id("user:hist-ask")))
            await agent.set_budget("conversation:hist-conv-budget", BudgetLimit(period="week", max_tokens=1))
            budget_conversation, _ = await _conversation(agent, "hist-conv-budget", ("completed", "completed"),
                                                         prompts_per_run=10)
            await _save("conversation_budgets", budget_conversation)
            turns = (await budget_conversation.result()).prompt_ids
            await _save("prompt_in_conversation_budget_stopped", agent.prompt(turns[1]).workflow)
            # A conversation schedules what its prompts' tools ask for (Prompt.scheduled): two scheduled, one
            # cancelled by the next turn, the other fired as a system-initiated prompt; each prompt is given its
            # conversation's schedule (PromptRequest.conversation_schedule).
            scheduled = await _conversation_with_scheduled_prompts(agent, "hist-conversation-scheduled")
            await _save("conversation_scheduled_prompts", scheduled)
            await _save("prompt_given_conversation_schedule",
                        agent.prompt((await scheduled.result()).prompt_ids[1]).workflow)
            # DAGENT_MODEL_CALLS=local (PromptRequest.model_local): model rounds as local activities (markers).
            await _record(agent, "parallel", "prompt_local_model_calls", prompt_id="hist-local-model", model_local=True)
            local_waiting = await agent.start("approval", prompt_id="hist-local-model-approved", model_local=True)
            await local_waiting.approve(await _first_pending(local_waiting), by="alice")
            await local_waiting.result()
            await _save("prompt_local_model_calls_approved", local_waiting.workflow)
            # A round's only regular call and the next model round in one activity (dagent.tool_then_model); when
            # its model part fails, the workflow calls that round itself.
            await _record(agent, "steps", "prompt_tool_then_model", prompt_id="hist-tool-then-model")
            await _record(agent, "flaky", "prompt_model_round_left_to_workflow", prompt_id="hist-flaky")
        # Telling approvers (workflows/prompt/notifications.py): a signed webhook per step on workflow timers, a
        # reminder after a "day" of one second, an escalation after two that lets the CFO decide.
        await _record_notified(client, settings)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main())
