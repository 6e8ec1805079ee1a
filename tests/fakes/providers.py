"""Shared setup for provider tests: the three real-SDK providers against the fake LLM server.

The `server`, `llm` and `protocol` fixtures are in tests/conftest.py."""

from __future__ import annotations

from typing import Any

from durable_agent.agent.messages import ModelRequest, ToolSpec, UserMessage
from durable_agent.agent.providers import AnthropicMessagesProvider, OpenAIChatProvider, OpenAIResponsesProvider
from tests.fakes.llm_server import FakeLLMServer, WireProtocol

API_KEY = "sk-test-SECRET-key-0123456789abcdef"
PROVIDER_TIMEOUT = 5.0  # seconds: what `make_provider` builds its providers with
AnyProvider = OpenAIResponsesProvider | OpenAIChatProvider | AnthropicMessagesProvider
PROVIDER_CLASSES: dict[WireProtocol, type[AnyProvider]] = {
    "responses": OpenAIResponsesProvider,
    "chat": OpenAIChatProvider,
    "anthropic": AnthropicMessagesProvider,
}
WEATHER = ToolSpec(
    id="weather.get",
    description="Current weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


_PROVIDERS: dict[tuple[str, WireProtocol], AnyProvider] = {}


def make_provider(llm: FakeLLMServer, protocol: WireProtocol) -> Any:
    """One provider per server and protocol, as a worker would keep them (building an SDK client is slow)."""
    base_url = llm.base_url(protocol)
    key = (base_url, protocol)
    if key not in _PROVIDERS:
        _PROVIDERS[key] = PROVIDER_CLASSES[protocol](model="test-model", api_key=API_KEY, base_url=base_url,
                                                     timeout=PROVIDER_TIMEOUT)
    return _PROVIDERS[key]


def ask(text: str = "What's the weather in Paris?", **kwargs: Any) -> ModelRequest:
    return ModelRequest(instructions="You are helpful.", messages=[UserMessage(text=text)], tools=[WEATHER],
                        **kwargs)
