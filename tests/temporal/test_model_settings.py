"""Model settings per tier and per prompt: validated at start, recorded on the prompt, shown in the model
activity's summary, and sent on the wire as each provider documents them (real SDKs, local fake server)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers import FatalModelError
from durable_agent.client import AgentClient
from durable_agent.workers.settings import Settings
from durable_agent.workers.worker import build_runtime, create_worker
from tests.fakes import FakeLLMServer, WireProtocol
from tests.fakes.providers import ask, make_provider
from tests.support.workers import TEST_SETTINGS

FULL = ModelSettings(temperature=0.3, top_p=0.9, max_output_tokens=900, stop=["END"], seed=7,
                     reasoning_effort="low", parallel_tool_calls=False, tool_choice="required",
                     extra={"metadata": {"team": "a"}})


def _settings_in(body: dict[str, Any]) -> dict[str, Any]:
    ignored = {"model", "input", "instructions", "messages", "system", "tools", "store", "stream", "stream_options"}
    return {k: v for k, v in body.items() if k not in ignored}


async def test_full_settings_on_the_wire(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "ok")
    await make_provider(llm, protocol).complete(ask(settings=FULL, cache_key="conv-1"))
    sent = _settings_in(llm.last_body(protocol))
    if protocol == "responses":  # no stop / seed in the Responses API
        assert sent == {"temperature": 0.3, "top_p": 0.9, "max_output_tokens": 900,
                        "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"],
                        "parallel_tool_calls": False, "tool_choice": "required", "prompt_cache_key": "conv-1",
                        "metadata": {"team": "a"}}
    elif protocol == "chat":
        assert sent == {"temperature": 0.3, "top_p": 0.9, "max_completion_tokens": 900, "stop": ["END"],
                        "seed": 7, "reasoning_effort": "low", "parallel_tool_calls": False,
                        "tool_choice": "required", "metadata": {"team": "a"}}
    else:  # no seed; an effort alone means adaptive thinking
        assert sent == {"max_tokens": 900, "thinking": {"type": "adaptive"}, "output_config": {"effort": "low"},
                        "temperature": 0.3, "top_p": 0.9, "stop_sequences": ["END"],
                        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
                        "metadata": {"team": "a"}}


async def test_no_settings_send_only_the_defaults(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "ok")
    await make_provider(llm, protocol).complete(ask())
    assert _settings_in(llm.last_body(protocol)) == ({"max_tokens": 4096} if protocol == "anthropic" else {})


async def test_forced_tool_uses_the_provider_name(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "ok")
    await make_provider(llm, protocol).complete(ask(settings=ModelSettings(tool_choice="weather.get")))
    choice = llm.last_body(protocol)["tool_choice"]
    assert choice == {"responses": {"type": "function", "name": "weather_get"},
                      "chat": {"type": "function", "function": {"name": "weather_get"}},
                      "anthropic": {"type": "tool", "name": "weather_get"}}[protocol]


async def test_forcing_a_tool_not_offered_is_fatal_before_any_request(llm: FakeLLMServer,
                                                                       protocol: WireProtocol) -> None:
    with pytest.raises(FatalModelError, match=r"tool_choice names tool 'mail.send'.*weather.get"):
        await make_provider(llm, protocol).complete(ask(settings=ModelSettings(tool_choice="mail.send")))
    assert llm.requests(protocol) == []


async def test_anthropic_budget_and_max_tokens(llm: FakeLLMServer) -> None:
    llm.reply_text("anthropic", "ok")
    llm.reply_text("anthropic", "ok")
    provider = make_provider(llm, "anthropic")
    await provider.complete(ask(settings=ModelSettings(reasoning_budget_tokens=3000)))
    await provider.complete(ask(settings=ModelSettings(max_output_tokens=32000, parallel_tool_calls=False)))
    first, second = llm.bodies("anthropic")
    assert first["max_tokens"] == 3000 + 4096 and first["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert second["max_tokens"] == 32000 and "thinking" not in second
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_validation_and_merge() -> None:
    with pytest.raises(ValidationError, match="less than or equal to 2"):
        ModelSettings(temperature=3)
    with pytest.raises(ValidationError, match="must be greater than reasoning_budget_tokens"):
        ModelSettings(max_output_tokens=2000, reasoning_budget_tokens=2000)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ModelSettings.model_validate({"temprature": 0.2})
    tier = ModelSettings(temperature=0.2, max_output_tokens=100, extra={"a": 1, "b": 2})
    merged = tier.merged(ModelSettings(max_output_tokens=50, extra={"b": 3}))
    assert merged == ModelSettings(temperature=0.2, max_output_tokens=50, extra={"a": 1, "b": 3})
    assert merged.summary() == "temperature=0.2 max_output_tokens=50 extra=[a,b]"
    assert tier.merged(None) is tier


def test_tier_settings_from_env() -> None:
    settings = Settings.from_env({"DAGENT_MODEL_SETTINGS_NORMAL": '{"temperature": 0.1}',
                                  "DAGENT_MODEL_HIGH": "scripted:x:y",
                                  "DAGENT_MODEL_SETTINGS_HIGH": '{"reasoning_effort": "high"}'})
    assert settings.tier_settings == {"normal": ModelSettings(temperature=0.1),
                                      "high": ModelSettings(reasoning_effort="high")}
    same_model = Settings.from_env({"DAGENT_MODEL_SETTINGS_NORMAL": '{"temperature": 0.1}'})
    assert same_model.tier_settings["high"] == ModelSettings(temperature=0.1)
    with pytest.raises(ValueError, match="DAGENT_MODEL_SETTINGS_NORMAL: invalid model settings"):
        Settings.from_env({"DAGENT_MODEL_SETTINGS_NORMAL": '{"top_p": 5}'})


async def test_prompt_settings_over_tier_settings_end_to_end(dev_env: WorkflowEnvironment,
                                                             llm: FakeLLMServer) -> None:
    """A real worker: tier settings from configuration, the prompt's own on top, Anthropic on the wire."""
    settings = TEST_SETTINGS.model_copy(update={
        "task_queue": f"tq-{uuid.uuid4().hex[:10]}",
        "model_settings_normal": ModelSettings(temperature=0.2, max_output_tokens=1000, extra={"top_k": 5})})
    provider = make_provider(llm, "anthropic")
    runtime = build_runtime(settings, plugins=[Plugin("none")], providers={"normal": provider})
    llm.reply_text("anthropic", "done")
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
        client = AgentClient(dev_env.client, settings)
        with pytest.raises(ValidationError, match="top_p"):
            await client.start("hi", model_settings={"top_p": 0})
        handle = await client.start("hi", model_settings=ModelSettings(max_output_tokens=8000, stop=["##"]))
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    assert prompt.state == "completed"
    body = llm.last_body("anthropic")
    assert (body["temperature"], body["max_tokens"], body["stop_sequences"], body["top_k"]) == (0.2, 8000, ["##"], 5)
    assert prompt.model_settings == ModelSettings(max_output_tokens=8000, stop=["##"])
    [recorded] = prompt.model_rounds
    assert recorded.round == 1 and recorded.model == "anthropic:test-model" and recorded.fallback == 0
    assert recorded.settings == ModelSettings(temperature=0.2, max_output_tokens=8000, stop=["##"],
                                              extra={"top_k": 5})
    summaries = [e.user_metadata.summary.data.decode() for e in history.events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    assert summaries == ['"model normal round 1 (max_output_tokens=8000 stop=##)"']
