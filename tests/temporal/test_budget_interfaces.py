"""Budgets in the CLI and the HTTP API (issue 27): set, show and list; bad specs are one line (CLI: stderr, exit
2; API: problem+json 422); only admins set budgets, users read their own; a request for more budget is decided
over HTTP like any pending call, by the budget's approvers.

Real dev server, a worker on a fresh queue, `dagent` as a subprocess, the API on a real uvicorn socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.models import ToolOutput
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL, BudgetLimit
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel
from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.support.workers import agent_worker


async def _dagent(address: str, queue: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`dagent budget ...` against the test's worker queue (the worker runs in this event loop: not blocked)."""
    env = {**os.environ, "DAGENT_TASK_QUEUE": queue}
    return await asyncio.to_thread(subprocess.run, [*DAGENT_CMD, "budget", *args, "--address", address],
                                   cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False, env=env)


async def test_dagent_budget_set_show_ls(dev_env: WorkflowEnvironment) -> None:
    name = f"cli-{uuid.uuid4().hex[:8]}"
    address = dev_env.client.service_client.config.target_host
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=ScriptedModel([])) as client:
        queue = client.settings.task_queue
        done = await _dagent(address, queue, "set", f"user:{name}", "--tokens", "5000", "--period", "week",
                             "--ask", "--approver", "role:finance", "--by", "ops")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == (f"user:{name}: 5000 tokens per week (when spent: ask, approvers "
                                               "role:finance)")
        shown = await _dagent(address, queue, "show", f"user:{name}", "--json")
        view = json.loads(shown.stdout)
        assert view["standing"]["limit"]["max_tokens"] == 5000 and view["configured_by"] == "ops"
        assert "tokens: 0 spent of 5000" in (await _dagent(address, queue, "show", f"user:{name}")).stdout
        for _ in range(50):
            listed = await _dagent(address, queue, "ls", "--json")
            if f"user:{name}" in listed.stdout:
                break
            await asyncio.sleep(0.2)
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert {"principal": f"user:{name}", "limit": view["standing"]["limit"]} in rows

        cleared = await _dagent(address, queue, "set", f"user:{name}", "--clear")
        assert cleared.returncode == 0 and cleared.stdout.strip() == f"user:{name}: no budget"

        # Bad specs: one line on stderr, exit code 2, nothing set.
        for args, message in [
            (("set", "alice", "--tokens", "5"), "error: budget principal 'alice' must be user:<id> or "
                                                "conversation:<id>\n"),
            (("set", f"user:{name}", "--tokens", "0"), "error: max_tokens: Input should be greater than 0\n"),
            (("set", f"user:{name}", "--period", "year", "--tokens", "5"),
             "error: period: Input should be 'day', 'week' or 'month'\n"),
            (("set", f"user:{name}"), "error: give max_tokens and/or max_cost\n"),
            (("set", f"user:{name}", "--tokens", "5", "--ask"),
             "error: on_exhausted=ask needs approvers (user:<id> or role:<name>)\n"),
            (("show", "user:nobody-has-this-budget"), "error: no budget for user:nobody-has-this-budget\n"),
        ]:
            bad = await _dagent(address, queue, *args)
            assert (bad.returncode, bad.stderr, bad.stdout) == (2, message, ""), args


async def test_http_budgets_admin_sets_users_read_and_approvers_grant_more(dev_env: WorkflowEnvironment) -> None:
    from durable_agent.api.config import ApiKey
    from tests.support.api import api_stack

    # A user of this test's own: no other test's prompts fall under the budget set here (one session server).
    name, key = f"budget-{uuid.uuid4().hex[:8]}", f"budget-key-{uuid.uuid4().hex}"
    async with api_stack(dev_env, extra_api_keys=[ApiKey(principal=name, key=key)]) as stack:
        async with stack.http(headers={"Authorization": f"Bearer {key}"}) as owner, stack.http("root") as root, \
                stack.http("fiona") as fiona:
            limit = {"period": "day", "max_tokens": 1, "on_exhausted": "ask", "approvers": ["role:finance"]}
            refused = await owner.put(f"/budgets/user:{name}", json=limit)
            assert refused.status_code == 403 and refused.json()["detail"] == "only an admin may set budgets"
            bad = await root.put(f"/budgets/user:{name}", json={"period": "year", "max_tokens": 1})
            assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
            assert bad.json()["detail"] == "body.period: Input should be 'day', 'week' or 'month'"
            junk = await root.put("/budgets/alice", json=limit)
            assert junk.status_code == 422 and junk.json()["detail"].startswith("budget principal 'alice' must be")
            empty = await root.put(f"/budgets/user:{name}", json={"period": "day"})
            assert empty.status_code == 422 and "give max_tokens and/or max_cost" in empty.json()["detail"]
            assert (await root.put(f"/budgets/user:{name}", json=limit)).status_code == 200

            mine = await owner.get(f"/budgets/user:{name}")
            assert mine.status_code == 200 and mine.json()["standing"]["limit"]["max_tokens"] == 1
            assert (await owner.get("/budgets/user:mallory")).status_code == 403
            for _ in range(50):  # the list reads visibility, which follows the ledger's memo shortly after
                listed = [row["principal"] for row in (await owner.get("/budgets")).json()]
                if listed:
                    break
                await asyncio.sleep(0.2)
            assert listed == [f"user:{name}"]  # only the caller's own

            # Alice's prompt spends the budget in round 1 and asks for more before round 2.
            started = await owner.post("/prompts", json={"input": "pay bob 250"})
            assert started.status_code == 201, started.text
            prompt = stack.agent.prompt(started.json()["id"])

            async def budget_request() -> dict[str, object]:
                while True:
                    for item in (await fiona.get("/approvals")).json():
                        if item["tool"] == MORE_BUDGET_TOOL and item["prompt_id"] == prompt.id:
                            return item
                    await asyncio.sleep(0.1)

            # payment.send (250) needs an approval first; fiona approves it, then the budget request appears.
            await prompt.wait_until("waiting_for_approval")
            [pay] = await prompt.pending_approvals()
            assert (await fiona.post(f"/prompts/{prompt.id}/approvals/{pay.tool_call_id}/approve")).status_code == 200
            item = await asyncio.wait_for(budget_request(), 60)
            call = item["tool_call_id"]
            own = await owner.post(f"/prompts/{prompt.id}/approvals/{call}/approve")
            assert own.status_code == 403, own.text  # not an approver of their own budget
            for huge in ("1" + "0" * 400, "1e400", "1000000000001"):  # over the schema's maximum: refused, the
                # call stays pending (issue 41: a grant of 10^400 failed the prompt in float(amount))
                over = await fiona.post(f"/prompts/{prompt.id}/approvals/{call}/approve",
                                        content='{"input": {"asking": ' + huge + "}}",
                                        headers={"content-type": "application/json"})
                assert over.status_code == 422, (huge, over.text)
            granted = await fiona.post(f"/prompts/{prompt.id}/approvals/{call}/approve",
                                       json={"input": {"asking": 9999}})
            assert granted.status_code == 200, granted.text
            done = await asyncio.wait_for(prompt.result(), 60)
            # A conversation's budget: its owner reads it, nobody else (but an admin).
            started_conversation = await owner.post("/conversations", json={})
            assert started_conversation.status_code == 201, started_conversation.text
            conversation = f"conversation:{started_conversation.json()['conversation']['id']}"
            assert (await root.put(f"/budgets/{conversation}", json={"max_cost": 3})).status_code == 200
            assert (await owner.get(f"/budgets/{conversation}")).json()["standing"]["limit"]["max_cost"] == 3
            async with stack.http("mallory") as mallory:
                assert (await mallory.get(f"/budgets/{conversation}")).status_code == 403
            await stack.agent.conversation(conversation.removeprefix("conversation:")).close()

            assert (await owner.delete(f"/budgets/user:{name}")).status_code == 403
            assert (await root.delete(f"/budgets/user:{name}")).status_code == 204
            assert (await owner.get(f"/budgets/user:{name}")).json()["standing"]["limit"] is None
        assert done.state == "completed" and done.budget_stop is None
        [ask] = [e for e in done.output if isinstance(e, ToolOutput) and e.tool == MORE_BUDGET_TOOL]
        assert ask.decision is not None and ask.decision.by == "fiona" and ask.input["asking"] == 9999  # type: ignore[index]
        assert done.budgets[0].extra_tokens == 9999


async def test_dagent_approve_grants_more_budget(dev_env: WorkflowEnvironment) -> None:
    """`dagent approve` decides a request for more budget like any pending call, with a corrected amount."""
    from tests.temporal.test_period_budgets import PLUGIN, _endless

    user = f"cli-ask-{uuid.uuid4().hex[:8]}"
    address = dev_env.client.service_client.config.target_host
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_endless)) as client:
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=1, on_exhausted="ask",
                                                            approvers=["role:finance"]))
        handle = await client.start("go", user_id=user, max_rounds=2)
        await asyncio.wait_for(handle.wait_until("waiting_for_approval"), 60)
        [pending] = await handle.pending_approvals()
        assert pending.tool == MORE_BUDGET_TOOL
        env = {**os.environ, "DAGENT_TASK_QUEUE": client.settings.task_queue}
        env.pop("DAGENT_API_URL", None)
        done = await asyncio.to_thread(
            subprocess.run, [*DAGENT_CMD, "approve", handle.id, pending.tool_call_id, "--by", "bob", "--role",
                             "finance", "--input", '{"asking": 700}', "--address", address],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False, env=env)
        assert done.returncode == 0, done.stderr
        prompt = await asyncio.wait_for(handle.result(), 60)
    assert prompt.rounds == 2 and prompt.budget_stop is None and prompt.force_completed  # the max_rounds guard
    assert prompt.state == "stopped" and prompt.stop is not None and prompt.stop.kind == "max_rounds"
    assert prompt.budgets[0].extra_tokens == 700
