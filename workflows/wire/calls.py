"""Tool calls as the worker planned them, and the tool activity's input and result.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, WrapSerializer

from durable_agent.agent.models import (
    ApprovalRequest,
    FileOutput,
    PromptRef,
    ScheduledPrompt,
    ToolError,
    ToolSuccess,
    WidgetOutput,
)
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)
from durable_agent.agent.tools import DEFAULT_OPTIONS, ToolOptions
from durable_agent.workflows.wire.inputs import SubAgentCall
from durable_agent.workflows.wire.lean import Lean as _Lean
from durable_agent.workflows.wire.lean import lean_model

# A planned call's options: the tool's, `local` decided (False unless the worker chose a local activity).
PLANNED_DEFAULTS = DEFAULT_OPTIONS.model_copy(update={"local": False})
# Options nested in a lean call: only those that differ from ToolOptions' defaults go on the wire.
LeanOptions = Annotated[ToolOptions, WrapSerializer(lean_model)]


class _CallBase(_Lean):
    """A tool call from the model as the worker checked it, tagged by `kind`. Fields at their defaults stay off
    the wire (the tag always goes)."""

    id: str
    tool: str
    input: JsonValue = None
    plugin: str | None = None
    options: LeanOptions = Field(default=PLANNED_DEFAULTS, description=(
        "The tool's options (agent/tools.py ToolOptions), `local` as the worker decided it (never None here)."))
    fast: bool = Field(default=False, description=(
        "Local only because the worker saw the tool's calls finish fast (fast tools), not because the tool says "
        "`local=True`: the workflow may run it with the next model round in one activity instead."))
    agent: SubAgentCall | None = Field(default=None, description="A sub-agent: runs as a child prompt.")


class InvalidCall(_CallBase):
    """Not run: unknown tool, or arguments that do not fit; `error` goes back to the model."""

    kind: Literal["invalid"] = "invalid"
    error: str
    approval: None = None


class CallNeedingApproval(_CallBase):
    """Runs only after a person approves it."""

    kind: Literal["approval"] = "approval"
    error: None = None
    approval: ApprovalRequest = Field(description="Built once, when the worker planned the call.")
    input_schema: dict[str, JsonValue] | None = Field(
        default=None, description="The tool's input JSON schema: an approver's correction is checked against it.")


class ReadyCall(_CallBase):
    """Runs now."""

    kind: Literal["ready"] = "ready"
    error: None = None
    approval: None = None


PlannedCall = Annotated[InvalidCall | CallNeedingApproval | ReadyCall, Field(discriminator="kind")]


class ToolInvocation(PromptRef, _Lean):
    """The tool activity's input: which prompt (flat), and only what the activity cannot derive. Fields at
    their defaults stay off the wire. The workflow id (idempotency key), the heartbeat timeout and the attempt
    come from the activity's info; the call's other policy fields (timeout, failure mode, local, sequential)
    are the workflow's business."""

    id: str = Field(description="The call's id in the prompt.")
    tool: str
    plugin: str | None = None
    input: JsonValue = Field(default=None, description="The arguments (as corrected by an approver).")
    plugin_state: JsonValue = None
    max_attempts: int = Field(default=1, description="The tool's own attempts (an MCP server that is down).")
    conversation_schedule: list[ScheduledPrompt] = Field(default_factory=list, exclude_if=lambda v: not v,
                                                         description="As the prompt's request gives it.")


SideOutput = Annotated[FileOutput | WidgetOutput | ScheduledPrompt, Field(discriminator="type")]


class CorrectionCheck(_Model):
    """Input of the correction-check activity: the tool's approval policy, run again on corrected arguments."""

    tool: str
    plugin: str | None = None
    input: JsonValue = Field(description="The arguments as the approver corrected them (merged).")


class CorrectionVerdict(_Model):
    """What the policy says of corrected arguments: the approval they need (None: none), or why they cannot
    be approved at all (`problem`: invalid arguments, a policy that raised, a tool this worker lacks)."""

    requirement: ApprovalRequest | None = None
    problem: str | None = None


class ToolInvocationResult(_Lean):
    result: Annotated[ToolSuccess | ToolError, Field(discriminator="type")]
    side_outputs: list[SideOutput] = Field(default_factory=list)
    plugin_state: JsonValue = None
    state_changed: bool = False
