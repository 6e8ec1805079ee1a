"""More endpoints through the same three adapters: Azure OpenAI (the openai SDK's `AsyncAzureOpenAI`, for the
Responses and Chat Completions APIs), Claude on Google Vertex AI (the anthropic SDK's `AsyncAnthropicVertex`)
and a local OpenAI-compatible server (Ollama, vLLM) via the Chat adapter. Each is built by the registry from
environment variables, as a worker builds it, and talks to the local fake server at that cloud's URLs."""

from __future__ import annotations

from typing import Any

import pytest

from agent.model_settings import ModelSettings
from agent.providers import ScriptedModel
from agent.providers.registry import resolve_provider
from tests.fakes import FakeCall, FakeLLMServer, FakeUsage
from tests.fakes.llm_server import anthropic_body, with_reasoning
from tests.fakes.providers import API_KEY, ask

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
    assert "model" not in request.body and request.body["anthropic_version"]  # the model is in the URL
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


@pytest.mark.parametrize(("spec", "missing"), [("azure:d", "AZURE_OPENAI_API_KEY"),
                                               ("anthropic-vertex:m", "CLOUD_ML_REGION")])
def test_cloud_specs_name_what_is_missing(spec: str, missing: str) -> None:
    with pytest.raises(ValueError, match=missing):
        resolve_provider(spec, {})
