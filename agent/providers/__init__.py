"""Model providers: one small adapter per wire protocol, all behind the `ModelProvider` protocol.

Names are imported lazily so `import agent.providers.base` (or `.scripted`) never pulls in the openai and
anthropic SDKs, e.g. inside a Temporal workflow sandbox.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.providers.anthropic_messages import AnthropicMessagesProvider
    from agent.providers.base import (
        FatalModelError,
        ModelError,
        ModelProvider,
        RetryableModelError,
        StreamingModelProvider,
        TextSink,
    )
    from agent.providers.errors import to_model_error
    from agent.providers.naming import ToolNameMap
    from agent.providers.openai_chat import OpenAIChatProvider
    from agent.providers.openai_responses import OpenAIResponsesProvider
    from agent.providers.registry import resolve_provider
    from agent.providers.scripted import ScriptedModel

_EXPORTS = {
    "AnthropicMessagesProvider": "agent.providers.anthropic_messages",
    "FatalModelError": "agent.providers.base",
    "ModelError": "agent.providers.base",
    "ModelProvider": "agent.providers.base",
    "OpenAIChatProvider": "agent.providers.openai_chat",
    "OpenAIResponsesProvider": "agent.providers.openai_responses",
    "RetryableModelError": "agent.providers.base",
    "ScriptedModel": "agent.providers.scripted",
    "StreamingModelProvider": "agent.providers.base",
    "TextSink": "agent.providers.base",
    "ToolNameMap": "agent.providers.naming",
    "resolve_provider": "agent.providers.registry",
    "to_model_error": "agent.providers.errors",
}

__all__ = [
    "AnthropicMessagesProvider",
    "FatalModelError",
    "ModelError",
    "ModelProvider",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "RetryableModelError",
    "ScriptedModel",
    "StreamingModelProvider",
    "TextSink",
    "ToolNameMap",
    "resolve_provider",
    "to_model_error",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
