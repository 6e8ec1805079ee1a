"""Tools are resolved from a registry built once per worker; the tool activity never re-runs `prepare`."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent.activities.runtime import ToolRegistry
from durable_agent.agent.context import ToolContext
from durable_agent.agent.models import ToolSuccess
from durable_agent.agent.plugins import Plugin, PrepareContext
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool
from tests.support.workers import agent_worker


class Shout(BaseModel):
    words: str


@tool("voice.shout")
async def shout(args: Shout, ctx: ToolContext) -> str:
    """Shout the words."""
    return args.words.upper()


@tool("voice.whisper")
async def whisper(args: Shout, ctx: ToolContext) -> str:
    """Whisper the words."""
    return args.words.lower()


class DynamicVoice(Plugin):
    """Lists no tools in its catalogue: `voice.shout` exists only because `prepare` offers it."""

    name = "voice"

    def __init__(self) -> None:
        super().__init__()
        self.prepared_rounds: list[int] = []

    async def prepare(self, ctx: PrepareContext) -> None:
        self.prepared_rounds.append(ctx.round)
        ctx.add_tool(shout)


def test_registry_holds_every_catalogued_tool_by_plugin_and_id() -> None:
    registry = ToolRegistry([Plugin("a", tools=[shout]), Plugin("b", tools=[whisper])])
    assert registry.find("a", "voice.shout") is shout
    assert registry.find("b", "voice.whisper") is whisper
    assert registry.find("a", "voice.whisper") is None  # a tool belongs to the plugin that offered it
    assert registry.find(None, "voice.whisper") is whisper
    assert registry.find("a", "voice.unknown") is None


async def test_a_dynamic_tool_runs_without_prepare_running_again(dev_env: WorkflowEnvironment) -> None:
    plugin = DynamicVoice()
    model = ScriptedModel([tool_calls(("voice.shout", {"words": "hello"})), text("done")])
    async with agent_worker(dev_env, plugins=[plugin], model=model) as client:
        prompt = await client.run("shout hello")
    call = prompt.output[0]
    assert call.result == ToolSuccess(output="HELLO")  # type: ignore[union-attr]
    assert plugin.prepared_rounds == [1, 2]  # once per model round, never for the tool call


class ProbeArgs(BaseModel):
    city: str


@tool("cache.probe")
async def probe(args: ProbeArgs, ctx: ToolContext) -> str:
    """Probe."""
    return args.city


def test_a_tools_schema_is_built_once_and_handed_out_as_a_copy() -> None:
    first = probe.parameters_schema()
    assert first == ProbeArgs.model_json_schema()
    first["properties"]["city"]["type"] = "integer"  # type: ignore[index]  # a provider adapting its copy
    assert probe.parameters_schema() == ProbeArgs.model_json_schema()
