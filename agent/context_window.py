"""A sliding context window: trim the oldest history so a model request fits, keeping tool calls whole.

Pure functions over the neutral message list (`agent.messages`), no Temporal imports, so the same trim
gives the same result on every retry and replay.

The list is cut into *units* before anything is dropped. A tool call and its result (same `call_id`) always
share a unit; when calls run in parallel (`call a, call b, result a, result b`) the overlapping pairs and
whatever sits between them form one unit. Every other message is a unit of its own. `trim_messages` keeps
the longest run of newest units that fits the limit, so the output is always a suffix of the input:

- order is kept and nothing in the middle is removed;
- a call is never kept without its result, nor a result without its call;
- the newest unit is always kept, even when it alone is over the limit (the model must see the newest turn);
- the output never starts with a tool result (Anthropic rejects a `tool_result` with no `tool_use` before it).

Example::

    limit = ContextLimit(max_messages=50, max_tokens=100_000)
    request = request.model_copy(update={"messages": trim_messages(request.messages, limit)})
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import ConfigDict, Field

from durable_agent.agent.messages import (
    Message,
    ToolCallMessage,
    ToolResultMessage,
)
from durable_agent.agent.strict import StrictModel

CHARS_PER_TOKEN = 4


class ContextLimit(StrictModel):
    """How much history a model request may carry. `None` means no limit on that axis."""

    model_config = ConfigDict(frozen=True)

    max_messages: int | None = Field(default=None, ge=1, description="At most this many messages.")
    max_tokens: int | None = Field(default=None, ge=1,
                                   description="At most this many estimated tokens (characters / 4).")

    @property
    def unlimited(self) -> bool:
        return self.max_messages is None and self.max_tokens is None


def estimate_tokens(message: Message) -> int:
    """A rough token count: characters / 4, rounded up, at least 1 (every message costs something)."""
    return max(1, math.ceil(message.chars / CHARS_PER_TOKEN))


def estimate_total_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m) for m in messages)


def _call_id(message: Message) -> str | None:
    return message.call_id if isinstance(message, ToolCallMessage | ToolResultMessage) else None


def split_units(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """The list cut into `[start, end)` spans that must be kept or dropped whole, oldest first.

    A span stretches from a call to its result and merges with every span it overlaps, so parallel
    calls and their results travel together. Messages without a call id are spans of one.
    """
    last_index: dict[str, int] = {}
    for index, message in enumerate(messages):
        call_id = _call_id(message)
        if call_id is not None:
            last_index[call_id] = index
    units: list[tuple[int, int]] = []
    start = 0
    reach = -1  # the last index the current unit must extend to
    for index, message in enumerate(messages):
        call_id = _call_id(message)
        if call_id is not None:
            reach = max(reach, last_index[call_id])
        if index >= reach:
            units.append((start, index + 1))
            start = index + 1
    return units


def _fits(count: int, tokens: int, limit: ContextLimit) -> bool:
    if limit.max_messages is not None and count > limit.max_messages:
        return False
    return limit.max_tokens is None or tokens <= limit.max_tokens


def trim_messages(messages: Sequence[Message], limit: ContextLimit) -> list[Message]:
    """Drop the oldest messages until `messages` fits `limit`; returns a new list, a suffix of the input.

    Tool calls and their results are dropped or kept together; the newest unit is always kept.
    """
    if not messages:
        return []
    units = split_units(messages)
    first = len(units) - 1  # the newest unit is kept whatever its size
    count = units[-1][1] - units[-1][0]
    tokens = estimate_total_tokens(messages[units[-1][0]:])
    for index in range(len(units) - 2, -1, -1):
        unit_start, unit_end = units[index]
        unit_tokens = estimate_total_tokens(messages[unit_start:unit_end])
        if not _fits(count + unit_end - unit_start, tokens + unit_tokens, limit):
            break
        first, count, tokens = index, count + unit_end - unit_start, tokens + unit_tokens
    # Only malformed input (a result with no call before it) has a unit starting with a result: never lead
    # with one, unless it is the newest unit.
    while first < len(units) - 1 and isinstance(messages[units[first][0]], ToolResultMessage):
        first += 1
    return list(messages[units[first][0]:])
