"""Payloads at the workflow's boundaries: its input, its signals/updates, and its activities.

Every workflow, signal, update and activity takes one model, so fields can be added later without
breaking running workflows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    Tag,
    WrapSerializer,
    model_serializer,
    model_validator,
)

from durable_agent.agent.events import EventKind, PromptEvent
from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import (
    FileOutput,
    ModelTier,
    Prompt,
    PromptOutput,
    ReasoningOutput,
    ToolError,
    ToolSuccess,
    Usage,
    WidgetOutput,
)
from durable_agent.agent.providers.specs import provider_of
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)
from durable_agent.workflows.budgets import PromptBudget

DEFAULT_MAX_ROUNDS = 10
MAX_INPUT_CHARS = 100_000  # far below Temporal's 2 MB payload limit, so a huge paste fails clearly at start


def _without_defaults(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """`data`, the model's own serialization, without the fields at their defaults (the reader fills them in
    again). A union member's `type` tag stays: the reader needs it to tell the members apart."""
    fields = type(model).model_fields
    return {key: value for key, value in data.items()
            if key == "type" or fields[key].is_required() or getattr(model, key) != _default_of(fields[key])}


def _default_of(field: Any) -> Any:
    return field.default_factory() if field.default_factory is not None else field.default


class _Lean(_Model):
    """A payload written to history (an activity's input or result, a workflow's input): fields at their
    defaults stay off the wire, so every round's events carry only what says something."""

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _lean_model(self, handler)


def _lean_model(model: BaseModel, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    return _without_defaults(model, handler(model))


def _lean_header(prompt: Prompt, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
    data = _lean_model(prompt, handler)
    if "usage" in data:
        data["usage"] = _without_defaults(prompt.usage, data["usage"])
    return data


# A model nested in a lean payload, serialized without its own fields at their defaults (one level deep).
LeanUsage = Annotated[Usage, WrapSerializer(_lean_model)]
LeanOutput = Annotated[PromptOutput, WrapSerializer(_lean_model)]
LeanHeader = Annotated[Prompt, WrapSerializer(_lean_header)]


class ModelRouting(_Model):
    """Which task queue runs a round, by the provider of the model answering it (`provider` of `provider:model`):
    each provider's queue carries that provider's rate limit."""

    tier_queue: str | None = Field(default=None, description="A provider without a queue of its own; None: "
                                                              "the workflow's queue.")
    providers: dict[str, str] = Field(default_factory=dict, description="provider -> task queue.")

    def queue_for(self, spec: str) -> str | None:
        return self.providers.get(provider_of(spec), self.tier_queue)


# Fields of both workflow inputs (a prompt's and a conversation's).
OptionalRouting = Annotated[ModelRouting | None, Field(
    exclude_if=lambda routing: routing is None,  # absent, the input is what it always was
    description="Fallback rounds run on their provider's queue; None: all on `model_task_queue`.")]
WorkflowVersion = Annotated[int | None, Field(
    description="The workflow behaviour this run has (workflows/versions.py); set by AgentClient and by parent "
    "workflows. None: patch markers decide, as for runs started before versions existed.")]


class PromptRequest(_Lean):
    """Input of `PromptWorkflow`. Only `input` (or nothing, for system-initiated prompts) is needed."""

    prompt_id: str | None = Field(default=None, description="Defaults to the workflow id.")
    user_id: str = "anonymous"
    conversation_id: str | None = None
    model: ModelTier = "normal"
    model_settings: ModelSettings | None = Field(default=None, description="Over the tier's settings.")
    model_task_queue: str | None = Field(default=None, description="Where model calls run; None: this queue.")
    model_routing: OptionalRouting = None
    visible: bool = True
    input: str | None = Field(default=None, min_length=1, max_length=MAX_INPUT_CHARS,
                              description="The user's message; None for system-initiated prompts.")
    instructions: str | None = None
    history: list[Prompt] = Field(default_factory=list)
    history_ref: HistoryRef | None = Field(
        default=None, description="Earlier prompts by reference (a conversation's), before `history` if both.")
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=1, le=10_000)
    output_schema: dict[str, JsonValue] | str | None = Field(
        default=None, description="JSON schema, or 'module:PydanticModel', for a structured final answer.")
    output_retries: int = Field(default=2, ge=0, le=10)
    context_max_messages: int | None = Field(default=None, ge=1)
    context_max_tokens: int | None = Field(default=None, ge=1)
    fail_workflow_on_error: bool = Field(
        default=True, description="A failed prompt fails its workflow; False returns the failed record instead.")
    max_parallel_tools: int | None = Field(
        default=None, ge=1, description="At most this many tool calls of one response run at once (None: all).")
    plugins: list[str] | None = Field(default=None, description="Only these plugins of the worker (sub-agents).")
    parent: ParentLink | None = Field(default=None, description="Set when a sub-agent call started this prompt.")
    workflow_version: WorkflowVersion = None
    budget: PromptBudget | None = Field(default=None, description="Token/cost limits (workflows/budgets.py).")
    budgets: list[str] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "Principals (`user:<id>`, `conversation:<id>`) whose period budget each model round reserves from "
        "(agent/period_budgets.py); empty: no ledger is asked."))


class ParentLink(_Model):
    """The prompt and the call that started a sub-agent's prompt."""

    workflow_id: str
    prompt_id: str
    tool_call_id: str
    path: list[str] = Field(default_factory=list, description="Prompt ids from the root prompt to the parent.")
    report_nonce: str | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Made by the parent for this child: every `child_approvals` report must carry it (None: older parents)."))


class SubAgentCall(_Model):
    instructions: str
    model: ModelTier = "normal"
    plugins: list[str] | None = None
    max_rounds: int = DEFAULT_MAX_ROUNDS
    output_schema: dict[str, JsonValue] | str | None = None


class ChildApprovals(_Model):
    """A sub-agent's prompt tells its parent what it waits for (signal `child_approvals`)."""

    tool_call_id: str = Field(description="The parent's sub-agent call.")
    child_workflow_id: str
    pending: list[PendingApproval] = Field(default_factory=list)
    child_run_id: str | None = Field(default=None, exclude_if=lambda v: v is None,
                                    description="The reporting run (checked by the parent).")
    nonce: str | None = Field(default=None, exclude_if=lambda v: v is None,
                             description="The parent's `ParentLink.report_nonce` for this child.")
    refused: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v, description=(
        "Decisions forwarded by the parent that this sub-agent refused: its call id -> why."))


class SteerRequest(_Model):
    message: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)


class ApproveRequest(_Model):
    tool_call_id: str
    by: str | None = None
    roles: list[str] = Field(default_factory=list, exclude_if=lambda roles: not roles, description=(
        "The decider's roles; trusted like `by` only without decision keys (signed: the token's roles count)."))
    input: dict[str, JsonValue] | None = Field(default=None, description="Corrected arguments.")
    token: str | None = Field(default=None, description="Signed decision token (workflows/decision_tokens.py); "
                                                        "required when the worker has a decision key.")


class RejectRequest(_Model):
    tool_call_id: str
    by: str | None = None
    roles: list[str] = Field(default_factory=list, exclude_if=lambda roles: not roles,
                             description="See ApproveRequest.roles.")
    reason: str | None = None
    token: str | None = Field(default=None, description="Signed decision token; see ApproveRequest.token.")


class PendingApproval(_Model):
    tool_call_id: str
    tool: str
    input: JsonValue
    reason: str
    requested_at: datetime
    expires_at: datetime | None = None
    approvers: list[str] | None = None
    path: list[str] = Field(default_factory=list, description="Prompt ids from this prompt to the one that waits "
                                                             "(empty: this prompt itself); a sub-agent's call.")
    input_schema: dict[str, JsonValue] | None = Field(default=None, description="JSON schema of the arguments.")
    signed_decisions: bool = Field(default=False, description="Decisions need a signed token (decide via the API).")
    four_eyes: bool = Field(default=False, exclude_if=lambda v: not v,
                            description="The prompt's own user may not approve this call.")
    run_id: str | None = Field(default=None, exclude_if=lambda v: v is None,
                               description="The run of the prompt that waits (decision tokens name it).")


# --- activities ---------------------------------------------------------------------------------


class ApprovalRequirement(_Model):
    """What the workflow needs to ask for a decision: an approval policy's answer, in wire units."""

    reason: str
    approvers: list[str] | None = None
    expires_after_seconds: float | None = None
    input_schema: dict[str, JsonValue] | None = Field(
        default=None, description="The tool's input JSON schema: an approver's correction is checked against it.")
    decision_key: str | None = Field(default=None, description="Ed25519 public key (PEM) that must have signed "
                                                               "the decision; from the worker's configuration.")
    four_eyes: bool = Field(default=False, exclude_if=lambda v: not v,
                            description="The prompt's own user may not approve the call.")

    @property
    def expires_after(self) -> timedelta | None:
        return timedelta(seconds=self.expires_after_seconds) if self.expires_after_seconds else None


class _CallBase(_Lean):
    """A tool call from the model as the worker checked it. Fields at their defaults stay off the wire;
    round results recorded with every field (`error` and `approval` null where they do not apply) decode
    the same."""

    id: str
    tool: str
    input: JsonValue = None
    plugin: str | None = None
    timeout_seconds: float = 60.0
    max_attempts: int = 1
    failure_mode: Literal["continue", "fail"] = "continue"
    local: bool = False
    heartbeat_timeout_seconds: float = 20.0
    sequential: bool = Field(default=False, description="Runs alone, never side by side with other calls.")
    agent: SubAgentCall | None = Field(default=None, description="A sub-agent: runs as a child prompt.")

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=self.timeout_seconds)

    @property
    def heartbeat_timeout(self) -> timedelta:
        return timedelta(seconds=self.heartbeat_timeout_seconds)


class InvalidCall(_CallBase):
    """Not run: unknown tool, or arguments that do not fit; `error` goes back to the model."""

    error: str
    approval: None = None


class CallNeedingApproval(_CallBase):
    """Runs only after a person approves it."""

    error: None = None
    approval: ApprovalRequirement


class ReadyCall(_CallBase):
    """Runs now."""

    error: None = None
    approval: None = None


def _call_kind(value: Any) -> str:
    get = value.get if isinstance(value, dict) else lambda name: getattr(value, name, None)
    if get("error") is not None:
        return "invalid"
    return "approval" if get("approval") is not None else "ready"


PlannedCall = Annotated[
    Annotated[InvalidCall, Tag("invalid")] | Annotated[CallNeedingApproval, Tag("approval")]
    | Annotated[ReadyCall, Tag("ready")],
    Discriminator(_call_kind),
]


class HistoryRef(_Model):
    """Earlier prompts of a conversation by reference: the newest link of a content-addressed chain of
    `HistoryLink` blobs in the store (each link names its parent). Immutable, so workers cache it forever."""

    ref: str = Field(description="The newest link's content reference in the file store.")
    count: int = Field(ge=0, description="Prompts in the whole chain.")


class HistoryLink(_Model):
    """One stored link of a conversation's history: prompt records appended after `parent`."""

    parent: HistoryRef | None = None
    records: list[Prompt]


class StoreHistoryRequest(_Model):
    """Input of the conversation's `store_history` local activity (local: its input is not in history)."""

    parent: HistoryRef | None = None
    records: list[Prompt]


class OutputChange(_Lean):
    index: int
    output: LeanOutput
    result_ref: str | None = Field(
        default=None, description="A tool's output by reference (its content digest): `output` is the entry with "
                                  "the result's output left out; the worker that ran the tool has it cached.")


class RoundInput(_Lean):
    """One model round. The workflow sends only the output entries added or changed since its previous round
    (`changes`; a large tool output by reference), and the earlier prompts of a conversation by reference
    (`history_ref`); the worker keeps the rest in a cache. A worker that misses anything fails the round with
    `TranscriptMissing` and the workflow sends it again whole (`changes=None`): no activity queries its
    workflow. With `changes=None`, `prompt.output` and `history` are complete."""

    prompt: LeanHeader
    history: list[Prompt] = Field(default_factory=list)
    history_ref: HistoryRef | None = Field(default=None, description="Earlier prompts by reference, then `history`.")
    instructions: str | None = None
    round: int
    changes: list[OutputChange] | None = None
    output_count: int = 0
    history_count: int = 0
    run_id: str = ""
    output_schema: dict[str, JsonValue] | str | None = None
    context_max_messages: int | None = None
    context_max_tokens: int | None = None
    plugins: list[str] | None = Field(default=None, description="Only these plugins (a sub-agent's prompt).")
    fallback: int = Field(default=0, description="Which model of the tier's fallback chain to call.")


class RoundResult(_Lean):
    reasoning: list[ReasoningOutput] = Field(default_factory=list)
    text: str | None = None
    calls: list[PlannedCall] = Field(default_factory=list)
    usage: LeanUsage = Field(default_factory=Usage)
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    model: str = ""
    spec: str = Field(default="", description="The provider:model that answered.")
    fallback: int = 0
    settings: ModelSettings | None = None
    event_hooks: bool = False
    data: JsonValue = None
    output_error: str | None = Field(default=None, description="Why the final answer failed the output schema.")

    def next_step(self) -> NextStep:
        """What the prompt does next, decided by the worker: run tools, accept the answer, or ask again."""
        if self.calls:
            return RunTools(calls=self.calls)
        if self.output_error is not None:
            return RetryForSchema(reason=self.output_error)
        return FinalAnswer(data=self.data)


@dataclass(frozen=True)
class FinalAnswer:
    """No tool calls: the text (and, with an output schema, `data`) is the answer."""

    data: JsonValue


@dataclass(frozen=True)
class RetryForSchema:
    """The answer did not match the output schema: tell the model why and let it answer again."""

    reason: str


@dataclass(frozen=True)
class RunTools:
    """Run these calls in order (each one invalid, needing approval, or ready)."""

    calls: list[PlannedCall]


NextStep = FinalAnswer | RetryForSchema | RunTools


class ToolInvocation(_Lean):
    """The tool activity's input: only what the activity cannot derive, each id once. Fields at their
    defaults stay off the wire. The workflow id (idempotency key), the heartbeat timeout and the attempt
    come from the activity's info; the call's other policy fields (timeout, failure mode, local, sequential)
    are the workflow's business. A `LegacyToolInvocation` (workflows/legacy.py), recorded or in flight, is read
    as well."""

    id: str = Field(description="The call's id in the prompt.")
    tool: str
    plugin: str | None = None
    input: JsonValue = Field(default=None, description="The arguments (as corrected by an approver).")
    user_id: str = "anonymous"
    conversation_id: str | None = None
    prompt_id: str | None = Field(default=None, description="None: the workflow id (a prompt's default id).")
    plugin_state: JsonValue = None
    max_attempts: int = Field(default=1, description="The tool's own attempts (an MCP server that is down).")
    run_scoped: bool = Field(default=False, description=(
        "The idempotency key names the workflow's run too (`<workflow id>/<run id>/<call id>`): a later run that "
        "reuses the workflow id gets other keys. False: `<workflow id>/<call id>` (runs started before)."))

    @model_validator(mode="before")
    @classmethod
    def _from_legacy(cls, value: Any) -> Any:
        if not (isinstance(value, dict) and isinstance(value.get("call"), dict)):
            return value
        call = value["call"]
        return {"id": call["id"], "tool": call["tool"], "plugin": call.get("plugin"), "input": value.get("input"),
                "user_id": value.get("user_id", "anonymous"), "conversation_id": value.get("conversation_id"),
                "prompt_id": value.get("prompt_id"), "plugin_state": value.get("plugin_state"),
                "max_attempts": call.get("max_attempts", 1)}


SideOutput = Annotated[FileOutput | WidgetOutput, Field(discriminator="type")]


class CorrectionCheck(_Model):
    """Input of the correction-check activity: the tool's approval policy, run again on corrected arguments."""

    tool: str
    plugin: str | None = None
    input: JsonValue = Field(description="The arguments as the approver corrected them (merged).")


class CorrectionVerdict(_Model):
    """What the policy says of corrected arguments: the approval they need (None: none), or why they cannot
    be approved at all (`problem`: invalid arguments, a policy that raised, a tool this worker lacks)."""

    requirement: ApprovalRequirement | None = None
    problem: str | None = None


class ToolInvocationResult(_Lean):
    result: Annotated[ToolSuccess | ToolError, Field(discriminator="type")]
    side_outputs: list[SideOutput] = Field(default_factory=list)
    plugin_state: JsonValue = None
    state_changed: bool = False


class EventDelivery(_Model):
    event: PromptEvent


class StreamEvent(_Model):
    """One entry of a prompt's live event stream; the stream offset is its sequence number."""

    kind: EventKind
    index: int | None = None
    output: PromptOutput | None = None
    state: str | None = None


class TextDelta(_Model):
    """Model text while it streams: `text` starts at `offset` in the round's text. The model activity keeps
    the text so far (its tail) in its heartbeat details, never in history; watchers read it from the
    prompt's pending activities and show only what is past what they already showed (a retried model
    call starts again at 0)."""

    round: int
    attempt: int
    offset: int
    text: str
    kind: Literal["text", "reasoning"] = "text"

    @property
    def end(self) -> int:
        return self.offset + len(self.text)

    def past(self, shown: int) -> str:
        """What this delta adds beyond the first `shown` characters of the round's text."""
        return self.text[max(shown - self.offset, 0):] if self.end > shown else ""


class StreamingText(_Model):
    """The heartbeat details of a model round that streams: its text and reasoning summary so far."""

    text: TextDelta | None = None
    reasoning: TextDelta | None = None


class ToolProgress(_Model):
    """What a running tool last reported with `ctx.report_progress`: carried in its activity's heartbeat
    details (never in history) and read by watchers from the prompt's pending activities."""

    tool_call_id: str
    tool: str
    message: str
    fraction: float | None = None


class TranscriptPageRequest(_Model):
    start: int = Field(default=0, ge=0, description="Position in the flat list: history outputs, then this prompt's.")
    max_bytes: int = Field(default=1_000_000, ge=1)


class TranscriptItem(_Model):
    prompt: int = Field(description="Index into the history; len(history) means the current prompt.")
    output: PromptOutput


class TranscriptPage(_Model):
    history: list[Prompt] = Field(default_factory=list, description="History headers (no outputs); first page only.")
    history_count: int
    output_count: int
    items: list[TranscriptItem]
    next_start: int | None = None


# --- conversations ------------------------------------------------------------------------------


class ConversationRequest(_Model):
    """Input of `ConversationWorkflow`; also what continue-as-new carries to the next run."""

    conversation_id: str | None = Field(default=None, description="Defaults to the workflow id.")
    user_id: str = "anonymous"
    model: ModelTier = "normal"
    model_settings: ModelSettings | None = None
    model_task_queue: str | None = None
    model_routing: OptionalRouting = None
    instructions: str | None = None
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=1, le=10_000)
    prompts_per_run: int = Field(default=100, ge=1, description="Continue-as-new after this many prompts.")
    history: list[Prompt] = Field(default_factory=list, description="Earlier prompts by value (older runs).")
    history_ref: HistoryRef | None = Field(default=None, description="Earlier prompts by reference, then `history`.")
    prompt_ids: list[str] = Field(default_factory=list, description="Ids of the prompts behind `history_ref`.")
    usage: Usage = Field(default_factory=Usage, description="Usage of the prompts behind `history_ref`.")
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    queued: list[QueuedInput] = Field(default_factory=list)
    next_sequence: int = 1
    runs: int = 1
    closing: bool = False
    workflow_version: WorkflowVersion = None
    budgets: list[str] = Field(default_factory=list, exclude_if=lambda v: not v,
                               description="Budget principals of its prompts (a send may name its own).")


class QueuedInput(_Model):
    prompt_id: str
    input: str | None = None
    instructions: str | None = None
    user_id: str | None = None
    budgets: list[str] | None = Field(default=None, exclude_if=lambda v: v is None,
                                      description="Its prompt's budget principals (None: the conversation's).")


class SendRequest(_Model):
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    user_id: str | None = None
    budgets: list[str] | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Budget principals the prompt reserves from (AgentClient looks them up); None: the conversation's."))


ConversationRequest.model_rebuild()
PromptRequest.model_rebuild()
ChildApprovals.model_rebuild()
