"""Model providers: one small adapter per wire protocol, all behind the `ModelProvider` protocol.

Names are imported lazily so `import agent.providers.base` (or `.scripted`) never pulls in the openai and
anthropic SDKs, e.g. inside a Temporal workflow sandbox.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent.agent.providers.anthropic_messages import AnthropicMessagesProvider
    from durable_agent.agent.providers.base import (
        FatalModelError,
        ModelError,
        ModelProvider,
        RetryableModelError,
        StreamingModelProvider,
        TextSink,
    )
    from durable_agent.agent.providers.errors import to_model_error
    from durable_agent.agent.providers.naming import ToolNameMap
    from durable_agent.agent.providers.openai_chat import OpenAIChatProvider
    from durable_agent.agent.providers.openai_responses import OpenAIResponsesProvider
    from durable_agent.agent.providers.registry import resolve_provider
    from durable_agent.agent.providers.scripted import ScriptedModel

_MODULES: dict[str, tuple[str, ...]] = {
    "durable_agent.agent.providers.base": ("FatalModelError", "ModelError", "ModelProvider", "RetryableModelError",
                                           "StreamingModelProvider", "TextSink"),
    "durable_agent.agent.providers.anthropic_messages": ("AnthropicMessagesProvider",),
    "durable_agent.agent.providers.openai_chat": ("OpenAIChatProvider",),
    "durable_agent.agent.providers.openai_responses": ("OpenAIResponsesProvider",),
    "durable_agent.agent.providers.scripted": ("ScriptedModel",),
    "durable_agent.agent.providers.naming": ("ToolNameMap",),
    "durable_agent.agent.providers.registry": ("resolve_provider",),
    "durable_agent.agent.providers.errors": ("to_model_error",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

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
