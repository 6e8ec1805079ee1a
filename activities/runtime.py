"""What a worker's activities need: plugins, model providers per tier, services and a file store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.context import DirectoryFileStore, FileStore, PrepareContext, Services, copy_state
from agent.model_settings import ModelSettings
from agent.models import Prompt
from agent.plugins import Plugin
from agent.pricing import PriceTable
from agent.providers.base import ModelProvider
from agent.tools import Tool

DEFAULT_MAX_TOOL_OUTPUT_BYTES = 256_000


class PluginPrepareError(Exception):
    """A plugin's `prepare` raised: the prompt fails with the plugin named in the reason."""


@dataclass
class PreparedRound:
    tools: dict[str, tuple[Tool[Any], str]]
    context: list[str]
    plugin_state: dict[str, Any]


@dataclass
class AgentRuntime:
    plugins: list[Plugin]
    providers: Mapping[str, ModelProvider | Sequence[ModelProvider]]  # a sequence is a fallback chain
    model_settings: Mapping[str, ModelSettings] = field(default_factory=dict)
    services: Services = field(default_factory=Services)
    file_store: FileStore = field(default_factory=lambda: DirectoryFileStore(Path(".dagent/files")))
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    prices: PriceTable = field(default_factory=PriceTable)
    stream_text: bool | None = None  # None: stream from real providers, not from scripted ones
    fallback_after_attempts: int = 3  # retryable failures of one model before its fallback is used
    delta_batch_interval: float = 0.2

    def streams_text(self, provider: ModelProvider) -> bool:
        if not callable(getattr(provider, "stream", None)):
            return False
        return self.stream_text if self.stream_text is not None else provider.name != "scripted"

    def provider_for(self, tier: str) -> ModelProvider:
        return self.chain_for(tier)[0]

    def chain_for(self, tier: str) -> list[ModelProvider]:
        """The tier's models in fallback order (one model is a chain of one)."""
        configured = self.providers.get(tier) or self.providers.get("normal")
        if configured is None:
            raise LookupError(f"no model configured for tier {tier!r}")
        chain = list(configured) if isinstance(configured, Sequence) else [configured]
        if not chain:
            raise LookupError(f"the model chain of tier {tier!r} is empty")
        return chain

    def settings_for(self, prompt: Prompt) -> ModelSettings:
        """The prompt's tier settings with the prompt's own settings on top."""
        tier = self.model_settings.get(prompt.model) or self.model_settings.get("normal") or ModelSettings()
        return tier.merged(prompt.model_settings)

    @property
    def handles_events(self) -> bool:
        return any(p.handles_events for p in self.plugins)

    async def prepare(self, prompt: Prompt, round_number: int) -> PreparedRound:
        """Run every plugin's `prepare` in order; later plugins see earlier ones' state changes."""
        state = dict(prompt.plugin_state)
        tools: dict[str, tuple[Tool[Any], str]] = {}
        context: list[str] = []
        for plugin in self.plugins:
            ctx = PrepareContext(
                user_id=prompt.user_id, prompt_id=prompt.id, conversation_id=prompt.conversation_id,
                round=round_number, input=prompt.input, outputs=list(prompt.output),
                state=copy_state(state.get(plugin.name)), services=self.services,
            )
            try:
                await plugin.prepare(ctx)
            except Exception as exc:
                raise PluginPrepareError(f"plugin {plugin.name!r} failed in prepare: "
                                         f"{type(exc).__name__}: {exc}") from exc
            if ctx.state or plugin.name in state:
                state[plugin.name] = ctx.state
            for tool in ctx.tools:
                tools[tool.id] = (tool, plugin.name)
            context.extend(ctx.context)
        return PreparedRound(tools=tools, context=context, plugin_state=state)

    async def find_tool(self, tool_id: str, plugin_name: str | None, prompt: Prompt) -> Tool[Any] | None:
        """A tool by id: first the plugins' catalogues, then whatever `prepare` offers now."""
        for plugin in self.plugins:
            if plugin_name is not None and plugin.name != plugin_name:
                continue
            for tool in plugin.tools:
                if tool.id == tool_id:
                    return tool
        prepared = await self.prepare(prompt, prompt.rounds)
        found = prepared.tools.get(tool_id)
        return found[0] if found else None
