"""More endpoints through the same three adapters: Azure OpenAI (the openai SDK's `AsyncAzureOpenAI`, for the
Responses and Chat Completions APIs), Claude on Google Vertex AI (the anthropic SDK's `AsyncAnthropicVertex`),
Claude on Amazon Bedrock (`AsyncAnthropicBedrock`: SigV4 signing, AWS event-stream frames) and a local
OpenAI-compatible server (Ollama, vLLM) via the Chat adapter. Each is built by the registry from environment
variables, as a worker builds it, and talks to the local fake server at that cloud's URLs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import TextOutput, ToolOutput, ToolSuccess
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers import ScriptedModel
from durable_agent.agent.providers.base import FatalModelError, RetryableModelError
from durable_agent.agent.providers.registry import BEDROCK_ANTHROPIC_VERSION, VERTEX_ANTHROPIC_VERSION, resolve_provider
from durable_agent.agent.tools import tool
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage, SSEOptions
from tests.fakes.eventstream import chunk
from tests.fakes.llm_server import anthropic_body, with_reasoning
from tests.fakes.providers import API_KEY, ask
from tests.fakes.sigv4 import AWSCredentials
from tests.support.workers import agent_worker

AZURE_VERSION = "2025-04-01-preview"


def _azure_env(llm: FakeLLMServer) -> dict[str, str]:
    return {"AZURE_OPENAI_ENDPOINT": llm.server.url_for("/").rstrip("/"), "AZURE_OPENAI_API_KEY": API_KEY,
            "OPENAI_API_VERSION": AZURE_VERSION}


def _headers(llm: FakeLLMServer, protocol: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in llm.requests(protocol)[-1].headers.items()}


async def test_azure_responses(llm: FakeLLMServer) -> None:
    provider = resolve_provider("azure:my-gpt-deployment", _azure_env(llm), timeout=5.0)
    assert provider.name == "azure" and not isinstance(provider, ScriptedModel)
    llm.reply_tool_calls("responses", [FakeCall("weather_get", {"city": "Paris"}, id="c1")])
    response = await provider.complete(ask(settings=ModelSettings(temperature=0.1)))
    assert response.tool_calls[0].tool == "weather.get"
    request = llm.requests("responses")[-1]
    assert request.path == f"/openai/responses?api-version={AZURE_VERSION}"
    assert request.body["model"] == "my-gpt-deployment" and request.body["temperature"] == 0.1
    assert _headers(llm, "responses")["api-key"] == API_KEY
    llm.reply_text("responses", "streamed on Azure")
    chunks: list[str] = []

    async def on_text(delta: str) -> None:
        chunks.append(delta)

    streamed = await provider.stream(ask(), on_text)  # type: ignore[attr-defined]
    assert streamed.text == "streamed on Azure" and len(chunks) > 1


async def test_azure_chat_completions(llm: FakeLLMServer) -> None:
    provider = resolve_provider("azure-chat:my-chat-deployment", _azure_env(llm), timeout=5.0)
    assert provider.name == "azure-chat"
    llm.reply_text("chat", "hello from Azure chat")
    response = await provider.complete(ask(settings=ModelSettings(max_output_tokens=64, seed=3)))
    assert response.text == "hello from Azure chat"
    request = llm.requests("chat")[-1]
    assert request.path == f"/openai/deployments/my-chat-deployment/chat/completions?api-version={AZURE_VERSION}"
    assert (request.body["max_completion_tokens"], request.body["seed"]) == (64, 3)
    assert _headers(llm, "chat")["api-key"] == API_KEY


async def test_anthropic_on_vertex(llm: FakeLLMServer) -> None:
    env = {"CLOUD_ML_REGION": "europe-west1", "ANTHROPIC_VERTEX_PROJECT_ID": "my-project",
           "ANTHROPIC_VERTEX_ACCESS_TOKEN": "ya29.fake-token", "ANTHROPIC_VERTEX_BASE_URL": llm.server.url_for("/v1")}
    provider = resolve_provider("anthropic-vertex:claude-sonnet-4-5@20250929", env, timeout=5.0)
    assert provider.name == "anthropic-vertex"
    body = with_reasoning("anthropic", anthropic_body("Hi from Vertex.", [], FakeUsage(),
                                                      "claude-sonnet-4-5"), summary="hm", secret="sig")
    llm.reply_raw("anthropic", body)
    llm.reply_raw("anthropic", body)
    response = await provider.complete(ask(settings=ModelSettings(reasoning_budget_tokens=1024)))
    assert response.text == "Hi from Vertex." and response.reasoning[0].item["signature"] == "sig"
    request = llm.requests("anthropic")[-1]
    assert request.path == ("/v1/projects/my-project/locations/europe-west1/publishers/anthropic/models/"
                            "claude-sonnet-4-5@20250929:rawPredict")
    assert "model" not in request.body  # the model is in the URL
    assert request.body["anthropic_version"] == VERTEX_ANTHROPIC_VERSION == "vertex-2023-10-16"
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert request.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert _headers(llm, "anthropic")["authorization"] == "Bearer ya29.fake-token"
    thoughts: list[str] = []

    async def on_reasoning(delta: str) -> None:
        thoughts.append(delta)

    async def on_text(delta: str) -> None:
        pass

    streamed = await provider.stream(ask(), on_text, on_reasoning)  # type: ignore[attr-defined]
    assert streamed.text == "Hi from Vertex." and "".join(thoughts) == "hm"
    assert llm.requests("anthropic")[-1].path.endswith(":streamRawPredict")


async def test_local_ollama_or_vllm_via_chat(llm: FakeLLMServer) -> None:
    """No API key, a base URL, server-specific options through `extra` (Ollama's `options`, vLLM's `top_k`)."""
    provider = resolve_provider("openai-chat:llama3.1:8b", {"DAGENT_OPENAI_CHAT_BASE_URL": llm.base_url("chat")},
                                timeout=5.0)
    llm.reply_text("chat", "local answer")
    settings = ModelSettings(temperature=0, extra={"top_k": 20, "options": {"num_ctx": 8192}})
    response = await provider.complete(ask(settings=settings))
    assert response.text == "local answer"
    body = llm.last_body("chat")
    assert body["model"] == "llama3.1:8b"
    assert (body["temperature"], body["top_k"], body["options"]) == (0, 20, {"num_ctx": 8192})
    assert "prompt_cache_key" not in body


BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"  # Bedrock model ids hold a colon
AWS = AWSCredentials(access_key="AKIDFAKEEXAMPLE", secret_key="fake/secret+KEY0123456789abcdefghijklmn",
                     session_token="fake-session-token", region="eu-central-1")


def _bedrock_env(llm: FakeLLMServer, **changes: str) -> dict[str, str]:
    env = {"AWS_REGION": AWS.region, "AWS_ACCESS_KEY_ID": AWS.access_key, "AWS_SECRET_ACCESS_KEY": AWS.secret_key,
           "AWS_SESSION_TOKEN": AWS.session_token or "", "ANTHROPIC_BEDROCK_BASE_URL": llm.base_url("anthropic")}
    return {**env, **changes}


class City(BaseModel):
    city: str


@tool("weather.get")
async def weather(args: City, ctx: ToolContext) -> dict[str, str]:
    """Today's weather in a city."""
    return {"city": args.city, "sky": "sunny"}


async def test_anthropic_on_bedrock(llm: FakeLLMServer, dev_env: WorkflowEnvironment) -> None:
    """A prompt on a worker whose model is `anthropic-bedrock:`: both rounds stream (event-stream frames),
    the first calls a tool, the second answers; every request is SigV4-signed for the test's credentials
    (the fake server checks the signature with botocore and answers 403 otherwise)."""
    llm.bedrock_auth = AWS
    provider = resolve_provider(f"anthropic-bedrock:{BEDROCK_MODEL}", _bedrock_env(llm), timeout=5.0)
    assert provider.name == "anthropic-bedrock"
    llm.reply_tool_calls("anthropic", [FakeCall("weather_get", {"city": "Paris"}, id="toolu_1")],
                         text="Let me look.")
    llm.reply_text("anthropic", "Sunny in Paris today.", usage=FakeUsage(input_tokens=30, output_tokens=6))
    plugin = Plugin("weather", tools=[weather])
    async with agent_worker(dev_env, plugins=[plugin], model=provider, stream_text=True) as client:
        prompt = await (await client.start("What's the weather in Paris?")).result()

    assert prompt.state == "completed", prompt.error
    call = next(entry for entry in prompt.output if isinstance(entry, ToolOutput))
    assert (call.tool, call.input, call.result) == ("weather.get", {"city": "Paris"},
                                                   ToolSuccess(output={"city": "Paris", "sky": "sunny"}))
    assert [e.text for e in prompt.output if isinstance(e, TextOutput)][-1] == "Sunny in Paris today."
    assert prompt.model_rounds[0].model == f"anthropic-bedrock:{BEDROCK_MODEL}"
    assert prompt.usage.output_tokens == 6
    requests = llm.requests("anthropic")
    assert [r.path for r in requests] == [f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"] * 2
    for request in requests:
        assert request.auth_problem is None
        headers = {k.lower(): v for k, v in request.headers.items()}
        assert headers["authorization"].startswith(
            f"AWS4-HMAC-SHA256 Credential={AWS.access_key}/{headers['x-amz-date'][:8]}/{AWS.region}/bedrock/")
        assert headers["x-amz-security-token"] == AWS.session_token
        body = request.body
        assert body["anthropic_version"] == BEDROCK_ANTHROPIC_VERSION == "bedrock-2023-05-31"
        assert "model" not in body and "stream" not in body  # both are in the URL
        assert [t["name"] for t in body["tools"]] == ["weather_get"]
        assert body["tools"][0]["input_schema"]["properties"] == {"city": {"title": "City", "type": "string"}}
    result = requests[1].body["messages"][-1]["content"][0]
    assert (result["type"], result["tool_use_id"]) == ("tool_result", "toolu_1") and "sunny" in result["content"]


async def test_bedrock_refuses_a_wrong_signature(llm: FakeLLMServer) -> None:
    """The fake server's signature check can fail: a request signed with another secret key gets Bedrock's
    403, which is fatal, and the secret is in neither the request nor the error."""
    llm.bedrock_auth = AWS
    wrong = "another/secret+KEY0123456789abcdefghijklmn"
    provider = resolve_provider(f"anthropic-bedrock:{BEDROCK_MODEL}",
                                _bedrock_env(llm, AWS_SECRET_ACCESS_KEY=wrong), timeout=5.0)
    llm.reply_text("anthropic", "never sent")
    with pytest.raises(FatalModelError, match="HTTP 403") as failure:
        await provider.complete(ask())
    request = llm.requests("anthropic")[-1]
    assert request.auth_problem is not None and "signature" in request.auth_problem
    assert llm.pending("anthropic") == 1
    assert wrong not in str(failure.value) and wrong not in json.dumps(request.headers)


async def test_bedrock_api_key_and_in_stream_throttling(llm: FakeLLMServer) -> None:
    """A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`) goes as a bearer token instead of a signature; a
    `throttlingException` frame inside the stream is retryable, like a 429."""
    llm.bedrock_auth = "bedrock-api-key-fake"
    env = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_BEARER_TOKEN_BEDROCK": "bedrock-api-key-fake",
           "ANTHROPIC_BEDROCK_BASE_URL": llm.base_url("anthropic")}
    provider = resolve_provider(f"anthropic-bedrock:{BEDROCK_MODEL}", env, timeout=5.0)
    llm.reply_text("anthropic", "Hello from Bedrock.")
    assert (await provider.complete(ask())).text == "Hello from Bedrock."
    request = llm.requests("anthropic")[-1]
    assert request.path == f"/model/{BEDROCK_MODEL}/invoke" and request.auth_problem is None
    llm.reply_text("anthropic", "cut short by a throttle",
                   sse=SSEOptions(cut_after=3, cut="error", error_type="throttlingException"))

    async def on_text(delta: str) -> None:
        pass

    with pytest.raises(RetryableModelError, match="throttlingException"):
        await provider.stream(ask(), on_text)  # type: ignore[attr-defined]


def test_event_stream_frames_decode_with_botocore() -> None:
    frame = chunk({"type": "message_stop"})
    buffer = EventStreamBuffer()
    buffer.add_data(frame)
    (message,) = list(buffer)
    assert message.headers == {":event-type": "chunk", ":content-type": "application/json",
                               ":message-type": "event"}
    assert json.loads(message.payload)["bytes"] == "eyJ0eXBlIjogIm1lc3NhZ2Vfc3RvcCJ9"  # {"type": "message_stop"}
    corrupted = EventStreamBuffer()
    corrupted.add_data(frame[:-5] + bytes([frame[-5] ^ 1]) + frame[-4:])
    with pytest.raises(ChecksumMismatch):
        list(corrupted)


@pytest.mark.parametrize(("spec", "missing"), [("azure:d", "AZURE_OPENAI_API_KEY"),
                                               ("anthropic-vertex:m", "CLOUD_ML_REGION"),
                                               (f"anthropic-bedrock:{BEDROCK_MODEL}", "AWS_REGION")])
def test_cloud_specs_name_what_is_missing(spec: str, missing: str) -> None:
    with pytest.raises(ValueError, match=missing):
        resolve_provider(spec, {})


def test_bedrock_keys_come_in_pairs() -> None:
    with pytest.raises(ValueError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY together"):
        resolve_provider(f"anthropic-bedrock:{BEDROCK_MODEL}", {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x"})
