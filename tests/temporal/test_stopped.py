"""A prompt stopped with its work undone (a spent budget, the round limit) ends `stopped`, never `completed`:
`dagent run` says so and exits non-zero, `dagent show` and the HTTP API say why, who may grant more and when
the budget resets.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.period_budgets import BudgetLimit
from durable_agent.api.config import ApiKey
from tests.support.api import api_stack
from tests.temporal.test_cli import cli_env, dagent, worker_process  # noqa: F401 - fixtures


def test_a_budget_stop_reads_as_stopped_in_run_and_show(
        cli_env: dict[str, str], worker_process: subprocess.Popen[bytes]) -> None:  # noqa: F811
    """The quick start's trip with a 1-token budget: the forecast and report run, the hotel is never paid."""
    ran = dagent("run", "Plan my trip", "--max-tokens", "1", "--no-interactive", env=cli_env)
    prompt_id = re.search(r"^prompt (prompt-\w+)$", ran.stdout, re.M).group(1)  # type: ignore[union-attr]
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert re.search(r"^state   stopped$", ran.stdout, re.M) and "state: stopped" in ran.stdout, ran.stdout
    assert "state   completed" not in ran.stdout and "state: completed" not in ran.stdout
    assert re.search(rf"^error: prompt {prompt_id} stopped: token budget reached: \d+ tokens used of 1\. The work "
                     r"is not finished: .*--max-tokens", ran.stderr, re.M), ran.stderr
    assert "payment.send" not in ran.stdout  # the round that would pay never ran

    shown = dagent("show", prompt_id, env=cli_env)
    assert shown.returncode == 0, shown.stderr
    assert f"prompt  {prompt_id}  state=stopped" in shown.stdout
    assert re.search(r"^stopped token budget reached: \d+ tokens used of 1\. The work is not finished", shown.stdout,
                     re.M), shown.stdout


async def test_the_api_says_stopped_with_who_may_grant_and_when_the_period_resets(
        dev_env: WorkflowEnvironment) -> None:
    user = f"stopper-{uuid.uuid4().hex[:8]}"
    key = ApiKey(principal=user, key=f"{user}-key-0123456789abcdef", roles=[])
    async with api_stack(dev_env, signed=False, extra_api_keys=[key]) as stack:
        await stack.agent.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=1, on_exhausted="ask",
                                                                 approvers=["user:carol", "role:finance"]))
        try:
            async with stack.http(headers={"Authorization": f"Bearer {key.key}"}) as http:
                started = await http.post("/prompts", json={"input": "pay bob 50"})
                assert started.status_code == 201, started.text
                prompt_id = started.json()["id"]
                handle = stack.agent.prompt(prompt_id)
                await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 60)  # the request for more
                [asking] = await handle.pending_approvals()
                await handle.reject(asking.tool_call_id, by="carol", reason="not today", wait=True)
                await asyncio.wait_for(handle.result(), 60)

                record = (await http.get(f"/prompts/{prompt_id}")).json()["prompt"]
                assert record["state"] == "stopped", record["state"]
                stop = record["stop"]
                assert stop["kind"] == "period_budget" and stop["principal"] == f"user:{user}"
                assert stop["who_can_grant"] == ["user:carol", "role:finance"]
                assert stop["resets_at"] and stop["reason"].startswith(f"user:{user} daily budget reached")
                assert stop["next_step"].startswith(
                    "The work is not finished: carol or anyone with the finance role may grant more, or ask again "
                    "after the budget resets at ")
                metadata = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
                assert metadata.current_details == f"Stopped: {stop['reason']}. {stop['next_step']}"  # Temporal UI
                listed: list[dict[str, object]] = []
                for _ in range(100):  # visibility is eventually consistent
                    listed = (await http.get("/prompts", params={"state": "stopped"})).json()
                    if any(p["prompt_id"] == prompt_id for p in listed):
                        break
                    await asyncio.sleep(0.1)
                assert [p["state"] for p in listed if p["prompt_id"] == prompt_id] == ["stopped"], listed
        finally:
            await stack.agent.set_budget(f"user:{user}", None)
