"""Fallback chains: a tier names `provider:model` specs in order; a non-retryable error moves to the next at
once, retryable ones after `fallback_after_attempts`; the record says which model answered each round.
Real SDKs against the local fake server (one server, two wire protocols), a real worker."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.agent.providers.registry import resolve_chain
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from tests.fakes import FakeLLMServer
from tests.fakes.providers import API_KEY, make_provider
from tests.support.workers import TEST_SETTINGS


async def _run(dev_env: WorkflowEnvironment, chain: Sequence[ModelProvider], *, budget: int = 2) -> tuple[Any, Any]:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": list(chain)})
    runtime.fallback_after_attempts = budget
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
        client = AgentClient(dev_env.client, settings)
        handle = await client.start("hello", fail_workflow_on_error=False)
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    summaries = [e.user_metadata.summary.data.decode().strip('"') for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    return prompt, summaries


async def test_fallback_after_a_500_storm(dev_env: WorkflowEnvironment, llm: FakeLLMServer) -> None:
    for _ in range(5):
        llm.reply_error("responses", 500, message="storm")
    llm.reply_text("anthropic", "answered by the fallback", model="claude-fallback")
    prompt, summaries = await _run(dev_env, [make_provider(llm, "responses"), make_provider(llm, "anthropic")])
    assert prompt.state == "completed" and prompt.output[-1].text == "answered by the fallback"
    assert len(llm.requests("responses")) == 2  # the retry budget, then the fallback
    assert llm.pending("responses") == 3
    [answered] = prompt.model_rounds
    assert (answered.model, answered.response_model, answered.fallback) == ("anthropic:test-model",
                                                                             "claude-fallback", 1)
    assert summaries == ["model normal round 1", "model normal round 1 (fallback 1: anthropic:test-model)"]


async def test_a_fatal_error_falls_back_at_once(dev_env: WorkflowEnvironment, llm: FakeLLMServer) -> None:
    llm.reply_error("anthropic", 401, message="bad key")
    llm.reply_text("chat", "chat answered")
    prompt, summaries = await _run(dev_env, [make_provider(llm, "anthropic"), make_provider(llm, "chat")])
    assert prompt.state == "completed" and prompt.output[-1].text == "chat answered"
    assert len(llm.requests("anthropic")) == 1
    assert prompt.model_rounds[0].model == "openai-chat:test-model" and prompt.model_rounds[0].fallback == 1
    assert len(summaries) == 2


async def test_every_model_failing_fails_the_prompt_with_the_last_reason(dev_env: WorkflowEnvironment,
                                                                         llm: FakeLLMServer) -> None:
    llm.reply_error("responses", 400, message="bad request one")
    llm.reply_error("anthropic", 403, message="forbidden two")
    prompt, summaries = await _run(dev_env, [make_provider(llm, "responses"), make_provider(llm, "anthropic")])
    assert prompt.state == "failed" and "forbidden two" in (prompt.error or "")
    assert prompt.model_rounds == [] and len(summaries) == 2


def test_chain_specs() -> None:
    env = {"OPENAI_API_KEY": API_KEY, "ANTHROPIC_API_KEY": API_KEY}
    chain = resolve_chain("openai:gpt-5, anthropic:claude-sonnet-4-5", env)
    assert [(p.name, p.model) for p in chain] == [("openai", "gpt-5"), ("anthropic", "claude-sonnet-4-5")]
    for bad in ("openai:gpt-5,", ",anthropic:x"):
        try:
            resolve_chain(bad, env)
        except ValueError as exc:
            assert "fallback chain" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")
