"""Durable Agent: LLM agents that never lose their place — every prompt is a Temporal workflow.

The front door. A plugin author and a client user need only these names::

    from durable_agent import tool, Approval, Plugin, ToolContext, AgentClient

Everything else lives in the layers below (`durable_agent.agent`, `.workflows`, `.activities`, `.workers`,
`.client`, `.api`, `.cli`, `.plugins`) and may change between releases. Names load on first use, so
`import durable_agent` costs nothing a command does not need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_MODULES: dict[str, tuple[str, ...]] = {
    # Writing tools and plugins
    "durable_agent.agent.tools": ("tool", "Tool", "ToolOptions", "Approval", "ToolFailed"),
    "durable_agent.agent.plugins": ("Plugin", "ToolCallInfo", "PrepareContext"),
    "durable_agent.agent.context": ("ToolContext",),
    "durable_agent.agent.mcp": ("MCPServer",),
    "durable_agent.agent.extras": ("MissingExtra",),
    "durable_agent.agent.subagents": ("SubAgent",),
    "durable_agent.agent.events": ("PromptEvent", "EventKind"),
    # The record
    "durable_agent.agent.models": ("Prompt", "PromptRef", "Conversation", "Usage", "Decision"),
    # Errors
    "durable_agent.agent.errors": ("DurableAgentError", "PromptFailedError", "PromptNotStartedError",
                                   "ToolInputError", "DecisionRefused"),
    # Models, and scripted models for tests (docs/testing.md; the rest of the kit is `durable_agent.testing`)
    "durable_agent.agent.providers.scripted": ("ScriptedModel", "tool_calls", "text", "results_since_last_user"),
    "durable_agent.agent.messages": ("ModelRequest", "UserMessage"),
    # Starting prompts and deciding approvals
    "durable_agent.client": ("AgentClient", "PromptHandle", "ConversationHandle", "PromptNotFound"),
    "durable_agent.client.priority": ("prompt_priority",),
    # Prompts from your own workflows (workflows/agent_call.py)
    "durable_agent.workflows.protocol": ("PromptRequest",),
    "durable_agent.workflows.agent_call": ("run_prompt", "start_prompt"),
    # Running workers
    "durable_agent.workers.settings": ("Settings", "WorkerSettings"),
    "durable_agent.config.settings": ("ClientSettings",),
    "durable_agent.workers.plugin": ("DurableAgentPlugin",),
    "durable_agent.workers.worker": ("build_runtime", "create_worker", "create_workers"),
    "durable_agent.workers.drain": ("drain", "StopSignals"),
    "durable_agent.workers.readiness": ("serve_readiness",),
    "durable_agent.workers.search_attributes": ("check_search_attributes",),
    "durable_agent.cli.devserver.search_attributes": ("register_search_attributes",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "AgentClient",
    "Approval",
    "ClientSettings",
    "Conversation",
    "ConversationHandle",
    "Decision",
    "DecisionRefused",
    "DurableAgentError",
    "DurableAgentPlugin",
    "EventKind",
    "MCPServer",
    "MissingExtra",
    "ModelRequest",
    "Plugin",
    "PrepareContext",
    "Prompt",
    "PromptEvent",
    "PromptFailedError",
    "PromptHandle",
    "PromptNotFound",
    "PromptNotStartedError",
    "PromptRef",
    "PromptRequest",
    "ScriptedModel",
    "Settings",
    "StopSignals",
    "SubAgent",
    "Tool",
    "ToolCallInfo",
    "ToolContext",
    "ToolFailed",
    "ToolInputError",
    "ToolOptions",
    "Usage",
    "UserMessage",
    "WorkerSettings",
    "build_runtime",
    "check_search_attributes",
    "create_worker",
    "create_workers",
    "drain",
    "prompt_priority",
    "register_search_attributes",
    "results_since_last_user",
    "run_prompt",
    "serve_readiness",
    "start_prompt",
    "text",
    "tool",
    "tool_calls",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's version (pyproject.toml)
        from importlib.metadata import version

        return version("durable-agent")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from durable_agent.agent.context import ToolContext
    from durable_agent.agent.errors import (
        DecisionRefused,
        DurableAgentError,
        PromptFailedError,
        PromptNotStartedError,
        ToolInputError,
    )
    from durable_agent.agent.events import EventKind, PromptEvent
    from durable_agent.agent.extras import MissingExtra
    from durable_agent.agent.mcp import MCPServer
    from durable_agent.agent.messages import ModelRequest, UserMessage
    from durable_agent.agent.models import Conversation, Decision, Prompt, PromptRef, Usage
    from durable_agent.agent.plugins import Plugin, PrepareContext, ToolCallInfo
    from durable_agent.agent.providers.scripted import ScriptedModel, results_since_last_user, text, tool_calls
    from durable_agent.agent.subagents import SubAgent
    from durable_agent.agent.tools import Approval, Tool, ToolFailed, ToolOptions, tool
    from durable_agent.cli.devserver.search_attributes import register_search_attributes
    from durable_agent.client import AgentClient, ConversationHandle, PromptHandle, PromptNotFound
    from durable_agent.client.priority import prompt_priority
    from durable_agent.config.settings import ClientSettings
    from durable_agent.workers.drain import StopSignals, drain
    from durable_agent.workers.plugin import DurableAgentPlugin
    from durable_agent.workers.readiness import serve_readiness
    from durable_agent.workers.search_attributes import check_search_attributes
    from durable_agent.workers.settings import Settings, WorkerSettings
    from durable_agent.workers.worker import build_runtime, create_worker, create_workers
    from durable_agent.workflows.agent_call import run_prompt, start_prompt
    from durable_agent.workflows.protocol import PromptRequest
