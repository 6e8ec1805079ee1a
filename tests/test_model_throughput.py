"""Throughput control: model calls on their own task queue, rate-limited by Temporal
(`max_task_queue_activities_per_second`, enforced by the server for every worker polling the queue), so a
burst of prompts stays under a provider's rate limit. The provider is the real openai SDK against the
local fake server, which answers 429 (with Retry-After) above its own per-second limit."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from contextlib import AsyncExitStack

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent.plugins import Plugin
from client import AgentClient
from tests.fakes import FakeLLMServer
from tests.fakes.providers import make_provider
from tests.support.workers import TEST_SETTINGS
from workers.plugin import DurableAgentPlugin
from workers.settings import Settings
from workers.worker import build_runtime, create_model_worker, create_worker, create_workers

PROMPTS = 50
LIMIT = 5  # requests per second: the fake provider's limit and the model queue's configured rate
RETRY_AFTER = 2.0  # longer than the retry policy's first backoff (1 s), so honouring it is visible


def _max_in_any_second(times: list[float]) -> int:
    return max(sum(1 for t in times if start <= t < start + 1.0) for start in times)


async def test_fifty_prompts_stay_under_the_configured_rate(dev_env: WorkflowEnvironment,
                                                            llm: FakeLLMServer) -> None:
    llm.rate_limit("chat", LIMIT, retry_after=RETRY_AFTER)
    for i in range(PROMPTS):
        llm.reply_text("chat", f"answer {i}")
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    settings = TEST_SETTINGS.model_copy(update={"task_queue": queue, "model_task_queue": f"{queue}-models"})
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": make_provider(llm, "chat")})
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(create_worker(dev_env.client, runtime, task_queue=queue))
        # a fleet of two model workers (one client each, like two processes): the server-side rate covers both
        second = await Client.connect(dev_env.client.service_client.config.target_host,
                                      plugins=[DurableAgentPlugin(settings)])
        for worker_client in (dev_env.client, second):
            await stack.enter_async_context(create_model_worker(
                worker_client, runtime, task_queue=f"{queue}-models", max_concurrent=20, queue_rate=LIMIT))
        client = AgentClient(dev_env.client, settings)
        handles = await asyncio.gather(*(client.start(f"question {i}") for i in range(PROMPTS)))
        prompts = await asyncio.gather(*(h.result() for h in handles))
        history = await handles[0].workflow.fetch_history()
    assert [p.state for p in prompts] == ["completed"] * PROMPTS
    assert sorted(p.output[-1].text for p in prompts) == sorted(f"answer {i}" for i in range(PROMPTS))  # type: ignore[union-attr]
    requests = llm.requests("chat")
    times = sorted(r.at for r in requests)
    refused = sum(r.rate_limited for r in requests)
    span = times[-1] - times[0]
    busiest = _max_in_any_second(times)
    print(f"{len(times)} requests ({refused} answered 429 and retried after Retry-After) in {span:.1f} s: "
          f"average {(len(times) - 1) / span:.1f}/s, busiest second {busiest}, configured {LIMIT}/s")
    # Temporal's task-queue rate is a token bucket holding one second's worth: over a span the queue hands out
    # at most LIMIT * (1 + span) calls. (Within one second a busy machine can bunch requests that were handed
    # out at the rate, so the busiest second is reported, not asserted.)
    assert len(times) <= 1 + LIMIT * (1 + span)
    # a prompt answered 429 asks again only after the Retry-After it was given
    by_prompt: dict[str, list[tuple[float, bool]]] = {}
    for r in requests:
        question = next(m["content"] for m in r.body["messages"] if m["role"] == "user")
        by_prompt.setdefault(question, []).append((r.at, r.rate_limited))
    for attempts in by_prompt.values():
        attempts.sort()
        for (at, limited), (next_at, _) in itertools.pairwise(attempts):
            assert limited and next_at - at >= RETRY_AFTER
    scheduled = [e.activity_task_scheduled_event_attributes.task_queue.name for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert scheduled == [f"{queue}-models"]


def test_worker_roles_from_settings() -> None:
    settings = Settings.from_env({"DAGENT_MODEL_TASK_QUEUE": "models", "DAGENT_MODEL_TASK_QUEUE_HIGH": "models-b",
                                  "DAGENT_MODEL_RATE": "5", "DAGENT_MODEL_CONCURRENCY": "4",
                                  "DAGENT_WORKER_QUEUES": "models"})
    assert settings.model_queue_for("normal") == "models" and settings.model_queue_for("high") == "models-b"
    assert settings.model_queues == ["models", "models-b"]
    assert (settings.model_rate, settings.model_concurrency, settings.model_worker_rate) == (5.0, 4, None)
    assert Settings().model_queue_for("high") is None
    for bad in ({"DAGENT_MODEL_RATE": "0"}, {"DAGENT_MODEL_RATE": "fast"}):
        try:
            Settings.from_env(bad)
        except ValueError as exc:
            assert "DAGENT_MODEL_RATE" in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")


async def test_create_workers_polls_the_queues_its_role_names(dev_env: WorkflowEnvironment) -> None:
    runtime = build_runtime(TEST_SETTINGS, plugins=[Plugin("none")], providers={"normal": []})
    for role, expected in (("all", ["wf", "model"]), ("workflows", ["wf"]), ("models", ["model"])):
        tag = uuid.uuid4().hex[:8]  # fresh queues: one client registers one worker per queue
        settings = TEST_SETTINGS.model_copy(update={"task_queue": f"wf-{tag}", "model_task_queue": f"model-{tag}",
                                                    "model_rate": 3.0, "worker_queues": role})
        workers = create_workers(dev_env.client, runtime, settings)
        assert [w.task_queue for w in workers] == [f"{name}-{tag}" for name in expected]
    try:
        create_workers(dev_env.client, runtime, TEST_SETTINGS.model_copy(update={"worker_queues": "models"}))
    except ValueError as exc:
        assert "DAGENT_MODEL_TASK_QUEUE" in str(exc)
    else:
        raise AssertionError("a models-only worker without a model queue was accepted")
