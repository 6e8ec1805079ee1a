"""Payloads at the workflow's boundaries: its input, its signals/updates, and its activities.

Every workflow, signal, update and activity takes one model, so a field with a default can be added later
without breaking the replay of running workflows (recorded payloads lack it and read as the default). The
models are strict (agent/strict.py): a worker refuses a field it does not know, so a new field reaches only
workers that know it — upgrade every worker of a queue before new workflows send it
(docs/changing-workflows.md). The models live in smaller modules, one per boundary; this module is the one
place to import them from:
- wire/inputs.py: the workflows' inputs (PromptRequest, ConversationRequest) and history references;
- wire/decisions.py: steering, decisions, a sub-agent's report, the waiting-call listing;
- wire/calls.py: planned tool calls and the tool activity's input and result;
- wire/rounds.py: the model round's input and result, with its next step;
- wire/stream.py: the live event stream, streaming text, tool progress, transcript pages;
- wire/lean.py: lean serialisation (fields at their defaults stay off the wire).
"""

from __future__ import annotations

from durable_agent.workflows.wire.calls import (
    CallNeedingApproval,
    CorrectionCheck,
    CorrectionVerdict,
    InvalidCall,
    PlannedCall,
    ReadyCall,
    SideOutput,
    ToolInvocation,
    ToolInvocationResult,
)
from durable_agent.workflows.wire.decisions import (
    ApproveRequest,
    ChildApprovals,
    PendingApproval,
    RejectRequest,
    SteerRequest,
)
from durable_agent.workflows.wire.inputs import (
    DEFAULT_MAX_ROUNDS,
    MAX_INPUT_CHARS,
    ConversationRequest,
    HistoryLink,
    HistoryRef,
    ModelRouting,
    OptionalRouting,
    ParentLink,
    PromptRequest,
    QueuedInput,
    SendRequest,
    StoreHistoryRequest,
    SubAgentCall,
    WorkflowVersion,
)
from durable_agent.workflows.wire.rounds import (
    FinalAnswer,
    NextStep,
    OutputChange,
    RetryForSchema,
    RoundInput,
    RoundResult,
    RunTools,
    ToolThenModel,
    ToolThenModelResult,
)
from durable_agent.workflows.wire.stream import (
    EventDelivery,
    StreamEvent,
    StreamingText,
    TextDelta,
    ToolProgress,
    TranscriptItem,
    TranscriptPage,
    TranscriptPageRequest,
)

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "MAX_INPUT_CHARS",
    "ApproveRequest",
    "CallNeedingApproval",
    "ChildApprovals",
    "ConversationRequest",
    "CorrectionCheck",
    "CorrectionVerdict",
    "EventDelivery",
    "FinalAnswer",
    "HistoryLink",
    "HistoryRef",
    "InvalidCall",
    "ModelRouting",
    "NextStep",
    "OptionalRouting",
    "OutputChange",
    "ParentLink",
    "PendingApproval",
    "PlannedCall",
    "PromptRequest",
    "QueuedInput",
    "ReadyCall",
    "RejectRequest",
    "RetryForSchema",
    "RoundInput",
    "RoundResult",
    "RunTools",
    "SendRequest",
    "SideOutput",
    "SteerRequest",
    "StoreHistoryRequest",
    "StreamEvent",
    "StreamingText",
    "SubAgentCall",
    "TextDelta",
    "ToolInvocation",
    "ToolInvocationResult",
    "ToolProgress",
    "ToolThenModel",
    "ToolThenModelResult",
    "TranscriptItem",
    "TranscriptPage",
    "TranscriptPageRequest",
    "WorkflowVersion",
]
