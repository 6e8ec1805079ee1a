"""One model round: what the model activity is sent and what it answers, with the step it decides next."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue

from durable_agent.agent.model_settings import ModelSettings
from durable_agent.agent.models import Prompt, ReasoningOutput, Usage
from durable_agent.agent.strict import StrictModel as _Model
from durable_agent.workflows.wire.calls import PlannedCall, ToolInvocation, ToolInvocationResult
from durable_agent.workflows.wire.inputs import HistoryRef
from durable_agent.workflows.wire.lean import Lean as _Lean
from durable_agent.workflows.wire.lean import LeanHeader, LeanOutput, LeanUsage


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


class FinalAnswer(_Model):
    """No tool calls: the text (and, with an output schema, `data`) is the answer."""

    kind: Literal["final"] = "final"
    data: JsonValue = Field(default=None, description="The answer's structured data (with an output schema).")


class RetryForSchema(_Model):
    """The answer did not match the output schema: tell the model why and let it answer again."""

    kind: Literal["retry_for_schema"] = "retry_for_schema"
    reason: str = Field(description="How the answer missed the schema, as the model is told.")


class RunTools(_Model):
    """Run these calls in order (each one invalid, needing approval, or ready)."""

    kind: Literal["run_tools"] = "run_tools"
    calls: list[PlannedCall]


NextStep = Annotated[FinalAnswer | RetryForSchema | RunTools, Field(discriminator="kind")]


class RoundResult(_Lean):
    """A model round's answer and what the prompt does next (`next`, decided by the worker: run tools, accept the
    answer, or ask again)."""

    reasoning: list[ReasoningOutput] = Field(default_factory=list)
    text: str | None = None
    next: NextStep = Field(default_factory=FinalAnswer)
    usage: LeanUsage = Field(default_factory=Usage)
    plugin_state: dict[str, JsonValue] = Field(default_factory=dict)
    model: str = ""
    spec: str = Field(default="", description="The provider:model that answered.")
    fallback: int = 0
    settings: ModelSettings | None = None
    event_hooks: bool = False


class ToolThenModel(_Lean):
    """One activity for a round's only call and the next model round (`dagent.tool_then_model`): the tool runs,
    its result is checkpointed in the heartbeat details, then the model is called on `round` with the tool's
    entry resolved and its side outputs appended. The model part is best effort: whatever stops it (a worker
    without the transcript, a model error) leaves `ToolThenModelResult.round` empty and the workflow calls
    the model as usual."""

    call: ToolInvocation
    tool_timeout_seconds: float = Field(description="The call's own timeout: its tool's part of the activity is "
                                                    "stopped and the attempt fails once it has run this long.")
    entry_index: int = Field(description="The call's entry in the record (in `round.changes`, still open).")
    round: RoundInput = Field(description="The next model round's input as if the call had not finished yet.")
    stop_on_error: bool = Field(default=False, description="The call's failure mode is `fail`: a tool error ends "
                                                           "the prompt, so no model round follows it.")


class ToolThenModelResult(_Lean):
    tool: ToolInvocationResult
    round: RoundResult | None = Field(default=None, description="The next model round's result (None: not called).")
    skipped: str | None = Field(default=None, description="Why the model was not called here.")
