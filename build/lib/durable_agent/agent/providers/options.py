"""Helpers the adapters share when mapping `ModelSettings` onto a request body."""

from __future__ import annotations

from typing import Any

from durable_agent.agent.messages import ModelRequest
from durable_agent.agent.providers.base import FatalModelError
from durable_agent.agent.providers.naming import ToolNameMap


def forced_tool_name(request: ModelRequest, names: ToolNameMap) -> str | None:
    """The provider-side name of the tool `tool_choice` forces; a tool the request does not offer is fatal."""
    tool = request.forced_tool()
    if tool is None:
        return None
    if all(spec.id != tool for spec in request.tools):
        offered = ", ".join(spec.id for spec in request.tools) or "none"
        raise FatalModelError(f"tool_choice names tool {tool!r}, which this prompt does not offer "
                              f"(tools: {offered})")
    return names.to_provider(tool)


def with_extra(kwargs: dict[str, Any], request: ModelRequest) -> dict[str, Any]:
    """`settings.extra` goes into the SDK's `extra_body`, which the SDK merges into the JSON body."""
    if request.settings.extra:
        kwargs["extra_body"] = {**kwargs.get("extra_body", {}), **request.settings.extra}
    return kwargs
