"""The one event vocabulary: what a prompt's live stream carries and what plugins' `on_event` hooks receive."""

from __future__ import annotations

from enum import StrEnum

from pydantic import JsonValue

from durable_agent.agent.models import PromptRef


class EventKind(StrEnum):
    """Every kind of prompt event. The values are wire names: watchers and stored streams use them."""

    OUTPUT_ADDED = "output_added"  # stream: a new output entry
    OUTPUT_UPDATED = "output_updated"  # stream: an entry changed (a tool call got its result)
    STATE_CHANGED = "state_changed"  # stream: the prompt's state
    APPROVAL_REQUESTED = "approval_requested"  # stream and on_event: a call waits for a person


class PromptEvent(PromptRef):
    """What a plugin's `on_event` hook receives (today: approval requests, e.g. to notify approvers)."""

    kind: EventKind
    tool_call_id: str | None = None
    tool: str | None = None
    input: JsonValue = None
    reason: str | None = None
    state: str | None = None
