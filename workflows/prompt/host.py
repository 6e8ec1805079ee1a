"""What PromptWorkflow's rooms ask of the running workflow: its clock, its ids and every effect on Temporal
(activities, durable waits, child prompts, signals, background work, the live stream, search attributes, the
memo, current details, metrics, the replay-safe log).

The rooms (record.py, approvals.py, decision_checks.py, notifications.py, sub_agents.py, round_input.py,
tool_runner.py, steering.py and workflows/budget/gate.py) carry no Temporal decorators and take a `Host`;
`WorkflowHost` is the real one, inside a workflow. Within workflows/prompt/ only this module and the conductor
(workflow.py) import `temporalio.workflow` (tests/unit/test_layers.py), so a unit test runs the rooms' logic,
waits and activities included, on a plain host with no server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Generator
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.converter import PayloadConverter
from temporalio.workflow import ActivityCancellationType, ParentClosePolicy

from durable_agent.agent.models import Prompt, Usage
from durable_agent.workflows import names, telemetry
from durable_agent.workflows.activity_refs import ActivityRef
from durable_agent.workflows.pending_memo import PENDING_MEMO_KEY
from durable_agent.workflows.protocol import PromptRequest, StreamEvent
from durable_agent.workflows.search_attributes import changed_search_attributes

InputT = TypeVar("InputT")
ResultT = TypeVar("ResultT")


class Metrics(Protocol):
    """The agent's counters (telemetry.WorkflowMetrics)."""

    def model_round(self, model: str, usage: Usage) -> None: ...
    def tool_call(self, tool: str, outcome: str) -> None: ...
    def approval_requested(self, tool: str) -> None: ...
    def approval_decided(self, tool: str, decision: str, waited: timedelta) -> None: ...
    def prompt_finished(self, state: str) -> None: ...


class ChildRun(Protocol):
    """A started child prompt: its first run's id, and its record once it ends (awaited)."""

    @property
    def first_execution_run_id(self) -> str | None: ...
    def __await__(self) -> Generator[Any, Any, Prompt]: ...


class Host(Protocol):
    metrics: Metrics
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger]

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

    async def run_activity(self, activity: ActivityRef[InputT, ResultT], arg: InputT, *, summary: str,
                           start_to_close_timeout: timedelta, retry_policy: RetryPolicy,
                           heartbeat_timeout: timedelta | None = None, task_queue: str | None = None,
                           local: bool = False, wait_for_cancellation: bool = False) -> ResultT:
        """Its failure raises `ActivityError`; `wait_for_cancellation`: a cancelled attempt finishes and counts."""
        ...
    async def wait(self, condition: Callable[[], bool], timeout: timedelta | None = None,
                   summary: str | None = None) -> bool:
        """Wait durably until `condition()`; False when `timeout` passed first (a timer named `summary`)."""
        ...
    async def sleep(self, duration: timedelta, summary: str) -> None: ...
    async def start_child(self, request: PromptRequest, *, id: str, summary: str, memo: dict[str, Any]
                          ) -> ChildRun:
        """Start a child PromptWorkflow (cancelled with this one); raises `WorkflowAlreadyStartedError` when
        `id` is taken."""
        ...
    async def signal(self, workflow_id: str, signal: str, arg: object) -> None: ...
    def spawn(self, work: Awaitable[None]) -> None:
        """Run `work` in the background of the workflow (its failure is the workflow task's)."""
        ...


class WorkflowHost:
    """The running workflow (temporalio.workflow), with the stream topic that carries its events."""

    def __init__(self, publish: Callable[[StreamEvent], None]) -> None:
        self.publish = publish
        self.metrics: Metrics = telemetry.WorkflowMetrics()
        self.logger = workflow.logger
        self._background: set[asyncio.Task[None]] = set()

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

    def upsert_state(self, prompt: Prompt) -> None:
        """The prompt's search attributes that changed (none upserted when none did)."""
        changed = changed_search_attributes(prompt, workflow.info().typed_search_attributes)
        if changed:
            workflow.upsert_search_attributes(changed)

    def upsert_memo(self, memo: dict[str, Any]) -> None:
        workflow.upsert_memo({PENDING_MEMO_KEY: memo})

    def set_details(self, details: str) -> None:
        workflow.set_current_details(details)

    async def run_activity(self, activity: ActivityRef[InputT, ResultT], arg: InputT, *, summary: str,
                           start_to_close_timeout: timedelta, retry_policy: RetryPolicy,
                           heartbeat_timeout: timedelta | None = None, task_queue: str | None = None,
                           local: bool = False, wait_for_cancellation: bool = False) -> ResultT:
        if local:  # the result is converted to `activity.result_type`
            return await workflow.execute_local_activity(  # type: ignore[no-any-return]
                activity.name, arg, result_type=activity.result_type, start_to_close_timeout=start_to_close_timeout,
                retry_policy=retry_policy, summary=summary)
        return await workflow.execute_activity(  # type: ignore[no-any-return]
            activity.name, arg, result_type=activity.result_type, start_to_close_timeout=start_to_close_timeout,
            heartbeat_timeout=heartbeat_timeout, retry_policy=retry_policy, task_queue=task_queue,
            summary=summary, cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
            if wait_for_cancellation else ActivityCancellationType.TRY_CANCEL)

    async def wait(self, condition: Callable[[], bool], timeout: timedelta | None = None,
                   summary: str | None = None) -> bool:
        try:
            await workflow.wait_condition(condition, timeout=timeout, timeout_summary=summary)
        except TimeoutError:
            return False
        return True

    async def sleep(self, duration: timedelta, summary: str) -> None:
        await workflow.sleep(duration, summary=summary)

    async def start_child(self, request: PromptRequest, *, id: str, summary: str, memo: dict[str, Any]
                          ) -> ChildRun:
        return await workflow.start_child_workflow(
            names.PROMPT_WORKFLOW, request, id=id, result_type=Prompt,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL, static_summary=summary, memo=memo)

    async def signal(self, workflow_id: str, signal: str, arg: object) -> None:
        await workflow.get_external_workflow_handle(workflow_id).signal(signal, arg)

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def native_imports() -> AbstractContextManager[None]:
    """Imports made inside reach the real modules, not the workflow sandbox's copies (for code that imports from
    native code as it runs, e.g. a signature check); outside a workflow, no effect."""
    return workflow.unsafe.imports_passed_through()


def payload_converter() -> PayloadConverter | None:
    """The running workflow's payload converter (the user's, when they passed one); None outside a workflow."""
    return workflow.payload_converter() if workflow.in_workflow() else None
