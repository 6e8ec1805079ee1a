"""Payloads at the workflow's boundaries: its input, its signals/updates, and its activities.

Every workflow, signal, update and activity takes one model, so fields can be added later without
breaking running workflows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent.events import PromptEvent
from agent.models import (
    FileOutput,
    ModelTier,
    Prompt,
    ToolError,
    ToolSuccess,
    Usage,
    WidgetOutput,
)

DEFAULT_MAX_ROUNDS = 10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptRequest(_Model):
    """Input of `PromptWorkflow`. Only `input` (or nothing, for system-initiated prompts) is needed."""

    prompt_id: str | None = Field(default=None, description="Defaults to the workflow id.")
    user_id: str = "anonymous"
    conversation_id: str | None = None
    model: ModelTier = "normal"
    visible: bool = True
    input: str | None = None
    instructions: str | None = None
    history: list[Prompt] = Field(default_factory=list)
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=1, le=10_000)


class ApproveRequest(_Model):
    tool_call_id: str
    by: str | None = None
    input: dict[str, JsonValue] | None = Field(default=None, description="Corrected arguments.")


class RejectRequest(_Model):
    tool_call_id: str
    by: str | None = None
    reason: str | None = None


class PendingApproval(_Model):
    tool_call_id: str
    tool: str
    input: JsonValue
    reason: str
    requested_at: datetime
    expires_at: datetime | None = None
    approvers: list[str] | None = None


# --- activities ---------------------------------------------------------------------------------


class ApprovalRequirement(_Model):
    reason: str
    approvers: list[str] | None = None
    expires_after_seconds: float | None = None


class PlannedCall(_Model):
    """A tool call from the model, checked by the worker: either an `error` or ready to run."""

    id: str
    tool: str
    input: JsonValue = None
    plugin: str | None = None
    error: str | None = None
    approval: ApprovalRequirement | None = None
    timeout_seconds: float = 60.0
    max_attempts: int = 1
    failure_mode: Literal["continue", "fail"] = "continue"


class RoundInput(_Model):
    prompt: Prompt
    history: list[Prompt] = Field(default_factory=list)
    instructions: str | None = None
    round: int


class RoundResult(_Model):
    text: str | None = None
    calls: list[PlannedCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    model: str = ""
    event_hooks: bool = False


class ToolInvocation(_Model):
    prompt_id: str
    user_id: str
    conversation_id: str | None = None
    workflow_id: str
    call: PlannedCall
    input: JsonValue
    plugin_state: JsonValue = None


SideOutput = Annotated[FileOutput | WidgetOutput, Field(discriminator="type")]


class ToolInvocationResult(_Model):
    result: Annotated[ToolSuccess | ToolError, Field(discriminator="type")]
    side_outputs: list[SideOutput] = Field(default_factory=list)
    plugin_state: JsonValue = None
    state_changed: bool = False


class EventDelivery(_Model):
    event: PromptEvent


# Activity names: stable forever once deployed (renaming one breaks replay of running prompts).
MODEL_ROUND_ACTIVITY = "dagent.model_round"
INVOKE_TOOL_ACTIVITY = "dagent.invoke_tool"
EMIT_EVENT_ACTIVITY = "dagent.emit_event"
