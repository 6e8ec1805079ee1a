"""What a worker's activities need: plugins, model providers per tier, services, a file store and the tool registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_agent.activities.fast_tools import FastTools
from durable_agent.activities.mcp_tools import MCPToolSources, MCPUnavailable
from durable_agent.activities.notify_config import NotifyConfig
from durable_agent.activities.transcripts import TranscriptCache
from durable_agent.agent.context import DirectoryFileStore, FileStore, Services, copy_state
from durable_agent.agent.errors import PluginPrepareError
from durable_agent.agent.logging import get_logger
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import Prompt, PromptRef
from durable_agent.agent.notify import Notify
from durable_agent.agent.plugins import Plugin, PrepareContext
from durable_agent.agent.pricing import PriceTable
from durable_agent.agent.providers.base import ModelProvider
from durable_agent.agent.tools import Tool

DEFAULT_MAX_TOOL_OUTPUT_BYTES = 256_000
LIVE_DETAILS_EVERY_SECONDS = 0.5  # with stream_text=True: streamed text and tool progress reach watchers this often
log = get_logger("dagent.runtime")


@dataclass
class PreparedRound:
    tools: dict[str, tuple[Tool[Any], str]]
    context: list[str]
    plugin_state: dict[str, Any]


class ToolRegistry:
    """Every tool this worker can run, by (plugin name, tool id), built once from the plugins' catalogues.

    A tool a plugin's `prepare` offers without listing it in `Plugin.tools` (a dynamic tool) is added when
    this worker's model round sees it; the tool activity only ever looks tools up here, so `prepare` runs
    exactly once per round, in the model round, on the real prompt.
    """

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        self._tools: dict[tuple[str, str], Tool[Any]] = {}
        for plugin in plugins:
            for tool in plugin.tools:
                self.add(plugin.name, tool)

    def add(self, plugin_name: str, tool: Tool[Any]) -> None:
        self._tools.setdefault((plugin_name, tool.id), tool)

    def find(self, plugin_name: str | None, tool_id: str) -> Tool[Any] | None:
        if plugin_name is not None:
            return self._tools.get((plugin_name, tool_id))
        return next((tool for (_, found_id), tool in self._tools.items() if found_id == tool_id), None)


@dataclass
class AgentRuntime:
    plugins: list[Plugin]
    providers: Mapping[str, ModelProvider | Sequence[ModelProvider]]  # a sequence is a fallback chain
    model_settings: Mapping[str, ModelSettings] = field(default_factory=dict)
    services: Services = field(default_factory=Services)
    file_store: FileStore = field(default_factory=lambda: DirectoryFileStore(Path(".dagent/files")))
    max_tool_output_bytes: int = DEFAULT_MAX_TOOL_OUTPUT_BYTES
    prices: PriceTable = field(default_factory=PriceTable)
    stream_text: bool | None = None  # True: stream model text to watchers live; None or False: read answers whole
    fallback_after_attempts: int = 3  # retryable failures of one model before its fallback is used
    mcp: MCPToolSources = field(default_factory=MCPToolSources)
    trace_content: bool = False  # prompt and completion text on model spans (Settings.trace_content)
    decision_key: str | None = None  # Ed25519 public key (PEM): decisions must carry a token it verifies
    four_eyes: bool = False  # the default of `Approval.four_eyes`: a prompt's user may not approve its calls
    notify: Notify | None = None  # the default of `Approval.notify`: who is told of a waiting call, and when
    notify_config: NotifyConfig = field(default_factory=NotifyConfig)  # how they are reached (DAGENT_NOTIFY_CONFIG)
    # The workflow worker runs at most half as many workflow tasks at once as it caches (set by `create_worker` from
    # the worker it built); a local model call on a worker that does not is warned about once (model_round.py).
    fits_local_model_calls: bool = True
    tools: ToolRegistry = field(init=False)
    transcripts: TranscriptCache = field(default_factory=TranscriptCache, repr=False, compare=False)  # per process
    fast_tools: FastTools = field(default_factory=FastTools, repr=False, compare=False)  # what its calls showed

    def __post_init__(self) -> None:
        self.tools = ToolRegistry(self.plugins)

    @property
    def live_every(self) -> float | None:
        """How often a running call's streamed text and tool progress go to the heartbeat details watchers read:
        every `LIVE_DETAILS_EVERY_SECONDS` when streaming text was asked for (`stream_text=True`), otherwise only
        with the liveness heartbeats (each heartbeat is a billable action; activities/heartbeats.py)."""
        return LIVE_DETAILS_EVERY_SECONDS if self.stream_text else None

    def streams_text(self, provider: ModelProvider) -> bool:
        """Stream this provider's answers only when live text was asked for: with nobody shown the text as it
        comes, parsing the stream costs the worker ~40 ms of CPU per call (bench.realistic) for nothing."""
        return bool(self.stream_text) and callable(getattr(provider, "stream", None))

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

    async def prepare(self, prompt: Prompt, round_number: int, only: Sequence[str] | None = None) -> PreparedRound:
        """Run every plugin's `prepare` in order; later plugins see earlier ones' state changes."""
        state = dict(prompt.plugin_state)
        tools: dict[str, tuple[Tool[Any], str]] = {}
        context: list[str] = []
        for plugin in self.plugins:
            if only is not None and plugin.name not in only:
                continue
            ctx = PrepareContext(
                prompt=PromptRef(prompt_id=prompt.id, user_id=prompt.user_id, conversation_id=prompt.conversation_id),
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
                self.tools.add(plugin.name, tool)
            context.extend(ctx.context)
            for server in plugin.mcp_servers:
                await self._prepare_mcp(server, plugin.name, tools, context)
        return PreparedRound(tools=tools, context=context, plugin_state=state)

    async def _prepare_mcp(self, server: MCPServer, plugin_name: str, tools: dict[str, tuple[Tool[Any], str]],
                           context: list[str]) -> None:
        """Offer a server's tools; an unreachable server is left out this round, and the model is told why."""
        try:
            offered = await self.mcp.tools(server)
            context.extend(await self.mcp.context(server))
        except MCPUnavailable as exc:
            log.warning("mcp server left out of this round", server=server.name, error=str(exc))
            context.append(f"{exc}. Its tools ({server.name}.*) cannot be used right now.")
            return
        for tool in offered:
            tools[tool.id] = (tool, plugin_name)

    async def find_tool(self, plugin_name: str | None, tool_id: str) -> Tool[Any] | None:
        """A tool of the registry, else an MCP server's from the server's cached listing (raises `MCPUnavailable`)."""
        if (tool := self.tools.find(plugin_name, tool_id)) is not None:
            return tool
        for plugin in self.plugins:
            if plugin_name is not None and plugin.name != plugin_name:
                continue
            for server in plugin.mcp_servers:
                if tool_id.startswith(f"{server.name}."):
                    return await self.mcp.find(server, tool_id)
        return None


class RuntimeActivities:
    """Base of each activity family (model round, tool calls, history): the worker's runtime, and its transcript
    cache, shared by every worker of this process (workflow and model queues)."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self.transcripts = runtime.transcripts
