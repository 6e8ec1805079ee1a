"""In a batch, each decision is on its call's record entry as soon as it arrives (who, approved or rejected,
the correction), while the other calls still wait: the record, `AgentClient` and watchers can say "approved by
alice; runs when the other 2 decisions are in" (patch `decisions-on-arrival`)."""

from __future__ import annotations

import asyncio

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.events import EventKind, PromptEvent
from durable_agent.agent.models import ApprovalRequest, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from tests.support.workers import agent_worker
from tests.temporal.test_batch_approvals import _pending_ids, batch_model, plugin


class HeldNotifier(Plugin):
    """An approval-requested hook (say, a chat notification) that takes its time: it returns when released."""

    name = "held-notifier"

    def __init__(self) -> None:
        super().__init__()
        self.entered = 0
        self.release = asyncio.Event()

    async def on_event(self, event: PromptEvent) -> None:
        if event.kind == EventKind.APPROVAL_REQUESTED:
            self.entered += 1
            await asyncio.wait_for(self.release.wait(), 60)


async def test_a_decision_is_recorded_on_arrival_while_the_batch_waits(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=batch_model()) as client:
        handle = await client.start("three transfers")
        first, second, third = await _pending_ids(handle, 3)
        await handle.approve(first, by="alice", input={"amount": 90}, wait=True)
        await handle.reject(third, by="bob", reason="not today", wait=True)
        record = await handle.get()
        calls = {o.id: o for o in record.output if isinstance(o, ToolOutput)}
        assert record.state == "waiting_for_approval"
        approved = calls[first]
        assert approved.decision is not None
        assert (approved.decision.decision, approved.decision.by) == ("approved", "alice")
        assert approved.input == {"amount": 90} and approved.decision.original_input == {"amount": 100}
        assert isinstance(approved.result, ApprovalRequest)  # it runs once the batch's last decision is in
        rejected = calls[third]
        assert rejected.decision is not None and (rejected.decision.decision, rejected.decision.by) == ("rejected",
                                                                                                       "bob")
        assert calls[second].decision is None and isinstance(calls[second].result, ApprovalRequest)
        assert [p.tool_call_id for p in await handle.pending_approvals()] == [second]
        await handle.approve(second, by="carol", wait=True)
        done = await handle.result()
        events = [event async for _, event in handle.events()]
    results = [o.result for o in done.output if isinstance(o, ToolOutput)]
    assert results[:2] == [ToolSuccess(output="moved 90"), ToolSuccess(output="moved 200")]
    # Watchers heard of each decision when it arrived, before the batch's last one and before any call ran.
    decided = [(e.output.id, e.output.decision.by, type(e.output.result)) for e in events
               if e.kind == EventKind.OUTPUT_UPDATED and isinstance(e.output, ToolOutput) and e.output.decision]
    first_heard = [d for d in decided if d[0] in (first, third, second)][:3]
    pending = ApprovalRequest
    assert first_heard == [(first, "alice", pending), (third, "bob", pending), (second, "carol", pending)]


async def test_a_decision_is_recorded_while_the_approval_hooks_still_run(dev_env: WorkflowEnvironment) -> None:
    """The hooks of a batch run before its calls' waits begin; a decision taken meanwhile is on its entry at
    once (without the patch it waited there, and the update with it, until every hook had returned)."""
    notifier = HeldNotifier()
    async with agent_worker(dev_env, plugins=[plugin, notifier], model=batch_model()) as client:
        handle = await client.start("three transfers")
        first, second, third = await _pending_ids(handle, 3)
        for _ in range(200):
            if notifier.entered == 3:
                break
            await asyncio.sleep(0.05)
        assert notifier.entered == 3, "the three approval-requested hooks are running"
        shown = await asyncio.wait_for(handle.approve(first, by="alice", wait=True), 10)
        assert shown is not None and shown.decision is not None and shown.decision.by == "alice"
        record = await handle.get()
        calls = {o.id: o for o in record.output if isinstance(o, ToolOutput)}
        assert calls[first].decision is not None and calls[first].decision.by == "alice"
        assert calls[second].decision is None and calls[third].decision is None
        assert [p.tool_call_id for p in await handle.pending_approvals()] == [second, third]
        notifier.release.set()
        await handle.approve(second, by="bob", wait=True)
        await handle.reject(third, by="bob", wait=True)
        done = await handle.result()
    assert [o.result.type for o in done.output if isinstance(o, ToolOutput)] == [  # type: ignore[union-attr]
        "success", "success", "error", "success"]
