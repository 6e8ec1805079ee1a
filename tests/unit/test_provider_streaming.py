"""`stream` on every provider, with the real openai / anthropic SDKs reading real server-sent events from the
local fake server: deltas arrive in order (and before the stream ends), the result equals `complete`'s, and
errors - before the stream, inside it, or a stream cut off - are classified like `complete`'s."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk

from durable_agent.agent.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ToolCallMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from durable_agent.agent.models import Usage
from durable_agent.agent.providers import (
    FatalModelError,
    RetryableModelError,
    ScriptedModel,
    StreamingModelProvider,
    ToolNameMap,
)
from durable_agent.agent.providers.openai_chat import ChatStreamAccumulator
from durable_agent.agent.providers.scripted import split_words, text, tool_calls
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage, SSEOptions, WireProtocol
from tests.fakes.llm_server import anthropic_body, responses_body, text_pieces
from tests.fakes.providers import API_KEY, PROVIDER_CLASSES, WEATHER, ask, make_provider

TOOLS = [
    ToolSpec(id="trigger.create", description="Create a trigger", parameters={"type": "object"}),
    ToolSpec(id="trigger_create", description="Legacy name", parameters={}),
    WEATHER,
]
LONG_TEXT = "The weather in Paris is  sunny, 18°C — lovely.\nIn Lyon: light rain ☔ all day. "


class Deltas:
    """An `on_text` sink that records every delta (and can run a hook on each)."""

    def __init__(self, hook: Callable[[str], None] | None = None):
        self.items: list[str] = []
        self._hook = hook

    async def __call__(self, delta: str) -> None:
        self.items.append(delta)
        if self._hook is not None:
            self._hook(delta)

    @property
    def joined(self) -> str:
        return "".join(self.items)


# --- deltas ---------------------------------------------------------------------------------------


async def test_text_deltas_arrive_in_order(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, LONG_TEXT)
    deltas = Deltas()
    response = await make_provider(llm, protocol).stream(ask(), deltas)
    assert deltas.items == text_pieces(LONG_TEXT)
    assert len(deltas.items) > 5
    assert deltas.joined == LONG_TEXT == response.text
    body = llm.last_body(protocol)
    assert body["stream"] is True
    assert body["model"] == "test-model"
    if protocol == "chat":
        assert body["stream_options"] == {"include_usage": True}


async def test_deltas_are_delivered_while_the_stream_is_open(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    # The server holds the stream after its first few events until the sink has seen a delta: a provider that
    # buffered the whole reply before calling on_text would leave the server waiting until its timeout.
    resume = threading.Event()
    first_delta_at = {"responses": 5, "chat": 2, "anthropic": 4}[protocol]
    llm.reply_text(protocol, "one two three", sse=SSEOptions(pause_after=first_delta_at, resume=resume))
    deltas = Deltas(hook=lambda _: resume.set())
    response = await make_provider(llm, protocol).stream(ask(), deltas)
    assert llm.pauses == [True]
    assert deltas.items == ["one ", "two ", "three"]
    assert response.text == "one two three"


async def test_tool_calls_only_send_no_deltas(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [FakeCall("weather_get", {"city": "Paris"}, id="call_abc")])
    deltas = Deltas()
    response = await make_provider(llm, protocol).stream(ask(), deltas)
    assert deltas.items == []
    assert response.text is None
    assert response.tool_calls == [ModelToolCall(id="call_abc", tool="weather.get", arguments={"city": "Paris"})]


# --- stream == complete ---------------------------------------------------------------------------

USAGE = FakeUsage(input_tokens=120, output_tokens=33, cached_tokens=40, reasoning_tokens=7)


def _dotted_request() -> ModelRequest:
    history: list[Message] = [
        UserMessage(text="weather?"),
        ToolCallMessage(call_id="call_1", tool="weather.get", arguments={"city": "Paris"}),
        ToolResultMessage(call_id="call_1", tool="weather.get", content='{"temp_c":18}'),
        UserMessage(text="make a trigger"),
    ]
    return ModelRequest(instructions="Be brief.", messages=history, tools=TOOLS)


SCENARIOS: dict[str, Callable[[FakeLLMServer, WireProtocol], None]] = {
    "text": lambda llm, p: llm.reply_text(p, LONG_TEXT, usage=USAGE),
    "text_and_dotted_tool_calls": lambda llm, p: llm.reply_tool_calls(
        p,
        [FakeCall("trigger_create_2", {"when": "rain", "nested": {"list": [1, 2, 3], "s": "a,b"}}, id="c_1"),
         FakeCall("trigger_create", {}, id="c_2"),
         FakeCall("weather_get", {"city": "Zürich"}, id="c_3")],
        text="Setting up three things.", usage=USAGE,
    ),
    "tool_call_without_text": lambda llm, p: llm.reply_tool_calls(p, [("weather_get", {"city": "Oslo"})],
                                                                  usage=USAGE),
    "malformed_and_non_object_arguments": lambda llm, p: llm.reply_tool_calls(
        p, [("weather_get", '{"city": "Par'), ("weather_get", "[1, 2]"), ("weather_get", "")]),
    "no_usage_numbers": lambda llm, p: llm.reply_text(p, "Fine."),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_stream_returns_what_complete_returns(llm: FakeLLMServer, protocol: WireProtocol,
                                                    scenario: str) -> None:
    provider = make_provider(llm, protocol)
    request = _dotted_request()
    SCENARIOS[scenario](llm, protocol)
    SCENARIOS[scenario](llm, protocol)
    completed = await provider.complete(request)
    deltas = Deltas()
    streamed = await provider.stream(request, deltas)
    assert streamed == completed
    assert deltas.joined == (completed.text or "")
    assert streamed.usage.model_calls == 1
    # both calls sent the same request, apart from the streaming switches
    sent_complete, sent_stream = llm.bodies(protocol)
    assert {k: v for k, v in sent_stream.items() if k not in ("stream", "stream_options")} == sent_complete


async def test_dotted_ids_and_usage_round_trip(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    SCENARIOS["text_and_dotted_tool_calls"](llm, protocol)
    response = await make_provider(llm, protocol).stream(_dotted_request(), Deltas())
    assert [(c.id, c.tool) for c in response.tool_calls] == [
        ("c_1", "trigger.create"), ("c_2", "trigger_create"), ("c_3", "weather.get")]
    assert response.tool_calls[0].arguments == {"when": "rain", "nested": {"list": [1, 2, 3], "s": "a,b"}}
    assert response.tool_calls[2].arguments == {"city": "Zürich"}
    expected_input = 160 if protocol == "anthropic" else 120  # Anthropic's cache reads are added in
    assert response.usage == Usage(input_tokens=expected_input, output_tokens=33, cached_tokens=40,
                                   reasoning_tokens=7, model_calls=1)
    assert response.model == "fake-model"


async def test_chat_server_without_usage(llm: FakeLLMServer) -> None:
    llm.reply_text("chat", "no usage here", usage=USAGE, sse=SSEOptions(usage=False))
    response = await make_provider(llm, "chat").stream(ask(), Deltas())
    assert response.text == "no usage here"
    assert response.usage == Usage(model_calls=1)


async def test_responses_refusal_is_streamed_like_text(llm: FakeLLMServer) -> None:
    body = responses_body("Sure", [], FakeUsage(1, 2), "fake-model")
    body["output"].append({"type": "message", "id": "m2", "role": "assistant", "status": "completed",
                           "content": [{"type": "refusal", "refusal": " - but not that."}]})
    body["output"].insert(0, {"type": "reasoning", "id": "rs_1", "summary": []})
    llm.reply_raw("responses", body)
    llm.reply_raw("responses", body)
    provider = make_provider(llm, "responses")
    deltas = Deltas()
    streamed = await provider.stream(ask(), deltas)
    assert streamed == await provider.complete(ask())
    assert deltas.joined == streamed.text == "Sure - but not that."


async def test_responses_incomplete_is_returned_like_complete(llm: FakeLLMServer) -> None:
    body = responses_body("Cut by max_output_tokens", [], FakeUsage(5, 9), "fake-model")
    body["status"] = "incomplete"
    body["incomplete_details"] = {"reason": "max_output_tokens"}
    llm.reply_raw("responses", body)
    llm.reply_raw("responses", body)
    provider = make_provider(llm, "responses")
    assert await provider.stream(ask(), Deltas()) == await provider.complete(ask())


async def test_anthropic_thinking_blocks_are_not_text(llm: FakeLLMServer) -> None:
    body = anthropic_body("Done.", [FakeCall("weather_get", {"city": "Rome"}, id="toolu_1")], USAGE, "fake-model")
    body["content"].insert(0, {"type": "thinking", "thinking": "hmm, weather", "signature": "sig"})
    llm.reply_raw("anthropic", body)
    llm.reply_raw("anthropic", body)
    provider = make_provider(llm, "anthropic")
    deltas = Deltas()
    streamed = await provider.stream(ask(), deltas)
    assert streamed == await provider.complete(ask())
    assert deltas.items == ["Done."]


# --- errors ---------------------------------------------------------------------------------------


async def test_429_before_the_stream_is_retryable(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    provider = make_provider(llm, protocol)
    llm.reply_error(protocol, 429, message="slow down", headers={"Retry-After": "7"})
    llm.reply_text(protocol, "better now")
    deltas = Deltas()
    with pytest.raises(RetryableModelError) as caught:
        await provider.stream(ask(), deltas)
    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    assert "slow down" in str(caught.value)
    assert deltas.items == []
    assert len(llm.requests(protocol)) == 1  # the SDK did not retry on its own
    assert (await provider.stream(ask(), deltas)).text == "better now"


@pytest.mark.parametrize("status", [500, 529])
async def test_5xx_before_the_stream_is_retryable(llm: FakeLLMServer, protocol: WireProtocol,
                                                  status: int) -> None:
    llm.reply_error(protocol, status, message="upstream exploded")
    with pytest.raises(RetryableModelError) as caught:
        await make_provider(llm, protocol).stream(ask(), Deltas())
    assert caught.value.status == status


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_4xx_before_the_stream_is_fatal_and_never_leaks_the_key(llm: FakeLLMServer, protocol: WireProtocol,
                                                                      status: int) -> None:
    llm.reply_error(protocol, status, message=f"Incorrect API key provided: {API_KEY}")
    with pytest.raises(FatalModelError) as caught:
        await make_provider(llm, protocol).stream(ask(), Deltas())
    error = caught.value
    assert error.status == status and not error.retryable
    assert API_KEY not in str(error) and API_KEY not in repr(error.args)
    assert "test-model" in str(error) and PROVIDER_CLASSES[protocol].name in str(error)
    assert error.__cause__ is None


async def test_connection_cut_mid_stream_is_retryable(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    cut_after = {"responses": 6, "chat": 3, "anthropic": 5}[protocol]  # after two text deltas
    llm.reply_text(protocol, LONG_TEXT, sse=SSEOptions(cut_after=cut_after, cut="reset"))
    deltas = Deltas()
    with pytest.raises(RetryableModelError) as caught:
        await make_provider(llm, protocol).stream(ask(), deltas)
    assert "connection error" in str(caught.value)
    assert caught.value.__cause__ is None
    assert deltas.items == text_pieces(LONG_TEXT)[:2]
    # the provider (and its connection pool) is still usable
    llm.reply_text(protocol, "again")
    assert (await make_provider(llm, protocol).stream(ask(), Deltas())).text == "again"


async def test_stream_ending_early_is_retryable(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [("weather_get", {"city": "Paris"})], text="Checking",
                         sse=SSEOptions(cut_after=6, cut="eof"))
    with pytest.raises(RetryableModelError, match="stream ended before"):
        await make_provider(llm, protocol).stream(ask(), Deltas())


@pytest.mark.parametrize(("error_type", "retryable"), [
    ("overloaded_error", True), ("server_error", True), ("rate_limit_exceeded", True),
    ("invalid_request_error", False),
])
async def test_error_event_inside_the_stream(llm: FakeLLMServer, protocol: WireProtocol, error_type: str,
                                             retryable: bool) -> None:
    llm.reply_text(protocol, LONG_TEXT, sse=SSEOptions(cut_after=5, cut="error", error_type=error_type))
    with pytest.raises(RetryableModelError if retryable else FatalModelError) as caught:
        await make_provider(llm, protocol).stream(ask(), Deltas())
    message = str(caught.value)
    assert error_type in message and "fake stream error" in message
    assert "test-model" in message


@pytest.mark.parametrize(("code", "retryable"), [("server_error", True), ("invalid_prompt", False)])
async def test_responses_failed_event(llm: FakeLLMServer, code: str, retryable: bool) -> None:
    body = responses_body("partial", [], FakeUsage(), "fake-model")
    body["status"] = "failed"
    body["error"] = {"code": code, "message": "it broke"}
    llm.reply_raw("responses", body)
    with pytest.raises(RetryableModelError if retryable else FatalModelError, match="it broke"):
        await make_provider(llm, "responses").stream(ask(), Deltas())


async def test_connection_refused_is_retryable(protocol: WireProtocol) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("" if protocol == "anthropic" else "/v1")
    provider = PROVIDER_CLASSES[protocol](model="m", api_key=API_KEY, base_url=base, timeout=2.0)
    with pytest.raises(RetryableModelError, match="connection error"):
        await provider.stream(ask(), Deltas())


async def test_sink_errors_propagate_unchanged(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    class SinkBroke(Exception):
        pass

    async def broken(delta: str) -> None:
        raise SinkBroke(delta)

    llm.reply_text(protocol, LONG_TEXT)
    with pytest.raises(SinkBroke):
        await make_provider(llm, protocol).stream(ask(), broken)
    llm.reply_text(protocol, "still fine")
    assert (await make_provider(llm, protocol).stream(ask(), Deltas())).text == "still fine"


async def test_cancelling_a_stream_releases_it(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    resume = threading.Event()
    llm.reply_text(protocol, LONG_TEXT, sse=SSEOptions(pause_after=6, resume=resume, pause_timeout=2.0))
    started = asyncio.Event()
    task = asyncio.create_task(make_provider(llm, protocol).stream(ask(), Deltas(hook=lambda _: started.set())))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    resume.set()
    llm.reply_text(protocol, "after cancel")
    assert (await make_provider(llm, protocol).stream(ask(), Deltas())).text == "after cancel"


# --- protocol and lenient chat servers ------------------------------------------------------------


async def test_providers_satisfy_streaming_protocol(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    assert isinstance(make_provider(llm, protocol), StreamingModelProvider)
    assert isinstance(ScriptedModel([]), StreamingModelProvider)


def _chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> ChatCompletionChunk:
    return ChatCompletionChunk.construct(id="c", object="chat.completion.chunk", created=0, model="local",
                                         choices=choices, usage=usage)


def test_chat_accumulator_lenient_servers() -> None:
    names = ToolNameMap(["weather.get"])
    acc = ChatStreamAccumulator()
    running = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    final = {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
    chunks = [
        # usage on every chunk (running totals), a whole tool call in one chunk without `index`, a repeated id
        _chunk([{"index": 0, "delta": {"content": "Hi"}}], running),
        _chunk([{"index": 0, "delta": {"tool_calls": [
            {"id": "t1", "function": {"name": "weather_get", "arguments": '{"city": "Oslo"}'}}]}}], running),
        _chunk([{"index": 0, "delta": {"tool_calls": [
            {"id": "t2", "function": {"name": "weather_get", "arguments": '{"city":'}}]}}], running),
        _chunk([{"index": 0, "delta": {"tool_calls": [{"id": "t2", "function": {"arguments": ' "Bergen"}'}}]}}]),
        _chunk([{"index": 1, "delta": {"content": "ignored: a second choice"}}]),
        _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], final),
    ]
    assert [acc.add(chunk) for chunk in chunks] == ["Hi", "", "", "", "", ""]
    assert acc.finish_reason == "tool_calls"
    response = acc.response(names=names)
    assert response == ModelResponse(
        text="Hi",
        tool_calls=[ModelToolCall(id="t1", tool="weather.get", arguments={"city": "Oslo"}),
                    ModelToolCall(id="t2", tool="weather.get", arguments={"city": "Bergen"})],
        usage=Usage(input_tokens=3, output_tokens=9, model_calls=1),
        model="local", response_id="c",  # the chunks' completion id
    )


def test_chat_accumulator_missing_ids_get_positions() -> None:
    acc = ChatStreamAccumulator()
    acc.add(_chunk([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"name": "weather_get", "arguments": "{}"}},
        {"index": 1, "function": {"name": "other", "arguments": ""}}]}, "finish_reason": "tool_calls"}]))
    calls = acc.response(names=ToolNameMap(["weather.get"])).tool_calls
    assert [(c.id, c.tool, c.arguments) for c in calls] == [("call_0", "weather.get", {}), ("call_1", "other", {})]


# --- ScriptedModel --------------------------------------------------------------------------------


async def test_scripted_stream_splits_words_and_matches_complete() -> None:
    model = ScriptedModel([text(LONG_TEXT), tool_calls(("weather.get", {"city": "Paris"}), text="On it.")])
    deltas = Deltas()
    streamed = await model.stream(ask(round=1), deltas)
    assert deltas.items == split_words(LONG_TEXT)
    assert deltas.joined == LONG_TEXT
    assert streamed == await model.complete(ask(round=1))
    assert len(model.requests) == 2  # one recording per call

    second = Deltas()
    streamed = await model.stream(ask(round=2), second)
    assert second.items == ["On ", "it."]
    assert streamed.tool_calls == [ModelToolCall(id="call_r2_0", tool="weather.get", arguments={"city": "Paris"})]
    assert streamed == await model.complete(ask(round=2))
    assert [r.round for r in model.requests] == [1, 1, 2, 2]


async def test_scripted_stream_without_text_and_errors() -> None:
    model = ScriptedModel([tool_calls(("weather.get", {}))])
    deltas = Deltas()
    response = await model.stream(ask(), deltas)
    assert deltas.items == [] and response.text is None
    with pytest.raises(FatalModelError, match="no response for round 2"):
        await model.stream(ask(round=2), deltas)
    assert deltas.items == []
    assert [r.round for r in model.requests] == [1, 2]


def test_split_words() -> None:
    assert split_words("Hello big  world") == ["Hello ", "big  ", "world"]
    assert split_words("  lead\nnext ") == ["  lead\n", "next "]
    assert split_words("") == []
    assert split_words("   ") == ["   "]
