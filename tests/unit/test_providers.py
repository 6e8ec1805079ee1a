"""Providers against the real openai / anthropic SDKs talking HTTP to a local fake server, plus the
name map, error mapping, registry and ScriptedModel."""

from __future__ import annotations

import re
import socket
import sys
import types
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from durable_agent.agent.messages import (
    AssistantMessage,
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
    AnthropicMessagesProvider,
    FatalModelError,
    ModelProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    RetryableModelError,
    ScriptedModel,
    ToolNameMap,
    anthropic_messages,
    openai_chat,
    openai_responses,
    resolve_provider,
    to_model_error,
)
from durable_agent.agent.providers.errors import parse_retry_after
from durable_agent.agent.providers.scripted import text, tool_calls
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage, WireProtocol
from tests.fakes.llm_server import anthropic_body, chat_body, responses_body
from tests.fakes.providers import API_KEY, PROVIDER_CLASSES, WEATHER, ask, make_provider

LEGAL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def sent_tool_names(protocol: WireProtocol, body: dict[str, Any]) -> list[str]:
    tools = body.get("tools", [])
    if protocol == "chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


# --- each provider over HTTP ----------------------------------------------------------------------


async def test_text_reply(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "It is sunny.")
    response = await make_provider(llm, protocol).complete(ask())
    assert response.text == "It is sunny."
    assert response.tool_calls == []
    assert response.model == "fake-model"
    body = llm.last_body(protocol)
    assert body["model"] == "test-model"
    if protocol == "responses":
        assert body["instructions"] == "You are helpful."
        assert body["input"] == [{"role": "user", "content": "What's the weather in Paris?"}]
    elif protocol == "chat":
        assert body["messages"] == [{"role": "system", "content": "You are helpful."},
                                    {"role": "user", "content": "What's the weather in Paris?"}]
    else:
        # prompt caching is on by default: breakpoints after the instructions and after the last message
        assert body["system"] == [{"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}]
        assert body["max_tokens"] == 4096
        assert body["messages"] == [{"role": "user", "content": [
            {"type": "text", "text": "What's the weather in Paris?", "cache_control": {"type": "ephemeral"}}]}]


async def test_api_key_sent_in_header(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "ok")
    await make_provider(llm, protocol).complete(ask())
    headers = {k.lower(): v for k, v in llm.requests(protocol)[-1].headers.items()}
    # (recent anthropic SDKs send the key as a bearer token, older ones as x-api-key)
    sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
    assert sent == API_KEY


async def test_single_tool_call(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [FakeCall("weather_get", {"city": "Paris"}, id="call_abc")])
    response = await make_provider(llm, protocol).complete(ask())
    assert response.text is None
    assert response.tool_calls == [
        ModelToolCall(id="call_abc", tool="weather.get", arguments={"city": "Paris"})
    ]


async def test_text_and_parallel_tool_calls(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [("weather_get", {"city": "Paris"}), ("weather_get", {"city": "Lyon"})],
                         text="Checking both.")
    response = await make_provider(llm, protocol).complete(ask("Paris and Lyon?"))
    assert response.text == "Checking both."
    assert [(c.tool, c.arguments) for c in response.tool_calls] == [
        ("weather.get", {"city": "Paris"}), ("weather.get", {"city": "Lyon"})]
    assert len({c.id for c in response.tool_calls}) == 2


async def test_dotted_tool_ids_round_trip(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    tools = [
        ToolSpec(id="trigger.create", description="Create a trigger", parameters={"type": "object"}),
        ToolSpec(id="trigger_create", description="Legacy name", parameters={}),
        WEATHER,
    ]
    history: list[Message] = [
        UserMessage(text="weather?"),
        ToolCallMessage(call_id="call_1", tool="weather.get", arguments={"city": "Paris"}),
        ToolResultMessage(call_id="call_1", tool="weather.get", content='{"temp_c":18}'),
        UserMessage(text="make a trigger"),
    ]
    request = ModelRequest(messages=history, tools=tools)
    names = ToolNameMap.for_request(request)
    dotted = names.to_provider("trigger.create")
    assert dotted == "trigger_create_2"
    llm.reply_tool_calls(protocol, [(dotted, {"when": "rain"}), ("trigger_create", {}), ("weather_get", {})])
    response = await make_provider(llm, protocol).complete(request)
    assert [c.tool for c in response.tool_calls] == ["trigger.create", "trigger_create", "weather.get"]

    body = llm.last_body(protocol)
    sent = sent_tool_names(protocol, body)
    assert sent == ["trigger_create_2", "trigger_create", "weather_get"]
    assert all(LEGAL.match(name) for name in sent)
    if protocol == "responses":
        assert body["input"][1]["name"] == "weather_get"
    elif protocol == "chat":
        assert body["messages"][1]["tool_calls"][0]["function"]["name"] == "weather_get"
    else:
        assert body["messages"][1]["content"][0]["name"] == "weather_get"
    assert "." not in str(sent)


async def test_unknown_tool_name_maps_to_itself(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [("made_up_tool", {})])
    response = await make_provider(llm, protocol).complete(ask())
    assert response.tool_calls[0].tool == "made_up_tool"


async def test_usage_parsed(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "hi", usage=FakeUsage(input_tokens=100, output_tokens=20, cached_tokens=40,
                                                   reasoning_tokens=5))
    usage = (await make_provider(llm, protocol).complete(ask())).usage
    # Anthropic reports cache reads apart from input_tokens; we add them so input_tokens means the same.
    expected_input = 140 if protocol == "anthropic" else 100
    assert usage == Usage(input_tokens=expected_input, output_tokens=20, cached_tokens=40, reasoning_tokens=5,
                          model_calls=1)


async def test_malformed_arguments_become_arguments_error(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [("weather_get", '{"city": "Par'), ("weather_get", {"city": "Lyon"})])
    response = await make_provider(llm, protocol).complete(ask())
    broken, fine = response.tool_calls
    assert broken.tool == "weather.get"
    assert broken.arguments is None
    assert broken.arguments_error is not None
    assert "not valid JSON" in broken.arguments_error and "weather.get" in broken.arguments_error
    assert fine.arguments == {"city": "Lyon"} and fine.arguments_error is None


async def test_non_object_arguments_are_an_error(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_tool_calls(protocol, [("weather_get", "[1, 2]")])
    call = (await make_provider(llm, protocol).complete(ask())).tool_calls[0]
    assert call.arguments is None
    assert call.arguments_error is not None and "JSON object" in call.arguments_error


async def test_429_retry_after_then_success(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    provider = make_provider(llm, protocol)
    llm.reply_error(protocol, 429, message="slow down", headers={"Retry-After": "7"})
    llm.reply_text(protocol, "better now")
    with pytest.raises(RetryableModelError) as caught:
        await provider.complete(ask())
    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    assert caught.value.retryable
    assert "slow down" in str(caught.value)
    assert len(llm.requests(protocol)) == 1  # the SDK did not retry on its own
    assert (await provider.complete(ask())).text == "better now"


async def test_retry_after_ms_header(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_error(protocol, 429, headers={"retry-after-ms": "1500"})
    with pytest.raises(RetryableModelError) as caught:
        await make_provider(llm, protocol).complete(ask())
    assert caught.value.retry_after == 1.5


@pytest.mark.parametrize("status", [500, 503, 529])
async def test_5xx_is_retryable(llm: FakeLLMServer, protocol: WireProtocol, status: int) -> None:
    llm.reply_error(protocol, status, message="upstream exploded")
    with pytest.raises(RetryableModelError) as caught:
        await make_provider(llm, protocol).complete(ask())
    assert caught.value.status == status
    assert caught.value.retry_after is None
    assert len(llm.requests(protocol)) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_4xx_is_fatal_and_never_leaks_the_key(llm: FakeLLMServer, protocol: WireProtocol,
                                                    status: int) -> None:
    llm.reply_error(protocol, status, message=f"Incorrect API key provided: {API_KEY}")
    with pytest.raises(FatalModelError) as caught:
        await make_provider(llm, protocol).complete(ask())
    error = caught.value
    message = str(error)
    assert error.status == status and not error.retryable
    assert API_KEY not in message and API_KEY not in repr(error.args)
    assert "test-model" in message and str(status) in message
    assert PROVIDER_CLASSES[protocol].name in message
    assert error.__cause__ is None


async def test_connection_error_is_retryable(protocol: WireProtocol) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("" if protocol == "anthropic" else "/v1")
    provider = PROVIDER_CLASSES[protocol](model="m", api_key=API_KEY, base_url=base, timeout=2.0)
    with pytest.raises(RetryableModelError) as caught:
        await provider.complete(ask())
    assert "connection error" in str(caught.value)


async def test_providers_satisfy_protocol(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    provider = make_provider(llm, protocol)
    assert isinstance(provider, ModelProvider)
    assert provider.name in {"openai", "openai-chat", "anthropic"}


async def test_no_tools_sends_no_tools_key(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    llm.reply_text(protocol, "ok")
    await make_provider(llm, protocol).complete(ModelRequest(messages=[UserMessage(text="hi")]))
    body = llm.last_body(protocol)
    assert "tools" not in body
    assert "instructions" not in body and "system" not in body


async def test_nothing_queued_is_a_clear_fatal_error(llm: FakeLLMServer, protocol: WireProtocol) -> None:
    with pytest.raises(FatalModelError, match=r"no \w+ reply queued"):
        await make_provider(llm, protocol).complete(ask())


# --- response parsing without HTTP ---------------------------------------------------------------


def test_parse_responses_output_items() -> None:
    body = responses_body("Hello ", [FakeCall("weather_get", "")], FakeUsage(), "gpt")
    body["output"][0]["content"].append({"type": "output_text", "text": "world", "annotations": []})
    body["output"].insert(0, {"type": "reasoning", "id": "rs_1", "summary": []})
    body["output"].append({"type": "message", "id": "m2", "role": "assistant", "status": "completed",
                           "content": [{"type": "refusal", "refusal": "!"}]})
    del body["usage"]
    names = ToolNameMap(["weather.get"])
    response = openai_responses.parse_response(Response.model_validate(body), names=names)
    assert response.text == "Hello world!"
    assert response.tool_calls == [ModelToolCall(id="call_0", tool="weather.get", arguments={})]
    assert response.usage == Usage(model_calls=1)
    assert response.model == "gpt"


def test_parse_chat_edge_cases() -> None:
    body = chat_body(None, [FakeCall("weather_get", {"city": "Oslo"})], FakeUsage(3, 4), "llama")
    body["choices"][0]["message"]["tool_calls"][0]["id"] = ""  # some local servers omit ids
    body["usage"] = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}  # no details
    names = ToolNameMap(["weather.get"])
    response = openai_chat.parse_response(ChatCompletion.model_validate(body), names=names)
    assert response.text is None
    assert response.tool_calls == [ModelToolCall(id="call_0", tool="weather.get", arguments={"city": "Oslo"})]
    assert response.usage == Usage(input_tokens=3, output_tokens=4, model_calls=1)
    empty = chat_body("x", [], FakeUsage(), "llama")
    empty["choices"] = []
    assert openai_chat.parse_response(ChatCompletion.model_validate(empty), names=names).text is None


def test_parse_anthropic_ignores_thinking() -> None:
    body = anthropic_body("Done.", [FakeCall("x_y", {"a": 1}, id="toolu_9")], FakeUsage(1, 2), "claude")
    body["content"].insert(0, {"type": "thinking", "thinking": "hmm", "signature": "sig"})
    names = ToolNameMap(["x.y"])
    response = anthropic_messages.parse_response(AnthropicMessage.model_validate(body), names=names)
    assert response.text == "Done."
    assert response.tool_calls == [ModelToolCall(id="toolu_9", tool="x.y", arguments={"a": 1})]


# --- error mapping without HTTP -------------------------------------------------------------------


def _status_error(sdk: str, status: int, headers: dict[str, str] | None = None) -> Exception:
    request = httpx2.Request("POST", "https://example.invalid/v1/x")
    response = httpx2.Response(status, headers=headers or {}, request=request)
    body = {"message": f"status {status}"}
    if sdk == "openai":
        return openai.APIStatusError(f"Error code: {status}", response=response, body=body)
    return anthropic.APIStatusError(f"Error code: {status}", response=response, body=body)


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize(("status", "retryable"), [
    (400, False), (401, False), (403, False), (404, False), (413, False), (422, False),
    (408, True), (409, True), (429, True), (500, True), (502, True), (529, True),
])
def test_status_classification(sdk: str, status: int, retryable: bool) -> None:
    error = to_model_error(_status_error(sdk, status), provider="p", model="m")
    assert isinstance(error, RetryableModelError if retryable else FatalModelError)
    assert error.status == status
    assert f"status {status}" in str(error)


def test_timeouts_and_other_errors() -> None:
    request = httpx2.Request("POST", "https://example.invalid")
    for timeout in (openai.APITimeoutError(request=request), anthropic.APITimeoutError(request=request)):
        error = to_model_error(timeout, provider="p", model="m")
        assert isinstance(error, RetryableModelError) and "timed out" in str(error)
    refusals = (openai.APIConnectionError(request=request), anthropic.APIConnectionError(request=request))
    for refused in refusals:
        assert isinstance(to_model_error(refused, provider="p", model="m"), RetryableModelError)
    unexpected = to_model_error(RuntimeError(f"boom {API_KEY}"), provider="p", model="m", secrets=[API_KEY])
    assert isinstance(unexpected, FatalModelError) and API_KEY not in str(unexpected)
    already = RetryableModelError("x")
    assert to_model_error(already, provider="p", model="m") is already


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


# --- tool name map --------------------------------------------------------------------------------


def test_name_map_basics() -> None:
    names = ToolNameMap(["trigger.create", "weather.get", "plain_name", "with-dash"])
    assert names.to_provider("trigger.create") == "trigger_create"
    assert names.to_provider("plain_name") == "plain_name"
    assert names.to_provider("with-dash") == "with-dash"
    assert names.from_provider("trigger_create") == "trigger.create"
    assert names.from_provider("never_heard_of_it") == "never_heard_of_it"


def test_name_map_collisions_are_deterministic() -> None:
    ids = ["a.b", "a_b", "a-b", "a b", "a/b"]
    first, second = ToolNameMap(ids), ToolNameMap(list(reversed(ids)))
    assert first.items() == second.items()
    provider_names = [first.to_provider(i) for i in ids]
    assert len(set(provider_names)) == len(ids)
    assert first.to_provider("a_b") == "a_b"  # already-legal ids keep their name
    assert all(first.from_provider(first.to_provider(i)) == i for i in ids)


def test_name_map_long_and_odd_ids() -> None:
    long_a, long_b = "x." * 40 + "a", "x." * 40 + "b"
    names = ToolNameMap([long_a, long_b, "", "..."])
    for tool_id in (long_a, long_b, "", "..."):
        name = names.to_provider(tool_id)
        assert LEGAL.match(name), name
        assert names.from_provider(name) == tool_id
    assert names.to_provider(long_a) != names.to_provider(long_b)


def test_name_map_includes_history_ids() -> None:
    request = ModelRequest(messages=[
        ToolCallMessage(call_id="c", tool="old.tool", arguments={}),
        ToolResultMessage(call_id="c", tool="old.tool", content="ok"),
    ])
    assert ToolNameMap.for_request(request).from_provider("old_tool") == "old.tool"


# --- registry -------------------------------------------------------------------------------------


def test_registry_openai() -> None:
    provider = resolve_provider("openai:gpt-test", {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://h:1/v1"})
    assert isinstance(provider, OpenAIResponsesProvider)
    assert provider.model == "gpt-test"
    assert str(provider._client.base_url) == "http://h:1/v1/"
    assert provider._client.max_retries == 0


def test_registry_openai_chat_base_url_and_local_key() -> None:
    provider = resolve_provider("openai-chat:llama3.2:3b", {"DAGENT_OPENAI_CHAT_BASE_URL": "http://ollama:11434/v1",
                                                           "OPENAI_BASE_URL": "http://other/v1"})
    assert isinstance(provider, OpenAIChatProvider)
    assert provider.model == "llama3.2:3b"
    assert str(provider._client.base_url) == "http://ollama:11434/v1/"
    assert provider._client.api_key == "not-needed"
    env = {"OPENAI_BASE_URL": "http://other/v1", "OPENAI_API_KEY": "k"}
    fallback = resolve_provider("openai-chat:m", env)
    assert isinstance(fallback, OpenAIChatProvider)
    assert str(fallback._client.base_url) == "http://other/v1/"
    assert fallback._client.api_key == "k"


def test_registry_anthropic() -> None:
    provider = resolve_provider("anthropic:claude-test", {"ANTHROPIC_API_KEY": "k"})
    assert isinstance(provider, AnthropicMessagesProvider)
    assert provider.model == "claude-test"
    assert provider._client.max_retries == 0


@pytest.mark.parametrize(("spec", "needle"), [
    ("openai:gpt-test", "OPENAI_API_KEY"),
    ("anthropic:claude", "ANTHROPIC_API_KEY"),
    ("openai-chat:llama", "DAGENT_OPENAI_CHAT_BASE_URL"),
    ("gemini:pro", "unknown provider 'gemini'"),
    ("openai", "expected <provider>:<model>"),
    ("openai:", "expected <provider>:<model>"),
    ("scripted:nomodule", "scripted:<module>:<attr>"),
])
def test_registry_errors_list_valid_forms(spec: str, needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-os-environ")  # must be ignored: keys come only from `env`
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-os-environ")
    with pytest.raises(ValueError) as caught:
        resolve_provider(spec, {})
    message = str(caught.value)
    assert needle in message
    assert "openai-chat:<model>" in message and "scripted:<module>:<attr>" in message


async def test_registry_scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("dagent_test_scripts")
    model = ScriptedModel([text("from instance")])
    module.MODEL = model  # type: ignore[attr-defined]
    module.LIST = [text("from list")]  # type: ignore[attr-defined]
    module.answer = lambda request: text(f"echo round {request.round}")  # type: ignore[attr-defined]
    module.NUMBER = 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dagent_test_scripts", module)

    assert resolve_provider("scripted:dagent_test_scripts:MODEL", {}) is model
    from_list = resolve_provider("scripted:dagent_test_scripts:LIST", {})
    assert (await from_list.complete(ask())).text == "from list"
    from_function = resolve_provider("scripted:dagent_test_scripts:answer", {})
    assert (await from_function.complete(ask(round=2))).text == "echo round 2"
    with pytest.raises(ValueError, match="not a ScriptedModel"):
        resolve_provider("scripted:dagent_test_scripts:NUMBER", {})
    with pytest.raises(ValueError, match="cannot load"):
        resolve_provider("scripted:dagent_test_scripts:MISSING", {})
    with pytest.raises(ValueError, match="cannot load"):
        resolve_provider("scripted:no_such_module_xyz:X", {})


async def test_registry_provider_talks_to_fake_server(llm: FakeLLMServer) -> None:
    provider = resolve_provider("openai-chat:local", {"DAGENT_OPENAI_CHAT_BASE_URL": llm.base_url("chat")})
    llm.reply_text("chat", "local hello")
    assert (await provider.complete(ask())).text == "local hello"
    headers = {k.lower(): v for k, v in llm.requests("chat")[-1].headers.items()}
    assert headers["authorization"] == "Bearer not-needed"


# --- ScriptedModel --------------------------------------------------------------------------------


async def test_scripted_list_by_round_is_stateless() -> None:
    model = ScriptedModel([tool_calls(("weather.get", {"city": "Paris"})), text("Sunny.")])
    first = await model.complete(ask(round=1))
    again = await model.complete(ask(round=1))  # a retry of round 1 gets the same answer
    assert first == again
    assert first.tool_calls == [
        ModelToolCall(id="call_r1_0", tool="weather.get", arguments={"city": "Paris"})
    ]
    assert (await model.complete(ask(round=2))).text == "Sunny."
    with pytest.raises(FatalModelError, match="scripted model has no response for round 3"):
        await model.complete(ask(round=3))
    assert [r.round for r in model.requests] == [1, 1, 2, 3]
    assert model.requests[0].messages == [UserMessage(text="What's the weather in Paris?")]
    assert isinstance(model, ModelProvider) and model.name == "scripted"


async def test_scripted_tool_call_ids() -> None:
    response = ScriptedModel.tool_calls(("a.b", {"x": 1}), ("c", {}), text="two calls", round=4)
    assert [c.id for c in response.tool_calls] == ["call_r4_0", "call_r4_1"]
    assert response.text == "two calls"
    served = await ScriptedModel([text("-"), ScriptedModel.tool_calls(("a.b", {}), ("c", {}))]).complete(
        ask(round=2))
    assert [c.id for c in served.tool_calls] == ["call_r2_0", "call_r2_1"]
    assert ScriptedModel.text("hi") == ModelResponse(text="hi")


async def test_scripted_usage() -> None:
    request = ModelRequest(instructions="abcd" * 2, messages=[UserMessage(text="x" * 40)])
    explicit = ModelResponse(text="z", usage=Usage(input_tokens=7, model_calls=1))
    model = ScriptedModel([text("y" * 20), explicit])
    first = await model.complete(request)
    assert first.usage == Usage(input_tokens=12, output_tokens=5, model_calls=1)
    second = await model.complete(request.model_copy(update={"round": 2}))
    assert second.usage == Usage(input_tokens=7, model_calls=1)  # explicit usage is kept
    assert (first.usage + second.usage).model_calls == 2
    assert first.model == "scripted"


async def test_scripted_functions() -> None:
    def sync_script(request: ModelRequest) -> ModelResponse:
        return text(f"{len(request.messages)} messages")

    async def async_script(request: ModelRequest) -> ModelResponse:
        return tool_calls(("weather.get", {"city": "Rome"}))

    assert (await ScriptedModel(sync_script).complete(ask())).text == "1 messages"
    served = await ScriptedModel(async_script).complete(ask(round=5))
    assert served.tool_calls[0].id == "call_r5_0"

    def flaky(request: ModelRequest) -> ModelResponse:
        raise RetryableModelError("try later", retry_after=1.0)

    with pytest.raises(RetryableModelError):
        await ScriptedModel(flaky).complete(ask())

    def broken(request: ModelRequest) -> ModelResponse:
        raise KeyError("oops")

    with pytest.raises(FatalModelError, match="KeyError"):
        await ScriptedModel(broken).complete(ask())


async def test_scripted_records_copies() -> None:
    model = ScriptedModel([text("a")])
    request = ask()
    await model.complete(request)
    request.messages.append(AssistantMessage(text="mutated later"))
    assert len(model.requests[0].messages) == 1
