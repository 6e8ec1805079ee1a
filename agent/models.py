"""The data model: prompts, their ordered outputs, tool results, usage and conversations.

Pure pydantic v2, JSON-serialisable, no Temporal imports. Every timestamp is passed in explicitly
(never defaulted to "now") so these models can be built inside deterministic workflow code.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field, JsonValue

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.notify import NoticeSent, Notify
from durable_agent.agent.period_budgets import BudgetStanding
from durable_agent.agent.stops import PromptStop
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)

PromptState = Literal["running", "waiting_for_approval", "completed", "stopped", "failed", "cancelled"]
ModelTier = Literal["normal", "high"]
TERMINAL_STATES: frozenset[str] = frozenset({"completed", "stopped", "failed", "cancelled"})


class Usage(_Model):
    """Token counts summed over every model call of a prompt."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = Field(default=0, description="Prompt tokens written to the cache (Anthropic).")
    reasoning_tokens: int = 0
    model_calls: int = 0
    cost: float | None = None

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        counts = {name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields if name != "cost"}
        return Usage(**counts, cost=cost)


# --- tool results -------------------------------------------------------------------------------


class ToolSuccess(_Model):
    type: Literal["success"] = "success"
    output: JsonValue = None


class ToolError(_Model):
    """A call that failed; `error` is what the model is told."""

    type: Literal["error"] = "error"
    error: str


class ApprovalRequest(_Model):
    """A call's request for a human decision, the one shape from policy to record: a tool's approval policy
    answers with one (`Approval`, the name tools use), the worker completes it once when it plans the call
    (`four_eyes`, `notify` and `decision_key` resolved), and the workflow stamps it (`requested_at`,
    `expires_at`) when the call starts waiting. It is then the call's result in the record (`type: pending`)
    until a decision replaces it."""

    type: Literal["pending"] = "pending"
    required: bool = Field(default=True, exclude_if=lambda v: v, description="False: the call runs without one.")
    reason: str = "This call requires approval."
    approvers: list[str] | None = Field(default=None, description=(
        "Who may decide: `user:alice`, `role:finance`; a bare name is a user (agent/identity.py). None = anyone."))
    expires_after: timedelta | None = Field(default=None, exclude_if=lambda v: v is None,
                                            description="Unanswered -> rejected as expired.")
    four_eyes: bool | None = Field(default=None, exclude_if=lambda v: not v, description=(
        "True: the prompt's own user may not approve the call (they may reject it); None: the worker's "
        "default (DAGENT_FOUR_EYES, off unless set), resolved when the call is planned."))
    notify: Notify | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Who is told, through which channels, and when (reminders, escalation); None: the deployment's default "
        "(agent/notify.py, docs/telling-approvers.md), resolved when the call is planned."))
    decision_key: str | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Ed25519 public key (PEM) that must have signed the decision: the worker's configuration, set when the "
        "call is planned (a policy's value is replaced)."))
    requested_at: datetime | None = Field(default=None, description="When the call started waiting.")
    expires_at: datetime | None = None

    @property
    def signed_decisions(self) -> bool:
        """Decisions need a signed token (decide through the API)."""
        return self.decision_key is not None


ToolResult = Annotated[ToolSuccess | ToolError | ApprovalRequest, Field(discriminator="type")]


class Decision(_Model):
    """Who decided a pending call, when, and how."""

    decision: Literal["approved", "rejected", "expired", "superseded"]
    by: str | None = Field(default=None, description="The person who decided (a user id, never a role).")
    via: str | None = Field(default=None, description=(
        "The approver entry that allowed them (`user:alice`, `role:finance`; `*`: the policy named nobody)."))
    at: datetime
    reason: str | None = None
    original_input: JsonValue = Field(default=None, description="Set when the approver corrected the input; "
                                                                "the call's `input` is then the corrected one.")


# --- prompt outputs -----------------------------------------------------------------------------


class TextOutput(_Model):
    """What the model said in one round: its final answer, or what it said along with the tool calls it asked
    for. Later rounds send it back to the model as the assistant's text."""

    type: Literal["text"] = "text"
    text: str


class ToolOutput(_Model):
    """One tool call: the model's arguments (`input`; the corrected ones when `decision` holds an approver's
    correction) and its result, which is None only while the call is being invoked."""

    type: Literal["tool"] = "tool"
    id: str
    tool: str
    input: JsonValue
    result: ToolResult | None = None
    started_at: datetime
    finished_at: datetime | None = None
    decision: Decision | None = None
    child_prompt_id: str | None = Field(default=None, description="The sub-agent's prompt, for a sub-agent call.")
    notifications: list[NoticeSent] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "Who was told of the waiting call, through which channel, when (agent/notify.py)."))


class FileOutput(_Model):
    """A file a tool produced. Only `summary` reaches the model; content lives behind `content_ref`."""

    type: Literal["file"] = "file"
    tool_call_id: str | None = None
    name: str
    media_type: str
    size: int
    content_ref: str
    summary: str


class WidgetOutput(_Model):
    """Display-only data for a UI. Never sent to the model."""

    type: Literal["widget"] = "widget"
    tool_call_id: str | None = None
    widget: str
    data: JsonValue
    fallback_text: str = ""


class ScheduledPrompt(_Model):
    """A system-initiated prompt a tool asks its conversation to run later (`ToolContext.schedule_prompt`), or,
    with `cancel`, to drop one it asked for before. The conversation holds a durable timer for each; the model
    sees only the tool's result. `fire_at` is set by the conversation when it schedules the prompt (a delay counts
    from the end of the prompt whose tool asked)."""

    type: Literal["scheduled_prompt"] = "scheduled_prompt"
    tool_call_id: str | None = None
    id: str
    message: str = ""
    delay_seconds: float | None = Field(default=None, ge=0)
    at: datetime | None = None
    cancel: bool = False
    fire_at: datetime | None = None


class MessageOutput(_Model):
    """A message that arrived mid-prompt: a user's steer, or a system note (e.g. why an answer was refused)."""

    type: Literal["message"] = "message"
    role: Literal["user", "system"] = "user"
    text: str
    source: Literal["steer", "output_validation", "trigger", "budget", "limit"] = "steer"


class DataOutput(_Model):
    """The final structured answer when an output schema is set."""

    type: Literal["data"] = "data"
    data: JsonValue


class ReasoningOutput(_Model):
    """The model's reasoning in one round, before its answer. `summary` is what a user may read (an OpenAI
    reasoning summary, Anthropic's thinking text; empty when redacted or not asked for); `item` is the
    provider's own block, kept verbatim (encrypted content, signature) so the projection can send it back
    to the same provider. Other providers never see it."""

    type: Literal["reasoning"] = "reasoning"
    provider: str = Field(description="The provider family whose item this is: openai or anthropic.")
    model: str = ""
    summary: str = ""
    item: dict[str, JsonValue] = Field(default_factory=dict)


PromptOutput = Annotated[
    TextOutput | ToolOutput | FileOutput | WidgetOutput | DataOutput | MessageOutput | ReasoningOutput,
    Field(discriminator="type"),
]


class PromptRef(_Model):
    """Which prompt something belongs to: embedded (by inheritance, so wire fields stay flat) wherever
    a payload or hook needs the prompt's identity."""

    prompt_id: str
    user_id: str
    conversation_id: str | None = None


class HoldsPromptRef:
    """For a context that holds its prompt's `PromptRef` as `prompt`: the ids readable as its own attributes."""

    prompt: PromptRef

    @property
    def user_id(self) -> str:
        return self.prompt.user_id

    @property
    def prompt_id(self) -> str:
        return self.prompt.prompt_id

    @property
    def conversation_id(self) -> str | None:
        return self.prompt.conversation_id


class ModelRound(_Model):
    """Which model answered one round, with which settings."""

    round: int
    model: str = Field(description="The `provider:model` that answered (the tier's spec, or a fallback's).")
    response_model: str = Field(default="", description="The model name the provider reported.")
    fallback: int = Field(default=0, description="Position in the tier's fallback chain (0: the first model).")
    settings: ModelSettings | None = Field(default=None, description="The settings sent, when any were set.")


class AuditEntry(_Model):
    """Something the workflow received and refused (e.g. a signal for an unknown tool call)."""

    at: datetime
    kind: str
    detail: str


class Prompt(_Model):
    id: str
    user_id: str
    conversation_id: str | None = None
    model: ModelTier = "normal"
    model_settings: ModelSettings | None = Field(default=None, description="This prompt's settings (over its tier's).")
    model_rounds: list[ModelRound] = Field(default_factory=list)
    visible: bool = True
    state: PromptState = "running"
    input: str | None = None
    output: list[PromptOutput] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    rounds: int = 0
    created_at: datetime | None = None
    finished_at: datetime | None = None
    force_completed: bool = False
    budget_stop: str | None = Field(default=None, description="Set when the prompt's budget stopped it (why).")
    stop: PromptStop | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Set when the prompt ended `stopped` (its work not done): why, who may grant more, when the budget "
        "resets."))
    budgets: list[BudgetStanding] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "The period budgets this prompt is under (agent/period_budgets.py): spend against budget, as of its last "
        "round."))
    error: str | None = None
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    scheduled: list[ScheduledPrompt] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "Prompts this prompt's tools asked its conversation to run later (or to cancel), in call order."))
    audit: list[AuditEntry] = Field(default_factory=list)
    parent_prompt_id: str | None = Field(default=None, description="Set when this prompt is a sub-agent's.")
    trace_id: str | None = None  # the OpenTelemetry trace of this prompt, when tracing is on

    def tool_call(self, tool_call_id: str) -> ToolOutput | None:
        return next((e for e in self.output if isinstance(e, ToolOutput) and e.id == tool_call_id), None)


class Conversation(_Model):
    id: str
    user_id: str
    prompt_ids: list[str] = Field(default_factory=list)
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    running_prompt_id: str | None = None
    starting_prompt_id: str | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="The input taken from the queue whose prompt is being started (it has no workflow yet).")
    queued: list[str] = Field(default_factory=list, description="Inputs waiting for the running prompt to end.")
    scheduled: list[ScheduledPrompt] = Field(default_factory=list, exclude_if=lambda v: not v,
                                             description="Scheduled prompts not fired yet, by fire time.")
    usage: Usage = Field(default_factory=Usage)
    runs: int = Field(default=1, description="Workflow runs so far (continue-as-new starts a new one).")
    audit: list[AuditEntry] = Field(default_factory=list, description="Signals this run received and refused.")
