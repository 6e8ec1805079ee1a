"""What PromptWorkflow's collaborators ask of the running workflow: its clock, its ids and its effects on
Temporal (the live stream, search attributes, the memo, current details, metrics).

The collaborators (workflows/prompt/record.py, approvals.py, sub_agents.py, round_input.py) carry no Temporal
decorators and take a `Host`; `WorkflowHost` is the real one, inside a workflow. A unit test gives them a
plain one, since no workflow runs there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from temporalio import workflow

from durable_agent.agent.models import Prompt, Usage
from durable_agent.workflows import telemetry
from durable_agent.workflows.pending_memo import PENDING_MEMO_KEY
from durable_agent.workflows.protocol import StreamEvent
from durable_agent.workflows.search_attributes import changed_search_attributes


class Metrics(Protocol):
    """The agent's counters (telemetry.WorkflowMetrics)."""

    def model_round(self, model: str, usage: Usage) -> None: ...
    def tool_call(self, tool: str, outcome: str) -> None: ...
    def approval_requested(self, tool: str) -> None: ...
    def approval_decided(self, tool: str, decision: str, waited: timedelta) -> None: ...
    def prompt_finished(self, state: str) -> None: ...


class Host(Protocol):
    metrics: Metrics

    @property
    def workflow_id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    def now(self) -> datetime: ...
    def random_id(self) -> str:
        """A random id that replays identically (`workflow.uuid4()` on a workflow host)."""
        ...
    def publish(self, event: StreamEvent) -> None: ...
    def upsert_state(self, prompt: Prompt) -> None: ...
    def upsert_memo(self, memo: dict[str, Any]) -> None: ...
    def set_details(self, details: str) -> None: ...


class WorkflowHost:
    """The running workflow (temporalio.workflow), with the stream topic that carries its events."""

    def __init__(self, publish: Callable[[StreamEvent], None]) -> None:
        self._publish = publish
        self.metrics: Metrics = telemetry.WorkflowMetrics()

    @property
    def workflow_id(self) -> str:
        return workflow.info().workflow_id

    @property
    def run_id(self) -> str:
        return workflow.info().run_id

    def now(self) -> datetime:
        return workflow.now()

    def random_id(self) -> str:
        return str(workflow.uuid4())

    def publish(self, event: StreamEvent) -> None:
        self._publish(event)

    def upsert_state(self, prompt: Prompt) -> None:
        """The prompt's search attributes that changed (none upserted when none did)."""
        changed = changed_search_attributes(prompt, workflow.info().typed_search_attributes)
        if changed:
            workflow.upsert_search_attributes(changed)

    def upsert_memo(self, memo: dict[str, Any]) -> None:
        workflow.upsert_memo({PENDING_MEMO_KEY: memo})

    def set_details(self, details: str) -> None:
        workflow.set_current_details(details)
