"""Approvals that take days, on the time-skipping test server."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ApprovalRequest, ToolError, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool
from tests.support.workers import agent_worker


class TransferInput(BaseModel):
    amount: int


@tool("bank.transfer", approval=Approval(reason="Transfers need a manager."))
async def transfer(args: TransferInput, ctx: ToolContext) -> str:
    """Transfer money."""
    return f"transferred {args.amount}"


@tool("bank.transfer_soon", approval=Approval(reason="Decide within 3 days.", expires_after=timedelta(days=3)))
async def transfer_soon(args: TransferInput, ctx: ToolContext) -> str:
    """Transfer money, if someone approves within three days."""
    return f"transferred {args.amount}"


def _script(tool_id: str) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        if request.round == 1:
            return tool_calls((tool_id, {"amount": 10}))
        result = next(m for m in request.messages if isinstance(m, ToolResultMessage))
        return text(f"{'failed' if result.is_error else 'ok'}: {result.content}")

    return ScriptedModel(script)


plugins = [Plugin("bank", tools=[transfer, transfer_soon])]


async def test_approval_after_six_days_completes(skip_env: WorkflowEnvironment) -> None:
    async with agent_worker(skip_env, plugins=plugins, model=_script("bank.transfer")) as client:
        handle = await client.start("transfer 10")
        waiting = await handle.wait_until("waiting_for_approval")
        call = waiting.output[0]
        assert isinstance(call, ToolOutput) and isinstance(call.result, ApprovalRequest)
        await skip_env.sleep(timedelta(days=6))
        assert (await handle.get()).state == "waiting_for_approval"
        await handle.approve(call.id, by="manager")
        prompt = await handle.result()
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and entry.result == ToolSuccess(output="transferred 10")
    assert entry.decision is not None
    assert entry.decision.at - call.result.requested_at >= timedelta(days=6)
    assert prompt.state == "completed" and prompt.output[-1].text == "ok: transferred 10"  # type: ignore[union-attr]


async def test_unanswered_approval_expires_after_three_days(skip_env: WorkflowEnvironment) -> None:
    async with agent_worker(skip_env, plugins=plugins, model=_script("bank.transfer_soon")) as client:
        handle = await client.start("transfer 10 soon")
        waiting = await handle.wait_until("waiting_for_approval")
        pending = waiting.output[0].result  # type: ignore[union-attr]
        assert isinstance(pending, ApprovalRequest) and pending.expires_at == pending.requested_at + timedelta(days=3)
        prompt = await handle.result()  # nobody answers: the server skips to the expiry timer
    entry = prompt.output[0]
    assert isinstance(entry, ToolOutput) and isinstance(entry.result, ToolError)
    assert "approval expired" in entry.result.error
    assert entry.decision is not None and entry.decision.decision == "expired"
    assert timedelta(days=3) <= entry.decision.at - pending.requested_at < timedelta(days=3, minutes=1)
    assert prompt.output[-1].text.startswith("failed: Error: The call was not run: approval expired")  # type: ignore[union-attr]
