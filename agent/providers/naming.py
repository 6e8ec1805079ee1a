"""Tool ids -> provider-legal function names and back.

Our tool ids may contain dots (`trigger.create`); OpenAI and Anthropic only accept `^[a-zA-Z0-9_-]{1,64}$`.
A `ToolNameMap` is built per request from every tool id the model will see (the offered tools and any tool
that appears in the history), so a name always maps back to exactly one id. Ids that are already legal keep
their name; the others are sanitised (`trigger.create` -> `trigger_create`) and get a numeric suffix on a
collision. Everything is sorted first, so the same set of ids always gives the same names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from durable_agent.agent.messages import ModelRequest, ToolCallMessage, ToolResultMessage

MAX_NAME_LENGTH = 64
_LEGAL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ILLEGAL_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def sanitize_name(tool_id: str) -> str:
    """The legal name a tool id would get if nothing else claimed it."""
    name = _ILLEGAL_CHARS.sub("_", tool_id)[:MAX_NAME_LENGTH]
    return name or "tool"


class ToolNameMap:
    """A deterministic, collision-free two-way map between our tool ids and provider function names."""

    def __init__(self, tool_ids: Iterable[str]):
        ids = sorted(set(tool_ids))
        self._to_provider: dict[str, str] = {}
        self._from_provider: dict[str, str] = {}
        for tool_id in ids:  # already-legal ids keep their own name
            if _LEGAL.match(tool_id):
                self._claim(tool_id, tool_id)
        for tool_id in ids:
            if tool_id not in self._to_provider:
                self._claim(tool_id, self._free_name(sanitize_name(tool_id)))

    @classmethod
    def for_request(cls, request: ModelRequest) -> ToolNameMap:
        ids = [spec.id for spec in request.tools]
        ids += [m.tool for m in request.messages if isinstance(m, ToolCallMessage | ToolResultMessage)]
        return cls(ids)

    def _claim(self, tool_id: str, name: str) -> None:
        self._to_provider[tool_id] = name
        self._from_provider[name] = tool_id

    def _free_name(self, base: str) -> str:
        if base not in self._from_provider:
            return base
        n = 2
        while True:
            suffix = f"_{n}"
            candidate = base[: MAX_NAME_LENGTH - len(suffix)] + suffix
            if candidate not in self._from_provider:
                return candidate
            n += 1

    def to_provider(self, tool_id: str) -> str:
        """The provider-legal name for one of our ids (ids outside the map are only sanitised)."""
        return self._to_provider.get(tool_id) or sanitize_name(tool_id)

    def from_provider(self, name: str) -> str:
        """Our tool id for a name the provider sent; an unknown name maps back to itself."""
        return self._from_provider.get(name, name)

    def items(self) -> list[tuple[str, str]]:
        """(tool id, provider name) pairs, sorted by id."""
        return sorted(self._to_provider.items())
