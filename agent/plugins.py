"""Plugins contribute tools, context items and state before every model call; they may also hook events."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from durable_agent.agent.context import Services
from durable_agent.agent.events import PromptEvent
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.models import HoldsPromptRef, PromptOutput, PromptRef, ToolError, ToolSuccess
from durable_agent.agent.tools import Tool


@dataclass
class PrepareContext(HoldsPromptRef):
    """Passed to `Plugin.prepare` before every model call."""

    prompt: PromptRef  # which prompt; its ids are readable as `user_id`, `prompt_id`, `conversation_id`
    round: int
    input: str | None
    outputs: list[PromptOutput]
    state: dict[str, JsonValue]
    services: Services
    tools: list[Tool[Any]] = field(default_factory=list)
    context: list[str] = field(default_factory=list)

    def add_tool(self, tool: Tool[Any]) -> None:
        self.tools.append(tool)

    def add_context(self, text: str) -> None:
        """Add a system/developer instruction for this round's model call."""
        self.context.append(text)


class Plugin:
    """Subclass and override `prepare`, or instantiate with `name`, `tools` and `instructions`.

    The default `prepare` offers every tool in `tools` and adds `instructions` as context.
    `tools` is also the catalogue each worker's tool registry is built from once, at start; the tool
    activity looks calls up there and never runs `prepare` again. List every tool the plugin may ever offer,
    even ones `prepare` only offers sometimes: a tool missing from it is found only on a worker whose own
    model round saw `prepare` offer it.
    `mcp_servers` are MCP servers whose tools (and chosen resources and prompts) the worker offers
    every round, next to `tools`, as `<server>.<tool>`.
    """

    name: str = ""
    tools: Sequence[Tool[Any]] = ()
    instructions: str | None = None
    mcp_servers: Sequence[MCPServer] = ()

    def __init__(self, name: str | None = None, *, tools: Sequence[Tool[Any]] | None = None,
                 instructions: str | None = None, mcp_servers: Sequence[MCPServer] | None = None) -> None:
        if name is not None:
            self.name = name
        if tools is not None:
            self.tools = tuple(tools)
        if mcp_servers is not None:
            self.mcp_servers = tuple(mcp_servers)
        if instructions is not None:
            self.instructions = instructions
        if not self.name:
            raise ValueError(f"{type(self).__name__}: a plugin needs a name")

    async def prepare(self, ctx: PrepareContext) -> None:
        for tool in self.tools:
            ctx.add_tool(tool)
        if self.instructions:
            ctx.add_context(self.instructions)

    async def on_event(self, event: PromptEvent) -> None:
        """Called for notable prompt events (e.g. an approval request). Default: nothing."""

    async def before_model(self, request: ModelRequest) -> ModelRequest | None:
        """Runs before every model call; return a changed request, or None to keep it."""
        return None

    async def after_model(self, request: ModelRequest, response: ModelResponse) -> ModelResponse | None:
        """Runs after every model call; return a changed response, or None to keep it."""
        return None

    async def before_tool(self, call: ToolCallInfo) -> ToolCallInfo | ToolSuccess | ToolError | None:
        """Runs before a tool call: return changed arguments (a ToolCallInfo), a result to use instead of
        running the tool (ToolSuccess, or ToolError to skip it), or None to go ahead unchanged."""
        return None

    async def after_tool(self, call: ToolCallInfo, result: ToolSuccess | ToolError) -> ToolSuccess | ToolError | None:
        """Runs after a tool call; return a changed result, or None to keep it."""
        return None

    @property
    def handles_events(self) -> bool:
        return type(self).on_event is not Plugin.on_event


class ToolCallInfo(PromptRef):
    """What tool hooks see of a call."""

    tool_call_id: str
    tool: str
    input: JsonValue


def load_plugin(path: str) -> Plugin:
    """Load `module:attribute` where the attribute is a Plugin, a Plugin subclass, or a factory."""
    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"plugin path {path!r} must look like 'package.module:attribute'")
    try:
        target: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load plugin {path!r}: {exc}") from exc
    if callable(target) and not isinstance(target, Plugin):  # a Plugin subclass, or a factory
        target = target()
    if not isinstance(target, Plugin):
        raise ValueError(f"plugin {path!r} is a {type(target).__name__}, not a Plugin")
    return target


def load_plugins(paths: Sequence[str]) -> list[Plugin]:
    plugins = [load_plugin(p) for p in paths if p.strip()]
    names = [p.name for p in plugins]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"plugin names must be unique; duplicated: {sorted(duplicates)}")
    return plugins
