"""Prompt caching: Anthropic `cache_control` breakpoints on the stable prefix (instructions or tools, and the
conversation so far), OpenAI `prompt_cache_key`; cached and cache-write tokens recorded and priced. Real
SDKs against the local fake server, through a real worker."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import Usage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.pricing import Price, PriceTable
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage
from tests.fakes.llm_server import anthropic_body
from tests.fakes.providers import ask, make_provider
from tests.support.workers import TEST_SETTINGS

EPHEMERAL = {"type": "ephemeral"}


class City(BaseModel):
    city: str


@tool("weather.get")
async def weather(args: City, ctx: ToolContext) -> str:
    """Current weather for a city."""
    return f"sunny in {args.city}"


def _breakpoints(value: Any) -> list[Any]:
    """Every object in the body that carries `cache_control`."""
    found: list[Any] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(value)
        for item in value.values():
            found += _breakpoints(item)
    elif isinstance(value, list):
        for item in value:
            found += _breakpoints(item)
    return found


def _anthropic_usage(body: dict[str, Any], *, fresh: int, read: int, written: int, out: int) -> dict[str, Any]:
    return {**body, "usage": {"input_tokens": fresh, "output_tokens": out, "cache_read_input_tokens": read,
                              "cache_creation_input_tokens": written}}


async def _run(dev_env: WorkflowEnvironment, provider: Any, text: str, *, instructions: str | None = "Be brief.",
               prices: PriceTable | None = None, **options: Any) -> Any:
    settings = TEST_SETTINGS.model_copy(update={"task_queue": f"tq-{uuid.uuid4().hex[:10]}"})
    runtime = build_runtime(settings, plugins=[Plugin("weather", tools=[weather])], providers={"normal": provider})
    if prices is not None:
        runtime.prices = prices
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue):
        return await AgentClient(dev_env.client, settings).run(text, instructions=instructions, **options)


async def test_anthropic_breakpoints_cover_instructions_and_earlier_rounds(dev_env: WorkflowEnvironment,
                                                                          llm: FakeLLMServer) -> None:
    first = anthropic_body(None, [FakeCall("weather_get", {"city": "Oslo"}, id="t1")], FakeUsage(), "claude-x")
    llm.reply_raw("anthropic", _anthropic_usage(first, fresh=30, read=0, written=2000, out=20))
    second = anthropic_body("Sunny.", [], FakeUsage(), "claude-x")
    llm.reply_raw("anthropic", _anthropic_usage(second, fresh=40, read=2000, written=60, out=5))
    prices = PriceTable({"claude-x": Price(input=3, output=15, cached_input=0.3, cache_write=3.75)})
    prompt = await _run(dev_env, make_provider(llm, "anthropic"), "Weather in Oslo?", prices=prices)
    assert prompt.state == "completed"
    round_one, round_two = llm.bodies("anthropic")
    for body in (round_one, round_two):
        assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
        assert all("cache_control" not in t for t in body["tools"])  # the system breakpoint covers them
        last_block = body["messages"][-1]["content"][-1]
        assert last_block["cache_control"] == EPHEMERAL
        assert len(_breakpoints(body)) == 2  # Anthropic allows 4
    # round 2: the breakpoint moved to the tool result, so round 1's whole prefix is read from the cache
    assert round_two["messages"][-1]["content"][-1]["type"] == "tool_result"
    assert "cache_control" not in json.dumps(round_two["messages"][:-1])
    usage = prompt.usage
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (30 + 2000 + 40 + 2000 + 60,
                                                                                 2000, 2060)
    expected = ((30 + 40) * 3 + 2000 * 0.3 + 2060 * 3.75 + 25 * 15) / 1_000_000
    assert usage.cost == pytest.approx(expected)


async def test_anthropic_without_instructions_marks_the_last_tool(llm: FakeLLMServer) -> None:
    llm.reply_text("anthropic", "ok")
    await make_provider(llm, "anthropic").complete(ask().model_copy(update={"instructions": ""}))
    body = llm.last_body("anthropic")
    assert "system" not in body and body["tools"][-1]["cache_control"] == EPHEMERAL
    assert len(_breakpoints(body)) == 2


async def test_caching_off_sends_no_breakpoints_and_no_key(llm: FakeLLMServer) -> None:
    llm.reply_text("anthropic", "ok")
    llm.reply_text("responses", "ok")
    off = ask(settings=ModelSettings(prompt_cache=False), cache_key="conv-9")
    await make_provider(llm, "anthropic").complete(off)
    await make_provider(llm, "responses").complete(off)
    anthropic = llm.last_body("anthropic")
    assert _breakpoints(anthropic) == [] and anthropic["system"] == "You are helpful."
    assert "prompt_cache_key" not in llm.last_body("responses")


async def test_openai_prompt_cache_key_and_cached_tokens(dev_env: WorkflowEnvironment, llm: FakeLLMServer) -> None:
    llm.reply_text("responses", "Hello.", usage=FakeUsage(input_tokens=3000, output_tokens=10, cached_tokens=2048),
                   model="gpt-x")
    prices = PriceTable({"gpt-x": Price(input=2, output=8, cached_input=0.5)})
    prompt_id = f"cache-{uuid.uuid4().hex[:8]}"
    prompt = await _run(dev_env, make_provider(llm, "responses"), "hi", prices=prices, prompt_id=prompt_id,
                        conversation_id="conv-42")
    assert llm.last_body("responses")["prompt_cache_key"] == "conv-42"  # one key per conversation
    assert prompt.usage.cached_tokens == 2048
    assert prompt.usage.cost == pytest.approx(((3000 - 2048) * 2 + 2048 * 0.5 + 10 * 8) / 1_000_000)


def test_cache_write_price_defaults_to_input() -> None:
    usage = Usage(input_tokens=1000, cached_tokens=200, cache_write_tokens=300, output_tokens=0)
    assert Price(input=1, output=1).cost(usage) == pytest.approx(1000 / 1_000_000)
    assert Price(input=1, output=1, cache_write=2, cached_input=0).cost(usage) == pytest.approx(1100 / 1_000_000)
