"""Prompts waiting for a person leave the worker's workflow cache beyond the most recent `cached_waiting`
(workers/resting.py, issue 28): the oldest are evicted and replayed by their decision, the kept ones are not,
every prompt still ends with its approved call's result, and decisions that race the evictions lose nothing.
Real dev server, real workers (the strict sandbox, so each replay is checked), scripted models."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent.agent.models import ToolOutput, ToolSuccess
from durable_agent.client import AgentClient, PromptHandle
from durable_agent.workers import plugin as plugin_module
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.resting import WatchedRunner
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests import scenarios
from tests.support.logs import capture_logs
from tests.support.workers import TEST_SETTINGS


def _settings(**update: Any) -> Settings:
    return TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}", **update})


def _worker(env: WorkflowEnvironment, settings: Settings) -> tuple[Worker, AgentClient]:
    client = Client(env.client.service_client, namespace=env.client.namespace, plugins=[DurableAgentPlugin(settings)])
    runtime = build_runtime(settings, plugins=[scenarios.plugin], providers={"normal": scenarios.model})
    return create_worker(client, runtime, task_queue=settings.task_queue), AgentClient(client, settings)


def _instances(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many workflow instances the worker built for each run: 2 or more means it was replayed."""
    built: Counter[str] = Counter()
    original = WatchedRunner.create_instance

    def counting(self: WatchedRunner, det: Any) -> Any:
        built[det.info.run_id] += 1
        return original(self, det)

    monkeypatch.setattr(WatchedRunner, "create_instance", counting)
    return built


async def _all_waiting(agent: AgentClient, user: str, count: int) -> dict[str, str]:
    """Prompt id -> its waiting call id, from visibility (no query: a query would bring a prompt back)."""
    for _ in range(400):
        listed = await agent.pending(user_id=user)
        if len(listed.rows) == count:
            return {row.prompt_id: row.tool_call_id for row in listed.rows}
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} prompts never all waited")


async def _paid(handle: PromptHandle) -> None:
    prompt = await asyncio.wait_for(handle.result(), 30)
    assert prompt.state == "completed", prompt.error
    results = [o.result for o in prompt.output if isinstance(o, ToolOutput)]
    assert len(results) == 1 and isinstance(results[0], ToolSuccess) and results[0].output == "paid 500"
    events = [e.event_type async for e in handle.workflow.fetch_history_events()]
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events


async def test_waiting_prompts_beyond_the_kept_leave_the_cache_and_each_resumes(
        dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _instances(monkeypatch)
    worker, agent = _worker(dev_env, _settings(cached_waiting=2))
    runner = worker.config(active_config=True)["workflow_runner"]
    assert isinstance(runner, WatchedRunner)
    user = f"u-{uuid.uuid4().hex[:8]}"
    async with worker:
        handles = [await agent.start("approval", user_id=user) for _ in range(5)]
        calls = await _all_waiting(agent, user, 5)
        for _ in range(100):  # a sweep every 0.25 s
            if len(runner.runs) <= 2 and runner.runs.resting() <= 2:
                break
            await asyncio.sleep(0.05)
        assert runner.runs.resting() == 2
        run_ids = {h.id: (await h.workflow.describe()).run_id for h in handles}
        assert all(built[run_id] == 1 for run_id in run_ids.values())  # nothing replayed yet
        for handle in handles:
            await handle.approve(calls[handle.id], by="ann")
        for handle in handles:
            await _paid(handle)
    replayed = sorted(built[run_id] for run_id in run_ids.values())
    assert replayed == [1, 1, 2, 2, 2]  # the two kept resumed in place; the three evicted were replayed


async def test_decisions_racing_evictions_lose_nothing(dev_env: WorkflowEnvironment,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Every prompt leaves the cache once it waits (`cached_waiting=0`); each decision comes at a random moment
    before, during or after its eviction, by signal or update, some after a query brought the prompt back."""
    built = _instances(monkeypatch)
    worker, agent = _worker(dev_env, _settings(cached_waiting=0))
    user = f"u-{uuid.uuid4().hex[:8]}"
    rng = random.Random(28)
    async with worker:
        handles = [await agent.start("approval", user_id=user) for _ in range(12)]
        calls = await _all_waiting(agent, user, 12)

        async def decide(handle: PromptHandle, n: int) -> None:
            await asyncio.sleep(rng.uniform(0, 0.6))
            if n % 3 == 0:
                assert [p.tool_call_id for p in await handle.pending_approvals()] == [calls[handle.id]]
            await handle.approve(calls[handle.id], by="ann", wait=n % 2 == 0)
            await _paid(handle)

        await asyncio.gather(*(decide(handle, n) for n, handle in enumerate(handles)))
    assert sum(built.values()) > len(handles)  # some were evicted and replayed


async def test_the_cache_is_temporals_own_when_every_waiting_prompt_fits(dev_env: WorkflowEnvironment) -> None:
    settings = _settings(cached_waiting=64, max_cached_workflows=64)
    worker, agent = _worker(dev_env, settings)
    assert not isinstance(worker.config(active_config=True)["workflow_runner"], WatchedRunner)
    user = f"u-{uuid.uuid4().hex[:8]}"
    async with worker:
        handle = await agent.start("approval", user_id=user)
        calls = await _all_waiting(agent, user, 1)
        await handle.approve(calls[handle.id], by="ann")
        await _paid(handle)


async def test_without_the_sdk_door_waiting_prompts_stay_cached_and_run(dev_env: WorkflowEnvironment,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A temporalio without `request_workflow_eviction` (the private call this relies on): one warning, and the
    worker runs with Temporal's own cache."""
    monkeypatch.setattr(plugin_module, "eviction_door", lambda worker: None)
    worker, agent = _worker(dev_env, _settings(cached_waiting=0))
    runner = worker.config(active_config=True)["workflow_runner"]
    assert isinstance(runner, WatchedRunner)
    user = f"u-{uuid.uuid4().hex[:8]}"
    with capture_logs() as logs:
        async with worker:
            handle = await agent.start("approval", user_id=user)
            calls = await _all_waiting(agent, user, 1)
            await asyncio.sleep(0.6)  # two sweeps' time
            assert runner.runs.resting() == 1
            await handle.approve(calls[handle.id], by="ann")
            await _paid(handle)
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == ["workflow_cache.no_eviction_door"]
