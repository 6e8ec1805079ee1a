"""Reasoning round-trips: OpenAI Responses reasoning items (with `encrypted_content`, since `store=False`)
and Anthropic thinking / redacted_thinking blocks (with signatures) are kept in the prompt record as
`reasoning` outputs, sent back unchanged to the provider that made them, skipped for every other provider,
and their summaries stream to their own topic. Real SDKs against the local fake server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ReasoningMessage, ToolCallMessage, ToolResultMessage, UserMessage
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import ReasoningOutput, TextOutput, ToolOutput
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.projection import project_output
from durable_agent.agent.providers import ToolNameMap, anthropic_messages, openai_chat, openai_responses
from durable_agent.agent.tools import tool
from durable_agent.workflows.protocol import TextDelta
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage, WireProtocol
from tests.fakes.llm_server import anthropic_body, chat_body, responses_body, with_reasoning
from tests.fakes.providers import ask, make_provider
from tests.support.workers import agent_worker

ENCRYPTED = "gAAAAB-encrypted-reasoning-0123456789"
SIGNATURE = "EqQBCkYIARgCIkB-signature"


class City(BaseModel):
    city: str


@tool("weather.get")
async def weather(args: City, ctx: ToolContext) -> str:
    """Current weather for a city."""
    return f"sunny in {args.city}"


PLUGIN = Plugin("weather", tools=[weather])


def _queue_two_rounds(llm: FakeLLMServer, protocol: WireProtocol, *, redacted: bool = False) -> None:
    build = responses_body if protocol == "responses" else anthropic_body
    first = build(None, [FakeCall("weather_get", {"city": "Paris"}, id="call_1")], FakeUsage(10, 5), "m-1")
    llm.reply_raw(protocol, with_reasoning(protocol, first, summary="Need the weather tool.", secret=ENCRYPTED
                                           if protocol == "responses" else SIGNATURE, redacted=redacted))
    second = build("It is sunny.", [], FakeUsage(20, 5), "m-1")
    llm.reply_raw(protocol, with_reasoning(protocol, second, summary="The tool answered.", secret="second"))


async def test_openai_reasoning_items_round_trip_through_a_prompt(dev_env: WorkflowEnvironment,
                                                                  llm: FakeLLMServer) -> None:
    _queue_two_rounds(llm, "responses")
    async with agent_worker(dev_env, plugins=[PLUGIN], model=make_provider(llm, "responses")) as client:
        prompt = await client.run("Weather in Paris?", model_settings=ModelSettings(reasoning_effort="medium",
                                                                                     reasoning_summary="auto"))
    assert prompt.state == "completed"
    kinds = [type(o).__name__ for o in prompt.output]
    assert kinds == ["ReasoningOutput", "ToolOutput", "ReasoningOutput", "TextOutput"]
    first = prompt.output[0]
    assert isinstance(first, ReasoningOutput)
    assert (first.provider, first.summary) == ("openai", "Need the weather tool.")
    first_body, second_body = llm.bodies("responses")
    assert first_body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert first_body["include"] == ["reasoning.encrypted_content"] and first_body["store"] is False
    # round 2 sends the reasoning item back verbatim, right before the function call it led to
    assert second_body["input"][1:] == [
        {"type": "reasoning", "id": "rs_fake", "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
         "encrypted_content": ENCRYPTED},
        {"type": "function_call", "call_id": "call_1", "name": "weather_get", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"},
    ]


async def test_anthropic_thinking_round_trips_with_its_signature(dev_env: WorkflowEnvironment,
                                                                 llm: FakeLLMServer) -> None:
    _queue_two_rounds(llm, "anthropic")
    async with agent_worker(dev_env, plugins=[PLUGIN], model=make_provider(llm, "anthropic")) as client:
        prompt = await client.run("Weather in Paris?", model_settings=ModelSettings(reasoning_budget_tokens=2048))
    assert prompt.state == "completed"
    assert isinstance(prompt.output[0], ReasoningOutput) and prompt.output[0].summary == "Need the weather tool."
    assert isinstance(prompt.output[1], ToolOutput) and isinstance(prompt.output[-1], TextOutput)
    second = llm.bodies("anthropic")[1]
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert second["messages"][1] == {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Need the weather tool.", "signature": SIGNATURE},
        {"type": "tool_use", "id": "call_1", "name": "weather_get", "input": {"city": "Paris"}},
    ]}


async def test_anthropic_redacted_thinking_round_trips(dev_env: WorkflowEnvironment, llm: FakeLLMServer) -> None:
    _queue_two_rounds(llm, "anthropic", redacted=True)
    async with agent_worker(dev_env, plugins=[PLUGIN], model=make_provider(llm, "anthropic")) as client:
        prompt = await client.run("Weather in Paris?")
    redacted = prompt.output[0]
    assert isinstance(redacted, ReasoningOutput) and redacted.summary == ""
    assert llm.bodies("anthropic")[1]["messages"][1]["content"][0] == {"type": "redacted_thinking",
                                                                      "data": SIGNATURE}


def _history_with(provider: str, item: dict[str, Any]) -> ModelRequest:
    return ModelRequest(messages=[
        UserMessage(text="hi"), ReasoningMessage(provider=provider, item=item),
        ToolCallMessage(call_id="c1", tool="weather.get", arguments={"city": "Oslo"}),
        ToolResultMessage(call_id="c1", tool="weather.get", content="cold"),
    ])


def test_other_providers_reasoning_is_skipped() -> None:
    openai_item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"}
    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    names = ToolNameMap(["weather.get"])
    to_anthropic = anthropic_messages.build_messages(_history_with("openai", openai_item), names=names)
    assert [b["type"] for m in to_anthropic for b in m["content"]] == ["text", "tool_use", "tool_result"]
    to_openai = openai_responses.build_request(_history_with("anthropic", thinking), model="m", names=names)
    assert [i.get("type", i.get("role")) for i in to_openai["input"]] == ["user", "function_call",
                                                                          "function_call_output"]
    to_chat = openai_chat.build_messages(_history_with("openai", openai_item), names=names)
    assert [m["role"] for m in to_chat] == ["user", "assistant", "tool"]
    # an OpenAI item without encrypted content cannot be sent back when nothing is stored server-side
    unencrypted = {"type": "reasoning", "id": "rs_1", "summary": []}
    sent = openai_responses.build_request(_history_with("openai", unencrypted), model="m", names=names)
    assert all(i.get("type") != "reasoning" for i in sent["input"])


async def test_streamed_reasoning_summaries(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    if protocol == "chat":
        return  # Chat Completions has no reasoning items
    build = responses_body if protocol == "responses" else anthropic_body
    body = with_reasoning(protocol, build("Done.", [], FakeUsage(3, 1), "m"), summary="Think it  through.",
                          secret="sig")
    llm.reply_raw(protocol, body)
    llm.reply_raw(protocol, body)
    provider = make_provider(llm, protocol)
    texts: list[str] = []
    thoughts: list[str] = []

    async def on_text(delta: str) -> None:
        texts.append(delta)

    async def on_reasoning(delta: str) -> None:
        thoughts.append(delta)

    streamed = await provider.stream(ask(), on_text, on_reasoning)
    completed = await provider.complete(ask())
    assert len(thoughts) > 1 and "".join(thoughts) == "Think it  through."
    assert "".join(texts) == "Done."
    assert streamed.reasoning == completed.reasoning
    assert streamed.reasoning[0].summary == "Think it  through."


async def test_streamed_reasoning_writes_no_history(dev_env: WorkflowEnvironment, llm: FakeLLMServer) -> None:
    """Reasoning summaries stream through the model activity's heartbeat details (like its text), so a
    watcher may see them while the round runs, and the prompt's history holds only the recorded output."""
    body = with_reasoning("anthropic", anthropic_body("Done.", [], FakeUsage(3, 1), "m"),
                          summary="Step one. Step two.", secret="sig")
    llm.reply_raw("anthropic", body)
    async with agent_worker(dev_env, plugins=[PLUGIN], model=make_provider(llm, "anthropic")) as client:
        handle = await client.start("think")
        seen = [item async for _, item in handle.live() if isinstance(item, TextDelta) and item.kind == "reasoning"]
        prompt = await handle.result()
        history = await handle.workflow.fetch_history()
    assert prompt.state == "completed"
    assert all("Step one. Step two."[d.offset:d.offset + len(d.text)] == d.text for d in seen)
    assert [o.type for o in prompt.output] == ["reasoning", "text"]
    assert not [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]


async def test_local_chat_servers_reasoning_is_shown_not_sent_back(llm: FakeLLMServer) -> None:
    """vLLM / DeepSeek / Ollama put reasoning in `reasoning_content` beside the content: shown, never sent."""
    body = chat_body("42.", [], FakeUsage(3, 1), "qwen3")
    body["choices"][0]["message"]["reasoning_content"] = "Six times  seven."
    llm.reply_raw("chat", body)
    llm.reply_raw("chat", body)
    provider = make_provider(llm, "chat")
    thoughts: list[str] = []

    async def on_reasoning(delta: str) -> None:
        thoughts.append(delta)

    async def on_text(delta: str) -> None:
        pass

    completed = await provider.complete(ask())
    streamed = await provider.stream(ask(), on_text, on_reasoning)
    assert completed.reasoning == streamed.reasoning
    [shown] = completed.reasoning
    assert (shown.provider, shown.summary, shown.item) == ("openai-chat", "Six times  seven.", {})
    assert len(thoughts) > 1 and "".join(thoughts) == "Six times  seven."
    assert project_output(shown) == []  # nothing to send back to any provider
