"""Unit tests of PromptWorkflow's collaborators (workflows/prompt/record.py, approvals.py, sub_agents.py,
round_input.py): plain objects, no Temporal server, no workflow. They run in seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_agent.agent.models import Prompt, Usage
from durable_agent.workflows.protocol import StreamEvent


class CountingMetrics:
    """The agent's counters as calls recorded in a list (telemetry.WorkflowMetrics needs a workflow's meter)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def model_round(self, model: str, usage: Usage) -> None:
        self.calls.append(("model_round", (model,)))

    def tool_call(self, tool: str, outcome: str) -> None:
        self.calls.append(("tool_call", (tool, outcome)))

    def approval_requested(self, tool: str) -> None:
        self.calls.append(("approval_requested", (tool,)))

    def approval_decided(self, tool: str, decision: str, waited: timedelta) -> None:
        self.calls.append(("approval_decided", (tool, decision)))

    def prompt_finished(self, state: str) -> None:
        self.calls.append(("prompt_finished", (state,)))


class PlainHost:
    """A stand-in for the running workflow (workflows/prompt/host.py WorkflowHost), since no workflow runs in a unit
    test: a clock the test moves, fixed ids, and the effects on Temporal kept in lists to assert on."""

    def __init__(self) -> None:
        self.clock = datetime(2026, 1, 1, tzinfo=UTC)
        self.workflow_id = "wf-1"
        self.run_id = "run-1"
        self.metrics = CountingMetrics()
        self.events: list[StreamEvent] = []
        self.states: list[str] = []
        self.memos: list[dict[str, Any]] = []
        self.details: list[str] = []
        self._uuids = 0

    def now(self) -> datetime:
        return self.clock

    def random_id(self) -> str:
        self._uuids += 1
        return f"uuid-{self._uuids}"

    def publish(self, event: StreamEvent) -> None:
        self.events.append(event)

    def upsert_state(self, prompt: Prompt) -> None:
        self.states.append(prompt.state)

    def upsert_memo(self, memo: dict[str, Any]) -> None:
        self.memos.append(memo)

    def set_details(self, details: str) -> None:
        self.details.append(details)


@pytest.fixture
def host() -> PlainHost:
    return PlainHost()
