"""Payloads at the workflow's boundaries: its input, its signals/updates, and its activities.

Every workflow, signal, update and activity takes one model, so a field with a default can be added later
without breaking the replay of running workflows (recorded payloads lack it and read as the default). The
models are strict (agent/strict.py): a worker refuses a field it does not know, so a new field reaches only
workers that know it — upgrade every worker of a queue before new workflows send it
(docs/changing-workflows.md). The models live in wire/, one module per boundary (the imports below name each
module's models; docs/code-map.md says what each is for); this module is the one place to import them from
(every name imported here is exported).
"""

# ruff: noqa: F401  (every import is a re-export)
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
