"""Durable Agent side of the benchmark: a plugin with the trivial tool and the scripted model.

Loaded by the worker subprocess with ``DAGENT_PLUGINS=bench.plugin:plugin`` and
``DAGENT_MODEL_NORMAL=scripted:bench.plugin:model``.
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from bench.scenario import TOOL_ID, Scenario, current_turn, next_step, tool_output
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage, UserMessage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import Approval, tool


class EchoInput(BaseModel):
    seq: int
    size: int = 16
    approve: bool = False
    ms: int = 0
    n: int = 0


def _approval(args: EchoInput) -> Approval | None:
    return Approval(reason="bench: this call needs approval") if args.approve else None


# BENCH_TOOL (`bench.run --tool`): `local` declares the tool local=True, `regular` local=False; unset, it
# leaves `local` unset like a user's tool (the project's default: fast tools, README "Fast tools").
LOCAL_TOOL = {"local": True, "regular": False}.get(os.environ.get("BENCH_TOOL", ""))


@tool(TOOL_ID, approval=_approval, local=LOCAL_TOOL)
async def echo(args: EchoInput, ctx: ToolContext) -> str:
    """Return `size` bytes of text (after `ms` milliseconds)."""
    if args.ms:
        await asyncio.sleep(args.ms / 1000)
    return tool_output(args.seq, args.size)


plugin = Plugin("bench", tools=[echo])


def _script(request: ModelRequest) -> ModelResponse:
    # ScriptedModel keeps a deep copy of every request in `.requests` (for tests). In a long-running
    # benchmark worker that is an unbounded, quadratic leak that no real provider has, so drop it.
    model.requests.clear()
    # This prompt's part of the transcript: after its user message (a conversation's history comes first).
    user, done = current_turn(request.messages, lambda m: isinstance(m, UserMessage),
                              lambda m: isinstance(m, ToolResultMessage))
    step = next_step(Scenario.parse(user.text if isinstance(user, UserMessage) else None), done)
    if step.arguments is None:
        return text(step.text or "")
    return tool_calls(*[(TOOL_ID, dict(arguments)) for arguments in step.calls])


model = ScriptedModel(_script, model="bench-scripted")
