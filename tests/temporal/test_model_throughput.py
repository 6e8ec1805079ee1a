"""Throughput control: model calls on their own task queue, limited by Temporal for every worker polling the
queue together (`max_task_queue_activities_per_second`, derived from the configured limit by
workers/rate_limits.py), so a burst of prompts never sends a provider more calls in any second than its
limit. The provider is the real openai SDK against the local fake server, which answers 429 (with
Retry-After) above its own per-second limit."""

from __future__ import annotations

import asyncio
import itertools
import math
import uuid
from contextlib import AsyncExitStack

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.plugins import Plugin
from durable_agent.client import AgentClient
from durable_agent.workers.plugin import DurableAgentPlugin
from durable_agent.workers.rate_limits import DISPATCH_SPREAD, PACING_DELAY, RECOVERY, Pacer, queue_rate
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_model_worker, create_worker, create_workers
from tests.fakes import FakeLLMServer
from tests.fakes.providers import make_provider
from tests.support.workers import TEST_SETTINGS

PROMPTS = 50
LIMIT = 5  # requests per second: the fake provider's limit and the model queue's configured limit
RETRY_AFTER = 2.0  # longer than the retry policy's first backoff (1 s), so honouring it is visible
LEAST_USE = 0.3  # the average must reach this share of the limit (the server's rate is 0.4 of it): a limiter
# far too slow fails, a busy machine that cannot start prompts as fast as the queue hands calls out does not


def busiest_window(times: list[float], seconds: float = 1.0) -> int:
    """The most requests in any window of `seconds` (sliding: each window starts at a request)."""
    times = sorted(times)
    end, most = 0, 0
    for start, at in enumerate(times):
        while end < len(times) and times[end] < at + seconds:
            end += 1
        most = max(most, end - start)
    return most


async def test_fifty_prompts_never_exceed_the_limit_in_any_second(dev_env: WorkflowEnvironment,
                                                                  llm: FakeLLMServer) -> None:
    llm.rate_limit("chat", LIMIT, retry_after=RETRY_AFTER)
    for i in range(PROMPTS):
        llm.reply_text("chat", f"answer {i}")
    queue = f"tq-{uuid.uuid4().hex[:10]}"
    settings = TEST_SETTINGS.model_copy(update={"task_queue": queue, "model_task_queue": f"{queue}-models"})
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": make_provider(llm, "chat")})
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(create_worker(dev_env.client, runtime, task_queue=queue, settings=settings))
        # a fleet of two model workers (one client each, like two processes): the server-side rate covers both
        second = await Client.connect(dev_env.client.service_client.config.target_host,
                                      plugins=[DurableAgentPlugin(settings)])
        for worker_client in (dev_env.client, second):
            await stack.enter_async_context(create_model_worker(
                worker_client, runtime, task_queue=f"{queue}-models", max_concurrent=20, rate_limit=LIMIT))
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
    busiest, average = busiest_window(times), (len(times) - 1) / span
    print(f"{len(times)} requests ({refused} answered 429) in {span:.1f} s: average {average:.2f}/s, busiest "
          f"1-second window {busiest}, limit {LIMIT}/s (server rate {queue_rate(LIMIT):g}/s)")
    assert busiest <= LIMIT
    assert average >= LEAST_USE * LIMIT
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


def test_busiest_window_slides() -> None:
    assert busiest_window([0.0, 0.5, 0.9, 1.0, 1.4]) == 4  # [0.5, 1.5), not [0, 1) or [1, 2)
    assert busiest_window([0.0, 1.0, 2.0]) == 1 and busiest_window([]) == 0


def test_queue_rate_fits_burst_and_rate_in_every_second() -> None:
    """The server's bucket (burst ceil(rate)) plus its refills never add up to more than the limit in a
    window of one second plus the dispatch spread."""
    for limit in (2, 3, 5, 7, 10, 20, 50, 100):
        rate = queue_rate(limit)
        burst = math.ceil(rate) + 1  # the bucket, and the call a new partition hands out before it knows the rate
        refills = math.ceil(rate * (1 + DISPATCH_SPREAD) - 1e-9) - 1  # at k / rate, strictly inside the window
        assert burst + refills <= limit, limit
        assert rate >= (0.4 if limit >= 5 else 0.33) * limit, limit  # and uses a fair share of it
    assert queue_rate(0.5) == 0.5  # one call every 2 s
    assert queue_rate(5) == 2 and queue_rate(10) == pytest.approx(5 / 1.2)
def test_the_pacer_keeps_the_servers_gaps_between_calls_started_late() -> None:
    pacer = Pacer()
    assert pacer.start_at(100.0, now=100.01) == 100.0 + PACING_DELAY  # on time: the least shift
    assert pacer.start_at(100.4, now=103.4) == 103.4  # 3 s late: starts now, and the shift becomes 3 s
    assert pacer.start_at(100.8, now=103.5) == pytest.approx(100.8 + 3 - RECOVERY * 0.4)  # 0.36 s later, not now
    for handed_out in (101.2, 101.6, 102.0):  # the shift comes down slowly: gaps shrink by RECOVERY at most
        before = pacer.shift
        pacer.start_at(handed_out, now=handed_out + 0.05)
        assert pacer.shift == pytest.approx(before - RECOVERY * 0.4)
    pacer.start_at(200.0, now=200.05)  # after a long pause: back to the least shift
    assert pacer.shift == PACING_DELAY


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
