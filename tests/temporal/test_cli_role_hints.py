"""The commands `dagent run --no-interactive` prints for a call only finance may decide run as printed: they carry
`--role finance` (and `"roles"` in the raw signal), where they once were refused or only audited."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent import Approval, Plugin, ScriptedModel, ToolContext, text, tool, tool_calls
from durable_agent.agent.models import ToolOutput
from durable_agent.cli.decision_hints import LOGIN_USER, decider
from tests.support.processes import DAGENT_CMD
from tests.support.workers import agent_worker


class Invoice(BaseModel):
    invoice_id: str


@tool("payment.send", approval=Approval(reason="Finance decides.", approvers=["role:finance"]))
async def send(args: Invoice, ctx: ToolContext) -> str:
    """Pay an invoice."""
    return f"paid {args.invoice_id}"


finance = Plugin("finance", tools=[send])


def test_decider_flags_follow_the_approvers() -> None:
    assert decider(["role:finance"]) == (" --role finance", {"by": LOGIN_USER, "roles": ["finance"]})
    assert decider(["role:finance", "user:bob"]) == (" --by bob", {"by": "bob"})
    assert decider(None) == ("", {"by": LOGIN_USER})


def _dagent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DAGENT_CMD, *args], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


async def test_the_printed_approve_and_signal_are_accepted_for_a_role_call(dev_env: WorkflowEnvironment) -> None:
    script = [tool_calls(("payment.send", {"invoice_id": "INV-1"})), text("done"),
              tool_calls(("payment.send", {"invoice_id": "INV-2"})), text("done")]
    async with agent_worker(dev_env, plugins=[finance], model=ScriptedModel(script)) as client:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
               "DAGENT_TASK_QUEUE": client.settings.task_queue, "DAGENT_LOG_LEVEL": "WARNING"}
        run = await asyncio.to_thread(_dagent, env, "run", "--no-interactive", "--user", "ann", "Pay INV-1")
        prompt_id = re.search(r"^prompt (prompt-\w+)$", run.stdout, re.M).group(1)  # type: ignore[union-attr]
        approve_line = re.search(rf"^  (dagent approve {prompt_id} .*)$", run.stdout, re.M).group(1)  # type: ignore[union-attr]
        assert approve_line.endswith("--role finance"), run.stdout
        signal_line = re.search(r"^  temporal workflow signal .* --input '(.*)'$", run.stdout, re.M)
        assert signal_line is not None, run.stdout
        fields = json.loads(signal_line.group(1))
        assert fields["roles"] == ["finance"] and fields["by"] == LOGIN_USER
        approved = await asyncio.to_thread(_dagent, env, *shlex.split(approve_line)[1:])
        first = await client.prompt(prompt_id).result()

        # The signal's fields, sent as printed, on a second prompt waiting for the same call.
        second = await client.start("Pay INV-2", user_id="ann")
        await second.wait_until("waiting_for_approval")
        await second.approve(fields["tool_call_id"], by=fields["by"], roles=fields["roles"])
        second_done = await second.result()

    assert approved.returncode == 0, approved.stderr
    for prompt in (first, second_done):
        call = next(o for o in prompt.output if isinstance(o, ToolOutput))
        assert prompt.state == "completed" and call.decision is not None and call.decision.decision == "approved"
        assert call.decision.by == LOGIN_USER
