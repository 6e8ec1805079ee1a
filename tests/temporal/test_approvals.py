"""Human-in-the-loop approvals: policies, deciding by signal and update, batches, bad decisions."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.events import PromptEvent
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ApprovalRequest, ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from durable_agent.client import DecisionRefused
from durable_agent.plugins.demo import PaymentInput, payment_policy
from tests.support.workers import agent_worker

CALLS: Counter[str] = Counter()


@tool("payment.send", approval=payment_policy)  # the demo's policy, around a payment that counts its runs
async def pay(args: PaymentInput, ctx: ToolContext) -> dict[str, object]:
    """Send money."""
    CALLS[ctx.idempotency_key] += 1
    return {"sent": args.amount, "to": args.to}


def _runs(workflow_id: str, call_id: str) -> int:
    """Runs of a call, by idempotency key: `<workflow id>/<run id>/<call id>` (run-scoped since version 2)."""
    return sum(n for key, n in CALLS.items() if key.startswith(f"{workflow_id}/") and key.endswith(f"/{call_id}")
               and key.count("/") == workflow_id.count("/") + 2)


class EchoInput(BaseModel):
    value: str


@tool("echo.say")
async def echo(args: EchoInput, ctx: ToolContext) -> str:
    """Echo a value."""
    return args.value


@tool("vault.open", approval=Approval(reason="Opening the vault needs two eyes.", approvers=["carol"]))
async def open_vault(args: EchoInput, ctx: ToolContext) -> str:
    """Open the vault."""
    return f"opened {args.value}"


class EventRecorder(Plugin):
    name = "recorder"
    events: list[PromptEvent] = []

    async def on_event(self, event: PromptEvent) -> None:
        type(self).events.append(event)


@tool("slow.wait")
async def slow(args: EchoInput, ctx: ToolContext) -> str:
    """Take a while."""
    await asyncio.sleep(1.5)
    return args.value


plugins = [Plugin("pay", tools=[pay, echo, open_vault, slow])]


def _final_after_results(request: ModelRequest) -> ModelResponse:
    results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
    return text("; ".join(f"{r.tool}={'ERR' if r.is_error else 'OK'}:{r.content}" for r in results))


def scripted(*first_round_calls: tuple[str, object]) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls(*first_round_calls)  # type: ignore[arg-type]
        return _final_after_results(request)

    return ScriptedModel(script)


async def test_small_payment_runs_without_approval(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("payment.send", {"to": "bob", "amount": 20}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        prompt = await c.run("pay bob 20")
    call = prompt.output[0]
    assert isinstance(call, ToolOutput) and call.result == ToolSuccess(output={"sent": 20.0, "to": "bob"})
    assert call.decision is None


async def test_approve_runs_tool_once_and_replaces_pending_in_place(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("payment.send", {"to": "bob", "amount": 250}))
    async with agent_worker(dev_env, plugins=[*plugins, EventRecorder()], model=model) as c:
        handle = await c.start("pay bob 250", user_id="u1")
        waiting = await handle.wait_until("waiting_for_approval")
        assert waiting.state == "waiting_for_approval"
        pending = waiting.output[0]
        assert isinstance(pending, ToolOutput) and isinstance(pending.result, ApprovalRequest)
        assert pending.result.reason == "Sending $250 requires approval."
        listed = await handle.pending_approvals()
        assert [(p.tool_call_id, p.tool, p.input, p.reason) for p in listed] == [
            (pending.id, "payment.send", {"to": "bob", "amount": 250}, "Sending $250 requires approval.")]
        assert [c.prompt_id for c in await _eventually_waiting(c, handle.id)] == [handle.id]
        await handle.approve(pending.id, by="alice")
        prompt = await handle.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and entry.id == pending.id
    assert entry.result == ToolSuccess(output={"sent": 250.0, "to": "bob"})
    assert entry.decision is not None and entry.decision.decision == "approved" and entry.decision.by == "alice"
    assert _runs(handle.id, pending.id) == 1
    assert prompt.output[-1].text.startswith("payment.send=OK")  # type: ignore[union-attr]
    assert [e.kind for e in EventRecorder.events if e.prompt_id == handle.id] == ["approval_requested"]
    assert prompt.state == "completed"


async def _eventually_waiting(client, prompt_id: str):  # visibility is eventually consistent
    for _ in range(100):
        found = [w for w in await client.waiting_prompts() if w.prompt_id == prompt_id]
        if found:
            return found
        await asyncio.sleep(0.1)
    return []


async def test_reject_records_error_in_place_and_model_adapts(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("payment.send", {"to": "bob", "amount": 500}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("pay bob 500")
        waiting = await handle.wait_until("waiting_for_approval")
        call_id = waiting.output[0].id  # type: ignore[union-attr]
        await handle.reject(call_id, by="alice", reason="too expensive")
        prompt = await handle.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolError)
    assert entry.result.error == "The call was rejected by alice: too expensive"
    seen = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(m.is_error, m.content) for m in seen] == [(True, "Error: The call was rejected by alice: too expensive")]
    assert _runs(handle.id, call_id) == 0


async def test_approve_with_corrected_input_merges_the_fields(dev_env: WorkflowEnvironment) -> None:
    """docs/approvals.md's `--input '{"amount": 90}'`: only the corrected field changes (JSON merge patch)."""
    model = scripted(("payment.send", {"to": "bob", "amount": 900}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        good = await c.start("pay")
        call_id = (await good.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        resolved = await good.approve(call_id, by="alice", input={"amount": 150}, wait=True)
        assert resolved is not None and resolved.result == ToolSuccess(output={"sent": 150.0, "to": "bob"})
        prompt = await good.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and entry.input == {"to": "bob", "amount": 150}
    assert entry.decision is not None and entry.decision.original_input == {"to": "bob", "amount": 900}


async def test_an_invalid_correction_is_refused_and_the_call_stays_pending(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("payment.send", {"to": "bob", "amount": 900}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        bad = await c.start("pay")
        call_id = (await bad.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        refused = r"invalid correction for payment.send: amount: 'lots' is not"
        with pytest.raises(DecisionRefused, match=refused) as bad_input:
            await bad.approve(call_id, input={"amount": "lots"}, wait=True)
        assert bad_input.value.kind == "invalid-arguments"
        with pytest.raises(DecisionRefused, match=r"invalid correction for payment.send: <root>: 'to' is a required"):
            await bad.approve(call_id, input={"to": None}, wait=True)  # null removes a field (RFC 7396)
        await bad.approve(call_id, input={"amount": "lots"})  # the signal path: recorded, still pending
        still = await bad.get()
        for _ in range(100):
            if still.audit:
                break
            await asyncio.sleep(0.05)
            still = await bad.get()
        assert still.state == "waiting_for_approval" and isinstance(still.output[0].result, ApprovalRequest)  # type: ignore[union-attr]
        assert still.audit[0].detail.startswith("invalid correction for payment.send")
        resolved = await bad.approve(call_id, input={"amount": 120}, wait=True)
    assert resolved is not None and resolved.result == ToolSuccess(output={"sent": 120.0, "to": "bob"})


async def _until(handle, check, what: str):
    for _ in range(300):
        prompt = await handle.get()
        if check(prompt):
            return prompt
        await asyncio.sleep(0.05)
    raise AssertionError(f"never saw: {what}")


async def test_batch_later_calls_wait_for_the_batch(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("echo.say", {"value": "one"}), ("payment.send", {"to": "x", "amount": 300}),
                     ("echo.say", {"value": "three"}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("batch")
        waiting = await _until(handle, lambda p: p.output and p.output[0].result is not None
                               and p.state == "waiting_for_approval", "the first call done, the second pending")
        assert [o.tool for o in waiting.output] == ["echo.say", "payment.send", "echo.say"]  # all, in place
        assert waiting.output[0].result == ToolSuccess(output="one")  # type: ignore[union-attr]
        assert isinstance(waiting.output[1].result, ApprovalRequest)  # type: ignore[union-attr]
        assert waiting.output[2].result is None  # type: ignore[union-attr]  # after the batch: not started
        await handle.approve(waiting.output[1].id)  # type: ignore[union-attr]
        prompt = await handle.result()
    tools = [o for o in prompt.output if isinstance(o, ToolOutput)]
    assert [(t.tool, t.result.type) for t in tools] == [  # type: ignore[union-attr]
        ("echo.say", "success"), ("payment.send", "success"), ("echo.say", "success")]
    assert tools[2].started_at >= tools[1].finished_at  # type: ignore[operator]


async def test_batch_with_two_approvals_pending_at_once(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("payment.send", {"to": "a", "amount": 200}), ("payment.send", {"to": "b", "amount": 300}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("two payments")
        waiting = await handle.wait_until("waiting_for_approval")
        assert [type(o.result) for o in waiting.output] == [ApprovalRequest, ApprovalRequest]  # type: ignore[union-attr]
        assert [p.tool_call_id for p in await handle.pending_approvals()] == [o.id for o in waiting.output]  # type: ignore[union-attr]
        decided = await handle.approve(waiting.output[0].id, wait=True)  # type: ignore[union-attr]
        assert decided is not None and isinstance(decided.result, ApprovalRequest)  # decided; runs with the batch
        assert decided.decision is not None and decided.decision.decision == "approved"
        assert [p.tool_call_id for p in await handle.pending_approvals()] == [waiting.output[1].id]  # type: ignore[union-attr]
        rejected = await handle.reject(waiting.output[1].id, reason="no", wait=True)  # type: ignore[union-attr]
        assert rejected is not None and isinstance(rejected.result, ToolError)
        prompt = await handle.result()
    results = [o.result.type for o in prompt.output if isinstance(o, ToolOutput)]  # type: ignore[union-attr]
    assert results == ["success", "error"]


async def _history_length(handle) -> int:
    return len((await handle.workflow.fetch_history()).events)


async def test_update_path_rejects_bad_decisions_without_history(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("vault.open", {"value": "gold"}), ("vault.open", {"value": "silver"}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("open it")
        call_id = (await handle.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        before = await _history_length(handle)
        with pytest.raises(DecisionRefused) as unknown:
            await handle.approve("call-nope", by="carol", wait=True)
        assert "unknown tool call 'call-nope'" in str(unknown.value) and unknown.value.kind == "unknown-tool-call"
        with pytest.raises(DecisionRefused) as not_allowed:
            await handle.approve(call_id, by="mallory", wait=True)
        assert "mallory may not decide" in str(not_allowed.value) and not_allowed.value.kind == "not-allowed"
        assert await _history_length(handle) == before
        decided = await handle.approve(call_id, by="carol", wait=True)
        assert decided is not None and decided.decision.decision == "approved"  # type: ignore[union-attr]
        second = await handle.get()  # the batch's second call is pending too
        with pytest.raises(DecisionRefused) as twice:
            await handle.reject(call_id, by="carol", wait=True)
        assert "already decided (approved)" in str(twice.value) and twice.value.kind == "already-decided"
        resolved = await handle.approve(second.output[1].id, by="carol", wait=True)  # type: ignore[union-attr]
        assert resolved is not None and resolved.result == ToolSuccess(output="opened silver")
        prompt = await handle.result()
        assert prompt.output[0].result == ToolSuccess(output="opened gold")  # type: ignore[union-attr]
        with pytest.raises(DecisionRefused, match="already completed") as late:
            await handle.approve("call-late", wait=True)
        assert late.value.kind == "prompt-finished"
        with pytest.raises(DecisionRefused) as nowhere:
            await c.prompt("no-such-prompt").approve("call-1", wait=True)
        assert nowhere.value.kind == "unknown-prompt"
    assert prompt.state == "completed"


async def test_signal_path_ignores_bad_decisions_and_records_them(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("vault.open", {"value": "gold"}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("open it")
        call_id = (await handle.wait_until("waiting_for_approval")).output[0].id  # type: ignore[union-attr]
        await handle.approve("call-nope", by="carol")
        await handle.reject(call_id, by="mallory", reason="mine")
        await handle.workflow.signal("approve", {"tool_call": "missing-field"})  # malformed: recorded too
        still = await handle.get()
        for _ in range(50):
            if len(still.audit) >= 3:
                break
            await asyncio.sleep(0.05)
            still = await handle.get()
        assert still.state == "waiting_for_approval"
        assert [a.kind for a in still.audit] == ["ignored_approve", "ignored_reject", "ignored_approve"]
        assert still.audit[2].detail.startswith("not a valid ApproveRequest (tool_call_id: Field required")
        await handle.approve(call_id, by="carol")
        prompt = await handle.result()
        with pytest.raises(DecisionRefused, match="completed"):  # a finished prompt refuses signals outright
            await handle.approve(call_id, by="carol")
    assert prompt.state == "completed"
    assert prompt.output[0].result == ToolSuccess(output="opened gold")  # type: ignore[union-attr]


async def test_decision_while_running_is_refused(dev_env: WorkflowEnvironment) -> None:
    model = scripted(("slow.wait", {"value": "x"}))
    async with agent_worker(dev_env, plugins=plugins, model=model) as c:
        handle = await c.start("wait")
        for _ in range(100):
            prompt = await handle.get()
            if prompt.output:
                break
            await asyncio.sleep(0.05)
        call_id = prompt.output[0].id  # type: ignore[union-attr]
        with pytest.raises(DecisionRefused, match=r"\(running\) has no pending approval"):
            await handle.approve(call_id, wait=True)
        assert (await handle.result()).state == "completed"
