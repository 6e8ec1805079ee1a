"""A request for more budget (`on_exhausted: ask`) reaches only people who may grant it, and one grant is
enough to go on: `dagent run` never asks the prompt's own user (four-eyes: nobody grants their own budget)
and says whom it waits for; the default grant covers what is already spent over the allowance plus a round;
the request's schema marks its fixed facts (`const`, titled) apart from the one editable amount.

Real dev server, an in-process worker (the scripted model spends 500 tokens a round), `dagent run
--interactive` as a subprocess with answers piped in (the terminal's question flow without a TTY).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL, BudgetLimit
from durable_agent.agent.providers.scripted import ScriptedModel
from tests.support.processes import REPO_ROOT
from tests.support.workers import agent_worker
from tests.temporal.test_period_budgets import PLUGIN, _endless

LINE_SECONDS = 60


async def test_run_never_asks_the_owner_for_more_budget_and_one_default_grant_goes_on(
        dev_env: WorkflowEnvironment) -> None:
    user = f"b-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_endless)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=600, on_exhausted="ask",
                                                            approvers=["user:alice"]))
        try:
            env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                   "DAGENT_TASK_QUEUE": client.settings.task_queue}
            env.pop("DAGENT_API_URL", None)
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "durable_agent.cli", "run", "go", "--user", user, "--interactive",
                "--max-rounds", "3", env=env, cwd=REPO_ROOT, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            assert run.stdin is not None and run.stdout is not None
            run.stdin.write(b"y\ny\ny\n")  # would approve a question, were the owner asked
            await run.stdin.drain()
            seen: list[str] = []
            while not any("budget spent:" in line for line in seen):
                line = await asyncio.wait_for(run.stdout.readline(), LINE_SECONDS)
                assert line, "".join(seen)
                seen.append(line.decode())
            said = next(line for line in seen if "budget spent:" in line)
            assert f"user:{user} daily budget reached: 1000 tokens used of 600" in said, said
            assert "waiting for alice to grant more (nobody grants their own budget)" in said, said

            handle = client.prompt(next(line.split()[1] for line in seen if line.startswith("prompt ")))
            [asking] = await handle.pending_approvals()
            assert asking.tool == MORE_BUDGET_TOOL
            assert asking.input["asking"] == 900  # 400 over the allowance + one 500-token round
            properties = asking.input_schema["properties"] if asking.input_schema else {}
            assert {k for k, v in properties.items() if "const" in v} == {"budget", "period", "unit", "allowance",
                                                                          "spent"}
            assert properties["spent"]["title"] == "Spent this period" and "const" not in properties["asking"]

            granted = await handle.approve(asking.tool_call_id, by="alice", wait=True)  # the default amount
            assert isinstance(granted, ToolOutput) and granted.decision is not None
            out, err = await asyncio.wait_for(run.communicate(), LINE_SECONDS)
            text = "".join(seen) + out.decode()
            assert "Approve dagent.more_budget?" not in text and "your answer was not applied" not in text, text
            done = await handle.result()
            asks = [e for e in done.output if isinstance(e, ToolOutput) and e.tool == MORE_BUDGET_TOOL]
            assert len(asks) == 1 and done.rounds == 3, done.output  # one grant, one more round, no second ask
            assert done.budgets[0].extra_tokens == 900
            assert run.returncode == 1 and "stopped: round limit reached after 3 rounds" in err.decode(), err
        finally:
            await client.set_budget(f"user:{user}", None)


async def test_a_sub_agents_budget_request_waits_on_its_top_prompt(dev_env: WorkflowEnvironment) -> None:
    """The parent's first round spends the whole budget; its sub-agent's round asks for more. The top prompt
    lists it as `<its call>/more-budget` (as a sub-agent's payment) and takes the grant."""
    from durable_agent.agent.plugins import Plugin
    from tests.temporal.test_period_budgets import _delegating, helper

    user = f"m-{uuid.uuid4().hex[:8]}"
    plugins = [PLUGIN, Plugin("helpers", tools=[helper.tool()])]
    async with agent_worker(dev_env, plugins=plugins, model=ScriptedModel(_delegating)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=500, on_exhausted="ask",
                                                            approvers=["user:alice"]))
        try:
            env = {**os.environ, "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
                   "DAGENT_TASK_QUEUE": client.settings.task_queue}
            env.pop("DAGENT_API_URL", None)
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "durable_agent.cli", "run", "go", "--user", user, "--interactive", env=env,
                cwd=REPO_ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE)
            assert run.stdout is not None
            seen: list[str] = []
            while not any("budget spent:" in line for line in seen):  # the top prompt's terminal says it
                line = await asyncio.wait_for(run.stdout.readline(), LINE_SECONDS)
                assert line, "".join(seen)
                seen.append(line.decode())
            said = next(line for line in seen if "budget spent:" in line)
            assert "waiting for alice to grant more" in said and "call_r1_0/more-budget" in said, said
            handle = client.prompt(next(line.split()[1] for line in seen if line.startswith("prompt ")))
            for _ in range(1200):  # the sub-agent reports its request to the top prompt (as for its payments)
                pending = await handle.pending_approvals()
                if pending:
                    break
                await asyncio.sleep(0.05)
            [asking] = pending
            assert (asking.tool_call_id, asking.tool) == ("call_r1_0/more-budget", MORE_BUDGET_TOOL)
            assert asking.path and asking.approvers == ["user:alice"] and asking.four_eyes
            assert asking.reason.startswith(f"user:{user} daily budget reached: 500 tokens used of 500")
            await handle.approve(asking.tool_call_id, by="alice", input={"asking": 2000},  # enough for both
                                 wait=True)  # through the top prompt
            done = await asyncio.wait_for(handle.result(), LINE_SECONDS)
            assert done.state == "completed" and done.usage.model_calls == 3, done.output
            out, _ = await asyncio.wait_for(run.communicate(), LINE_SECONDS)
            assert run.returncode == 0 and "state: completed" in out.decode()
        finally:
            await client.set_budget(f"user:{user}", None)
