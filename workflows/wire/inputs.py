"""The workflows' inputs: a prompt's, a conversation's, and the references to earlier prompts they carry.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
    JsonValue,
)

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import (
    ModelTier,
    Prompt,
    ScheduledPrompt,
    Usage,
)
from durable_agent.agent.period_budgets import principal_problem
from durable_agent.agent.providers.specs import provider_of
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)
from durable_agent.workflows.budget.limits import PromptBudget
from durable_agent.workflows.wire.lean import Lean as _Lean

DEFAULT_MAX_ROUNDS = 10
MAX_INPUT_CHARS = 100_000  # far below Temporal's 2 MB payload limit, so a huge paste fails clearly at start


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
def _principal(value: str) -> str:
    if (problem := principal_problem(value)) is not None:
        raise ValueError(problem)
    return value


Principal = Annotated[str, AfterValidator(_principal)]  # `user:<id>` or `conversation:<id>` (a budget's owner)
WorkflowVersion = Annotated[int | None, Field(
    description="The workflow behaviour this run has (workflows/versioning/versions.py); set by AgentClient and "
    "by parent workflows. None: patch markers decide (a raw client's start).")]


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


class PromptRequest(_Lean):
    """Input of `PromptWorkflow`. Only `input` (or nothing, for system-initiated prompts) is needed."""

    prompt_id: str | None = Field(default=None, description="Defaults to the workflow id.")
    user_id: str = "anonymous"
    conversation_id: str | None = None
    model: ModelTier = "normal"
    model_settings: ModelSettings | None = Field(default=None, description="Over the tier's settings.")
    model_task_queue: str | None = Field(default=None, description="Where model calls run; None: this queue.")
    model_routing: OptionalRouting = None
    model_local: bool = Field(default=False, exclude_if=lambda v: not v, description=(
        "Model calls as local activities, inside the workflow task that takes the tools' results (one workflow "
        "task per tool round, no streamed text); ignored when model calls have a queue of their own."))
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
    budget: PromptBudget | None = Field(default=None, description="Token/cost limits (workflows/budget/limits.py).")
    budgets: list[Principal] = Field(default_factory=list, exclude_if=lambda v: not v, description=(
        "Principals (`user:<id>`, `conversation:<id>`) whose period budget each model round reserves from "
        "(agent/period_budgets.py); empty: no ledger is asked."))
    conversation_schedule: list[ScheduledPrompt] = Field(default_factory=list, exclude_if=lambda v: not v,
                                                         description=(
        "Its conversation's scheduled prompts that had not fired when this prompt started, each with its fire_at "
        "(what its tools read as `ToolContext.conversation_schedule`)."))


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


class ConversationRequest(_Model):
    """Input of `ConversationWorkflow`; also what continue-as-new carries to the next run."""

    conversation_id: str | None = Field(default=None, description="Defaults to the workflow id.")
    user_id: str = "anonymous"
    model: ModelTier = "normal"
    model_settings: ModelSettings | None = None
    model_task_queue: str | None = None
    model_routing: OptionalRouting = None
    model_local: bool = Field(default=False, exclude_if=lambda v: not v,
                              description="Its prompts' model calls as local activities (`PromptRequest`).")
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
    budgets: list[Principal] = Field(default_factory=list, exclude_if=lambda v: not v,
                                     description="Budget principals of its prompts (a send may name its own).")
    scheduled: list[ScheduledPrompt] = Field(default_factory=list, exclude_if=lambda v: not v,
                                             description="Scheduled prompts not fired yet (each with its fire_at).")


class QueuedInput(_Model):
    prompt_id: str
    input: str | None = None
    instructions: str | None = None
    user_id: str | None = None
    budgets: list[Principal] | None = Field(default=None, exclude_if=lambda v: v is None,
                                            description="Its prompt's budget principals (None: the conversation's).")


class SendRequest(_Model):
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    user_id: str | None = None
    budgets: list[Principal] | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "Budget principals the prompt reserves from (AgentClient looks them up); None: the conversation's."))


ConversationRequest.model_rebuild()
PromptRequest.model_rebuild()
