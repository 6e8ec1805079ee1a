"""Batch approvals: the calls of one response that need approval are pending together, each decided on its
own; the batch goes on after the last decision, running the approved calls side by side, and no call
after the batch runs before it. Also across a worker SIGKILL between two decisions."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ApprovalRequest, Decision, ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from tests.support.ledger import BATCH_AMOUNTS, BATCH_INPUT
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker
from tests.temporal.test_durability import Rig
from tests.temporal.test_parallel_calls import tool_activity_timeline

RUNS: Counter[str] = Counter()


def _runs(workflow_id: str, call_id: str) -> int:
    """Runs of a call, by idempotency key: `<workflow id>/<run id>/<call id>` (run-scoped since version 2)."""
    return sum(n for key, n in RUNS.items() if key.startswith(f"{workflow_id}/") and key.endswith(f"/{call_id}"))


class Transfer(BaseModel):
    amount: int


class Note(BaseModel):
    text: str


@tool("bank.transfer", approval=Approval(reason="Transfers need a person."))
async def transfer(args: Transfer, ctx: ToolContext) -> str:
    """Move money."""
    RUNS[ctx.idempotency_key] += 1
    return f"moved {args.amount}"


@tool("bank.note")
async def note(args: Note, ctx: ToolContext) -> str:
    """Write a note."""
    RUNS[ctx.idempotency_key] += 1
    return f"noted {args.text}"


plugin = Plugin("bank", tools=[transfer, note])


def batch_model() -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(("bank.transfer", {"amount": 100}), ("bank.transfer", {"amount": 200}),
                              ("bank.transfer", {"amount": 300}), ("bank.note", {"text": "after"}))
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        return text(" | ".join(r.content for r in results))

    return ScriptedModel(script)


async def _pending_ids(handle, count: int) -> list[str]:
    for _ in range(300):
        pending = [p.tool_call_id for p in await handle.pending_approvals()]
        if len(pending) == count:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw {count} pending approvals")


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=lambda o: "-".join(map(str, o)))
async def test_a_batch_of_three_decided_in_any_order(dev_env: WorkflowEnvironment, order: tuple[int, ...]) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=batch_model()) as client:
        handle = await client.start("three transfers")
        await handle.wait_until("waiting_for_approval")
        ids = await _pending_ids(handle, 3)
        record = await handle.get()
        pending = ApprovalRequest
        assert [type(o.result) for o in record.output] == [pending, pending, pending, type(None)]  # type: ignore[union-attr]
        for step, index in enumerate(order):
            call_id = ids[index]
            if index == 0:
                decided = await handle.approve(call_id, by="ann", wait=True)
            elif index == 1:
                decided = await handle.approve(call_id, by="ann", input={"amount": 150}, wait=True)
            else:
                decided = await handle.reject(call_id, by="ann", reason="too much", wait=True)
            assert decided is not None and decided.decision is not None
            if step < 2:  # the batch still waits: nothing ran, the call after it has not started
                remaining = [i for i in ids if i not in [ids[j] for j in order[:step + 1]]]
                assert [p.tool_call_id for p in await handle.pending_approvals()] == remaining
                record = await handle.get()
                assert record.state == "waiting_for_approval"
                assert record.output[3].result is None  # type: ignore[union-attr]
                assert not any(_runs(handle.id, i) for i in ids)
        prompt = await handle.result()
        timeline = tool_activity_timeline(await handle.workflow.fetch_history())
    first, second, third, after = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert first.result == ToolSuccess(output="moved 100")
    assert second.result == ToolSuccess(output="moved 150") and second.input == {"amount": 150}
    assert second.decision is not None and second.decision.original_input == {"amount": 200}
    assert third.result == ToolError(error="The call was rejected by ann: too much")
    assert isinstance(third.decision, Decision) and third.decision.decision == "rejected"
    assert after.result == ToolSuccess(output="noted after")
    assert [_runs(handle.id, o.id) for o in (first, second, third, after)] == [1, 1, 0, 1]
    assert [kind for kind, _ in timeline] == ["scheduled", "scheduled", "closed", "closed", "scheduled", "closed"]
    assert after.started_at >= max(first.finished_at, second.finished_at)  # type: ignore[type-var]
    assert prompt.output[-1].text == "moved 100 | moved 150 | Error: The call was rejected by ann: too much | " \
                                     "noted after"  # type: ignore[union-attr]


async def test_approve_all_and_reject_all(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[plugin], model=batch_model()) as client:
        yes = await client.start("three transfers")
        await _pending_ids(yes, 3)
        decided = await yes.approve_all(by="ann", wait=True)
        assert [d.decision.decision for d in decided] == ["approved"] * 3  # type: ignore[union-attr]
        approved = await yes.result()
        no = await client.start("three transfers")
        await _pending_ids(no, 3)
        await no.reject_all(by="bob", reason="not today")
        rejected = await no.result()
    assert [o.result.type for o in approved.output if isinstance(o, ToolOutput)] == ["success"] * 4  # type: ignore[union-attr]
    assert [o.result for o in rejected.output if isinstance(o, ToolOutput)][:3] == [
        ToolError(error="The call was rejected by bob: not today")] * 3


def test_cli_approve_needs_one_call_or_all() -> None:
    both = subprocess.run([*DAGENT_CMD, "approve", "p1", "call-1", "--all"], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    neither = subprocess.run([*DAGENT_CMD, "reject", "p1"], capture_output=True, text=True,
                             timeout=60, stdin=subprocess.DEVNULL)
    for result in (both, neither):
        assert result.returncode == 2 and "give a TOOL_CALL_ID or --all" in result.stderr


async def test_worker_sigkilled_between_decisions(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    try:
        await rig.start()
        await rig.start_worker()
        handle = await rig.client.start(BATCH_INPUT)
        await rig.wait_state(handle, "waiting_for_approval")
        ids = await _pending_ids(handle, 3)
        await handle.approve(ids[0], by="ann")
        await handle.approve(ids[1], by="ann", input={"amount": 25.0})
        await _pending_ids(handle, 1)
        rig.workers[0].sigkill()
        second = await rig.start_worker()
        await handle.reject(ids[2], by="ann", reason="no")
        prompt = await rig.finish(handle, 60, "the batch after the crash")
    finally:
        await rig.close()
    charges = {line["key"].rsplit("/", 1)[1]: line for line in rig.lines(handle.id, "charge")}
    assert set(charges) == {ids[0], ids[1]}  # exactly once each; the rejected one never ran
    assert [charges[i]["amount"] for i in ids[:2]] == [BATCH_AMOUNTS[0], 25.0]
    assert {line["pid"] for line in charges.values()} == {second.pid}  # run after the last decision
    assert len(rig.lines(handle.id, "note")) == 1
    results = [o.result.type for o in prompt.output if isinstance(o, ToolOutput)]  # type: ignore[union-attr]
    assert results == ["success", "success", "error", "success"]
