"""The Temporal UI's Current Details of a prompt waiting on a batch: every waiting call is named (not only the
last one), the list shrinks as calls are decided, and the guidance matches the deployment's decision mode
(signed decisions: the inbox, never the update form; open: the `approve_call` payload)."""

from __future__ import annotations

import asyncio

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from durable_agent.client import PromptHandle
from tests.support import batch_desk
from tests.support.api import key_pair
from tests.support.workers import agent_worker


async def _details(handle: PromptHandle) -> str:
    metadata = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def _pending(handle: PromptHandle, count: int) -> list[str]:
    for _ in range(400):
        pending = [p.tool_call_id for p in await handle.pending_approvals()]
        if len(pending) == count:
            return pending
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} pending calls")


async def test_current_details_name_every_waiting_call_of_a_batch(dev_env: WorkflowEnvironment) -> None:
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model) as client:
        handle = await client.start("batch: pay both invoices and email ACME", user_id="ann")
        first, second, third = await _pending(handle, 3)
        details = await _details(handle)
        await handle.approve(first, by="alice", wait=True)
        after_one = await _details(handle)
        await handle.approve(second, by="alice", wait=True)
        await handle.reject(third, by="alice", reason="not now", wait=True)
        await handle.result()

    assert details.startswith("**Waiting for approval** of 3 calls")
    for line in ("1. payment.send {to: ACME Corp, amount: 480} — reason: Sending $480 requires approval.",
                 "2. payment.send {to: Globex, amount: 120} — reason: Sending $120 requires approval.",
                 "3. email.send {to: ceo@acme.example, subject: Paid} — reason: Emails to customers need a look."):
        assert line in details, details
    for call_id in (first, second, third):
        assert f"`{call_id}`" in details
    assert f'`{{"tool_call_id": "{first}", "by": "YOUR-NAME"}}`' in details  # open mode: the update form
    assert f"dagent approve {handle.id} --all" in details

    assert after_one.startswith("**Waiting for approval** of 2 calls") and first not in after_one
    assert second in after_one and third in after_one


async def test_signed_deployments_are_not_told_to_send_an_unsigned_payload(dev_env: WorkflowEnvironment) -> None:
    _, public_key = key_pair()
    async with agent_worker(dev_env, plugins=[batch_desk.plugin], model=batch_desk.model,
                            decision_key=public_key) as client:
        handle = await client.start("pay the ACME invoice", user_id="ann")
        await _pending(handle, 1)
        details = await _details(handle)
        await handle.cancel()

    assert details.startswith("**Waiting for approval**: payment.send {to: ACME Corp, amount: 480}")
    assert f"Decisions here must be signed: decide with `dagent approve {handle.id} call_r1_0`" in details
    assert "`DAGENT_API_URL` and your `DAGENT_API_KEY`" in details and "page `/inbox`" in details
    assert "YOUR-NAME" not in details and '"by"' not in details  # no payload that is always refused
