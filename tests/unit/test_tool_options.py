"""A tool's options have one shape and one set of defaults (agent/tools.py ToolOptions): `tool()`, `Tool`, an MCP
server's tools and the planned call (workflows/wire/calls.py, the same shape on the wire) agree."""

from __future__ import annotations

import inspect
import json
from dataclasses import fields, replace
from datetime import timedelta

import pytest
from pydantic import BaseModel, ValidationError

from durable_agent.agent.context import ToolContext
from durable_agent.agent.mcp import MCPServer
from durable_agent.agent.tools import DEFAULT_OPTIONS, Tool, ToolOptions, tool
from durable_agent.workflows.protocol import ReadyCall
from durable_agent.workflows.wire.calls import PLANNED_DEFAULTS

OPTION_NAMES = set(ToolOptions.model_fields)


class _Args(BaseModel):
    n: int = 0


async def _echo(args: _Args, ctx: ToolContext) -> int:
    """Echo."""
    return args.n


def test_every_place_defaults_to_the_options_defaults() -> None:
    signature = inspect.signature(tool).parameters
    assert {name: signature[name].default for name in OPTION_NAMES} == dict(DEFAULT_OPTIONS)
    plain = Tool(id="t.echo", description="Echo.", input_model=_Args, fn=_echo)
    assert plain.options == DEFAULT_OPTIONS
    assert {name: getattr(plain, name) for name in OPTION_NAMES} == dict(DEFAULT_OPTIONS)
    server = {f.name: f.default for f in fields(MCPServer) if f.name in OPTION_NAMES}
    assert server == {name: value for name, value in DEFAULT_OPTIONS if name != "local"}
    assert tool("t.echo")(_echo).options == DEFAULT_OPTIONS


def test_the_planned_call_carries_the_options_in_their_own_shape() -> None:
    options = ToolOptions(timeout=timedelta(seconds=90), max_attempts=3, failure_mode="fail", local=True,
                          heartbeat_timeout=timedelta(seconds=5), sequential=True)
    made = tool("t.echo", **dict(options))(_echo)
    assert made.options == options
    call = ReadyCall(id="c1", tool="t.echo", options=made.options)
    wire = json.loads(call.model_dump_json())
    assert wire["options"] == {"timeout": "PT1M30S", "max_attempts": 3, "failure_mode": "fail", "local": True,
                               "heartbeat_timeout": "PT5S", "sequential": True}
    assert ReadyCall.model_validate(wire).options == options
    only_timeout = ReadyCall(id="c1", tool="t.echo", options=PLANNED_DEFAULTS.model_copy(
        update={"timeout": timedelta(seconds=5)}))
    assert json.loads(only_timeout.model_dump_json())["options"] == {"timeout": "PT5S", "local": False}


def test_a_default_call_keeps_its_options_off_the_wire() -> None:
    """Recorded planned calls omit options at their defaults: those defaults are the options' defaults."""
    call = ReadyCall(id="c1", tool="t.echo", options=DEFAULT_OPTIONS.model_copy(update={"local": False}))
    assert json.loads(call.model_dump_json()) == {"id": "c1", "tool": "t.echo", "kind": "ready"}
    assert ReadyCall(id="c1", tool="t.echo").options == DEFAULT_OPTIONS.model_copy(update={"local": False})


def test_options_are_checked() -> None:
    with pytest.raises(ValidationError):
        ToolOptions(max_attempts=0)


def test_a_tool_holds_its_options_given_whole_or_one_by_one() -> None:
    """`Tool` keeps one `ToolOptions`; keywords apply on top of `options`, and `dataclasses.replace` (which passes
    the current `options` with the keyword) changes only what it names."""
    whole = ToolOptions(timeout=timedelta(seconds=5), max_attempts=3, sequential=True)
    given = Tool(id="t.echo", description="Echo.", input_model=_Args, fn=_echo, options=whole)
    assert given.options == whole and given.timeout == timedelta(seconds=5) and given.max_attempts == 3
    on_top = Tool(id="t.echo", description="Echo.", input_model=_Args, fn=_echo, options=whole, local=True)
    assert on_top.options == whole.model_copy(update={"local": True})
    replaced = replace(given, failure_mode="fail")
    assert replaced.options == whole.model_copy(update={"failure_mode": "fail"})
    assert "options" in {f.name for f in fields(Tool)} and not OPTION_NAMES & {f.name for f in fields(Tool)}


def test_a_tool_refuses_options_that_cannot_hold() -> None:
    with pytest.raises(ValidationError, match="max_attempts"):
        Tool(id="t.echo", description="Echo.", input_model=_Args, fn=_echo, max_attempts=0)
    with pytest.raises(TypeError, match="timeout_seconds"):
        Tool(id="t.echo", description="Echo.", input_model=_Args, fn=_echo, timeout_seconds=5)  # type: ignore[call-arg]
