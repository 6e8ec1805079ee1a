"""Recurring agents on Temporal Schedules (issue 27): a schedule's run is an ordinary prompt with its own record.

Real dev server (the session `dev_env`) and a worker on a fresh queue: `AgentClient.schedule(...)` creates a
schedule; triggering it starts a prompt that completes, found by the schedule's id (TemporalScheduledById);
`dagent schedule` lists, pauses, triggers and deletes it; bad specs are one-line errors (exit code 2).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from zoneinfo import ZoneInfo

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.providers.scripted import ScriptedModel, text
from durable_agent.client import AgentClient
from durable_agent.client.schedules import ScheduleError, scheduled_prompts, view_schedule
from tests.support.processes import DAGENT_CMD, REPO_ROOT
from tests.support.workers import agent_worker


async def _runs(client: AgentClient, schedule_id: str, count: int, wait_s: float = 30) -> list[str]:
    deadline = time.monotonic() + wait_s
    while len(ids := await scheduled_prompts(client, schedule_id)) < count:
        assert time.monotonic() < deadline, f"{len(ids)} run(s) of {schedule_id} listed, waited for {count}"
        await asyncio.sleep(0.2)
    return ids


def _dagent(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    env_args = [*args, "--address", address] if args[0] == "schedule" and len(args) > 1 else list(args)
    return subprocess.run([*DAGENT_CMD, *env_args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
                          check=False)


async def test_a_triggered_schedule_runs_an_ordinary_prompt(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(lambda request: text(f"report for {request.messages[-1].text}"))  # type: ignore[union-attr]
    schedule_id = f"daily-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[], model=model) as client:
        handle = await client.schedule(schedule_id, "yesterday's orders", user_id="ops", cron="0 9 * * 1-5",
                                       time_zone="Europe/Paris", jitter="5m", overlap="buffer_one")
        view = await view_schedule(client, schedule_id)
        assert view.spec == "cron 0 9 * * 1-5 jitter 5m (Europe/Paris)" and not view.paused
        paris = [run.astimezone(ZoneInfo("Europe/Paris")) for run in view.next_runs]
        assert paris and all(t.hour == 9 and t.minute < 5 and t.weekday() < 5 for t in paris), paris

        await handle.trigger()
        (prompt_id,) = await _runs(client, schedule_id, 1)
        prompt = await asyncio.wait_for(client.prompt(prompt_id).result(), 30)
        assert prompt_id.startswith(f"dagent-run-{schedule_id}-") and prompt.id == prompt_id
        assert prompt.state == "completed" and prompt.user_id == "ops" and prompt.input == "yesterday's orders"
        assert prompt.output[-1].text == "report for yesterday's orders"  # type: ignore[union-attr]
        listed = await client.list_prompts(user_id="ops")
        assert prompt_id in {p.prompt_id for p in listed}

        address = dev_env.client.service_client.config.target_host
        for verb, said in (("pause", "paused"), ("trigger", "triggered"), ("unpause", "unpaused")):
            done = await asyncio.to_thread(_dagent, address, "schedule", verb, schedule_id)
            assert done.returncode == 0 and done.stdout.strip() == f"schedule {schedule_id} {said}", done.stderr
        # A trigger while paused still starts one run (Temporal: trigger ignores pause); both are listed.
        second = (await _runs(client, schedule_id, 2))[0]
        assert (await asyncio.wait_for(client.prompt(second).result(), 30)).state == "completed"
        listing = await asyncio.to_thread(_dagent, address, "schedule", "ls")
        lines = listing.stdout.splitlines()
        assert listing.returncode == 0 and lines[0].split() == ["SCHEDULE", "SPEC", "NEXT", "RUN", "ASKS"]
        [row] = [line for line in lines if line.startswith(schedule_id)]
        assert "ops: yesterday's orders" in row  # who asks what, as the runs' summary says it
        runs = await asyncio.to_thread(_dagent, address, "schedule", "runs", schedule_id)
        assert set(runs.stdout.split()) == {prompt_id, second}, (runs.stdout, runs.stderr)
        deleted = await asyncio.to_thread(_dagent, address, "schedule", "delete", schedule_id)
        assert deleted.returncode == 0, deleted.stderr
        with pytest.raises(ScheduleError, match=f"schedule {schedule_id}:"):
            await view_schedule(client, schedule_id)


async def test_schedule_errors_are_one_line(dev_env: WorkflowEnvironment) -> None:
    client = AgentClient(dev_env.client)
    bad = [({"cron": "0 9 * *"}, "cron expression must have 5 fields"),
           ({"every": "soon"}, "interval must be a duration such as 30s"),
           ({"cron": "0 9 * * *", "every": "1h"}, "give exactly one of"),
           ({"every": "1h", "time_zone": "Mars/Base"}, "unknown time zone 'Mars/Base'"),
           ({"every": "1h", "overlap": "maybe"}, "overlap must be one of skip, buffer_one")]
    for options, message in bad:
        with pytest.raises(ScheduleError, match=message) as info:
            await client.schedule(f"bad-{uuid.uuid4().hex[:6]}", "x", **options)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)
    # The server's own check (a cron field out of range) is one line too.
    with pytest.raises(ScheduleError) as info:
        await client.schedule(f"bad-{uuid.uuid4().hex[:6]}", "x", cron="0 25 * * *")
    assert "\n" not in str(info.value)
    taken = f"taken-{uuid.uuid4().hex[:6]}"
    await client.schedule(taken, "x", every="1h", paused=True)
    with pytest.raises(ScheduleError, match=f"schedule {taken} exists already"):
        await client.schedule(taken, "x", every="1h")
    await client.client.get_schedule_handle(taken).delete()

    done = await asyncio.to_thread(_dagent, "127.0.0.1:1", "schedule", "create", "x", "hi", "--cron", "0 9 * *")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: cron expression must have 5 fields (minute hour day month weekday), not '0 9 * *'\n"


async def test_http_api_schedules_run_as_their_creator(dev_env: WorkflowEnvironment) -> None:
    from tests.support.api import api_stack

    schedule_id = f"api-{uuid.uuid4().hex[:8]}"
    async with api_stack(dev_env) as stack:
        async with stack.http("alice") as http:
            bad = await http.post("/schedules", json={"id": schedule_id, "input": "hi", "cron": "0 9 * *"})
            assert bad.status_code == 422 and "cron expression must have 5 fields" in bad.json()["detail"]
            created = await http.post("/schedules", json={"id": schedule_id, "input": "hello from cron",
                                                          "every": "1h", "paused": True})
            assert created.status_code == 201, created.text
            assert created.json()["user_id"] == "alice" and created.json()["paused"] is True
            assert (await http.post(f"/schedules/{schedule_id}/trigger")).status_code == 200
        (run_id,) = await _runs(stack.agent, schedule_id, 1)
        prompt = await asyncio.wait_for(stack.agent.prompt(run_id).result(), 30)
        assert prompt.user_id == "alice" and prompt.output[-1].text == "You said: hello from cron"  # type: ignore[union-attr]
        async with stack.http("mallory") as http:
            assert (await http.post(f"/schedules/{schedule_id}/trigger")).status_code == 403
            assert all(v["id"] != schedule_id for v in (await http.get("/schedules")).json())
        async with stack.http("alice") as http:
            assert any(v["id"] == schedule_id for v in (await http.get("/schedules")).json())
            assert (await http.delete(f"/schedules/{schedule_id}")).status_code == 204
            assert (await http.get(f"/schedules/{schedule_id}")).status_code == 404


async def test_a_scheduled_run_reserves_from_its_users_budget(dev_env: WorkflowEnvironment) -> None:
    """A budget set after the schedule was made still stops its runs: each run names its user's ledger."""
    from durable_agent.agent.period_budgets import BudgetLimit
    from tests.temporal.test_period_budgets import PLUGIN, _endless

    user = f"sched-{uuid.uuid4().hex[:6]}"
    schedule_id = f"budgeted-{uuid.uuid4().hex[:8]}"
    async with agent_worker(dev_env, plugins=[PLUGIN], model=ScriptedModel(_endless)) as client:
        handle = await client.schedule(schedule_id, "loop", user_id=user, every="1d")
        await client.set_budget(f"user:{user}", BudgetLimit(period="day", max_tokens=1200), by="admin")
        await handle.trigger()
        (prompt_id,) = await _runs(client, schedule_id, 1)
        prompt = await asyncio.wait_for(client.prompt(prompt_id).result(), 60)
        assert [standing.principal for standing in prompt.budgets] == [f"user:{user}"]
        assert prompt.budget_stop == f"user:{user} daily budget reached: 1500 tokens used of 1200"
        await handle.delete()
