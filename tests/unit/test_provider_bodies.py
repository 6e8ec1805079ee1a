"""The OpenAI adapters send their request bodies through the SDK's `extra_body` (`providers/sdk.sent_as_given`), which
skips the SDK's typed-parameter walk. That is only right if the walk never changes one of our bodies: for any
request, what reaches the server must be what the SDK's own typed call sends. Both are sent, through the real
SDKs, to the fake LLM server, for random transcripts, tools and settings, plain and streamed (the Anthropic
adapter, which keeps the typed call, is held to the same). And where someone else reads the typed parameters (an
instrumentation wrapping the SDK, a client the user built), the adapters keep them."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, get_args

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from durable_agent.agent.messages import (
    AssistantMessage,
    Message,
    ModelRequest,
    ReasoningMessage,
    ToolCallMessage,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from durable_agent.agent.model_settings import ModelSettings, ReasoningEffort, ReasoningSummary
from durable_agent.agent.providers import (
    ToolNameMap,
    anthropic_messages,
    openai_chat,
    openai_responses,
)
from durable_agent.agent.providers.base import ModelError
from durable_agent.agent.providers.sdk import sent_as_given
from tests.fakes import FakeLLMServer, WireProtocol
from tests.fakes.providers import API_KEY, PROVIDER_TIMEOUT, make_provider

TOOL_IDS = ("weather.get", "fs.read_file", "a" * 70, "calc")
VENDOR = {"responses": openai_responses.PROVIDER, "chat": "openai", "anthropic": anthropic_messages.PROVIDER}
# Headers that differ between any two requests: a fresh idempotency key, and the W3C trace context of the request's
# own span (the Anthropic SDK's tracing sends one once a test has set a global tracer provider).
PER_REQUEST_HEADERS = {"idempotency-key", "traceparent", "tracestate"}

texts = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3), max_leaves=8)


@st.composite
def messages(draw: st.DrawFn, protocol: WireProtocol) -> list[Message]:
    call_ids = st.sampled_from(["call_1", "call_2", "toolu_3"])
    one = st.one_of(
        st.builds(UserMessage, text=texts),
        st.builds(AssistantMessage, text=texts),
        st.builds(ToolCallMessage, call_id=call_ids, tool=st.sampled_from(TOOL_IDS), arguments=json_values),
        st.builds(ToolResultMessage, call_id=call_ids, tool=st.sampled_from(TOOL_IDS), content=texts,
                  is_error=st.booleans()),
        st.builds(ReasoningMessage, provider=st.sampled_from([VENDOR[protocol], "elsewhere"]),
                  item=st.fixed_dictionaries({"type": st.sampled_from(["reasoning", "thinking"]), "id": texts},
                                             optional={"signature": texts, "summary": st.lists(
                                                 st.fixed_dictionaries({"type": st.just("summary_text"),
                                                                        "text": texts}), max_size=2)})),
    )
    return [UserMessage(text=draw(texts)), *draw(st.lists(one, max_size=8))]


@st.composite
def model_settings(draw: st.DrawFn) -> ModelSettings:
    try:
        return ModelSettings(
            temperature=draw(st.none() | st.floats(0, 2)),
            top_p=draw(st.none() | st.floats(0.01, 1)),
            max_output_tokens=draw(st.none() | st.integers(1, 8192)),
            stop=draw(st.none() | st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=4)),
            seed=draw(st.none() | st.integers(0, 2**31)),
            reasoning_effort=draw(st.none() | st.sampled_from(get_args(ReasoningEffort))),
            reasoning_budget_tokens=draw(st.none() | st.integers(1024, 4096)),
            reasoning_summary=draw(st.none() | st.sampled_from(get_args(ReasoningSummary))),
            parallel_tool_calls=draw(st.none() | st.booleans()),
            tool_choice=draw(st.none() | st.sampled_from(["auto", "required", "none", *TOOL_IDS])),
            prompt_cache=draw(st.none() | st.booleans()),
            # `extra` may repeat a field the adapter sets: it must still win, as it did over typed parameters
            extra=draw(st.dictionaries(st.sampled_from(["metadata", "temperature", "user", "service_tier"]),
                                       json_values, max_size=2)),
        )
    except ValidationError:
        reject()


@st.composite
def requests(draw: st.DrawFn, protocol: WireProtocol) -> ModelRequest:
    tools = draw(st.lists(st.sampled_from(TOOL_IDS), unique=True, max_size=3))
    return ModelRequest(
        instructions=draw(texts), messages=draw(messages(protocol)),
        tools=[ToolSpec(id=tool, description=draw(texts), parameters=draw(st.dictionaries(texts, json_values,
                                                                                          max_size=3)))
               for tool in tools],
        settings=draw(model_settings()), cache_key=draw(st.sampled_from(["", "conv-1"])))


def typed_call(protocol: WireProtocol, client: Any, request: ModelRequest, stream: bool, model: str) -> Any:
    """What the adapter would send as the SDK's typed parameters: the body `build_request` makes."""
    names = ToolNameMap.for_request(request)
    extra: dict[str, Any] = {"stream": True} if stream else {}
    if protocol == "responses":
        return client.responses.create(**openai_responses.build_request(request, model=model, names=names), **extra)
    if protocol == "chat":
        if stream:
            extra["stream_options"] = {"include_usage": True}
        return client.chat.completions.create(**openai_chat.build_request(request, model=model, names=names),
                                              **extra)
    return client.messages.create(**anthropic_messages.build_request(request, model=model, names=names), **extra)


def clients(llm: FakeLLMServer, protocol: WireProtocol) -> tuple[Any, Any]:
    """The SDK's client, and the adapter on a client of its own (`make_provider`: as a worker builds it), with the
    adapter's timeout (the SDKs send it in a header)."""
    url, timeout = llm.base_url(protocol), PROVIDER_TIMEOUT
    sdk: Any = (anthropic.AsyncAnthropic if protocol == "anthropic" else openai.AsyncOpenAI)(
        api_key=API_KEY, base_url=url, max_retries=0, timeout=timeout)
    return sdk, make_provider(llm, protocol)


def sent(llm: FakeLLMServer, protocol: WireProtocol) -> tuple[Any, dict[str, str]]:
    last = llm.requests(protocol)[-1]
    headers = {name.lower(): value for name, value in last.headers.items()
               if name.lower() not in PER_REQUEST_HEADERS}
    return last.body, headers


async def roundtrip(llm: FakeLLMServer, protocol: WireProtocol, call: Any, stream: bool) -> tuple[Any, dict[str, str]]:
    llm.reply_text(protocol, "ok")
    reply = await call
    if stream:
        async for _ in reply:
            pass
    return sent(llm, protocol)


async def ignore(_: str) -> None:
    return None


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_adapter_sends_what_the_sdks_typed_call_sends(llm: FakeLLMServer, protocol: WireProtocol,
                                                         stream: bool) -> None:
    loop = asyncio.new_event_loop()  # one loop for the SDK clients' connections, across the examples
    sdk, provider = clients(llm, protocol)

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(request=requests(protocol))
    def check(request: ModelRequest) -> None:
        try:
            typed = typed_call(protocol, sdk, request, stream, provider.model)
        except ModelError:  # build_request refuses it (a forced tool the request does not offer): so does the adapter
            reject()
        expected = loop.run_until_complete(roundtrip(llm, protocol, typed, stream))
        llm.reply_text(protocol, "ok")
        loop.run_until_complete(provider.stream(request, ignore) if stream else provider.complete(request))
        assert sent(llm, protocol) == expected

    try:
        check()
    finally:
        loop.run_until_complete(sdk.close())
        loop.close()


def test_the_moved_fields_leave_the_sdk_what_it_reads_itself() -> None:
    """The SDK keeps the model (Azure's client puts it in the path); request options stay options; a prompt's
    `extra` still wins over a field it repeats; a required parameter is passed empty and sent from the body."""
    kwargs = {"model": "m", "messages": [{"role": "user"}], "temperature": 0.5, "timeout": 3.0,
              "extra_headers": {"x": "1"}, "extra_body": {"temperature": 0.9}}
    assert sent_as_given(kwargs, emptied=("messages",)) == {
        "model": "m", "timeout": 3.0, "extra_headers": {"x": "1"}, "messages": [],
        "extra_body": {"messages": [{"role": "user"}], "temperature": 0.9},
    }


BODY_FIELD = {"responses": "input", "chat": "messages"}


def create_of(client: Any, protocol: WireProtocol) -> Any:
    return client.responses if protocol == "responses" else client.chat.completions


@pytest.mark.parametrize("protocol", ["responses", "chat"])
async def test_the_body_goes_in_extra_body_only_when_nobody_reads_the_typed_parameters(
        llm: FakeLLMServer, protocol: WireProtocol, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's own client: the body rides `extra_body`. The same SDK method wrapped (as OpenTelemetry's,
    OpenLLMetry's or Langfuse's instrumentation wraps it, reading the call's parameters), or a client the user
    built and passed: the typed parameters, as the SDK documents them."""
    request = ModelRequest(messages=[UserMessage(text="hello")])
    field = BODY_FIELD[protocol]

    async def one_call(provider: Any, resource: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        create = resource.create

        async def recording(**kwargs: Any) -> Any:
            seen.update(kwargs)
            return await create(**kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(resource, "create", recording)  # on the instance: not a wrapper (no __wrapped__)
            llm.reply_text(protocol, "ok")
            await provider.complete(request)
        return seen

    _, own = clients(llm, protocol)
    seen = await one_call(own, create_of(own._client, protocol))
    assert not seen.get(field) and seen["extra_body"][field], "the worker's own client sends the body as given"

    kind = type(create_of(own._client, protocol))
    original, seen = kind.__dict__["create"], {}

    @functools.wraps(original)  # as an instrumentation wraps it (wrapt's proxies carry `__wrapped__` too)
    async def instrumented(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        return await original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(kind, "create", instrumented)
        llm.reply_text(protocol, "ok")
        await own.complete(request)
    assert seen[field] and field not in seen.get("extra_body", {}), "an instrumented SDK gets the typed parameters"

    given = openai.AsyncOpenAI(api_key=API_KEY, base_url=llm.base_url(protocol), max_retries=0)
    provider = type(own)(model=own.model, api_key=API_KEY, client=given)
    seen = await one_call(provider, create_of(given, protocol))
    assert seen[field] and field not in seen.get("extra_body", {}), "a user's client gets the typed parameters"
