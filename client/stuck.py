"""Finding and explaining workflows whose workflow task keeps failing (the one failure code cannot prevent).

Bad input and bugs in workflow code end as a recorded refusal or a failed prompt. A workflow task can still
fail on every attempt for reasons outside the workflow, e.g. a payload blob missing from external storage
(a client and a worker that do not share the payload store). Such a prompt stays Running; these helpers
find it (the server's `TemporalReportedProblems` search attribute, set after consecutive task failures)
and read the reason (the last WorkflowTaskFailed event).
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionStatus

REPORTED_PROBLEMS = "TemporalReportedProblems"
HISTORY_EVENTS_SCANNED = 100


@dataclass(frozen=True)
class TaskProblem:
    """A running workflow whose workflow task is failing: how many attempts so far, and why."""

    workflow_id: str
    workflow_type: str
    attempt: int
    reason: str


async def task_problem(client: Client, workflow_id: str) -> TaskProblem | None:
    """The workflow's failing workflow task, or None when its tasks complete normally."""
    description = await client.get_workflow_handle(workflow_id).describe()
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    attempt = description.raw_description.pending_workflow_task.attempt
    if attempt < 2:
        return None
    reason = await _last_task_failure(client, workflow_id, description.run_id)
    return TaskProblem(workflow_id=workflow_id, workflow_type=description.workflow_type, attempt=attempt,
                       reason=reason or "the workflow task keeps failing (no failure recorded yet)")


async def workflows_with_task_problems(client: Client, workflow_types: tuple[str, ...]) -> list[TaskProblem]:
    """Running workflows of these types that the server reports as having workflow task problems."""
    types = " OR ".join(f"WorkflowType = '{t}'" for t in workflow_types)
    query = f"({types}) AND ExecutionStatus = 'Running' AND {REPORTED_PROBLEMS} IS NOT NULL"
    found = [await task_problem(client, execution.id) async for execution in client.list_workflows(query)]
    return [problem for problem in found if problem is not None]


async def _last_task_failure(client: Client, workflow_id: str, run_id: str | None) -> str | None:
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id or ""),
        maximum_page_size=HISTORY_EVENTS_SCANNED)
    response = await client.workflow_service.get_workflow_execution_history_reverse(request, retry=True)
    for event in response.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failure = event.workflow_task_failed_event_attributes.failure
            return failure.message or failure.cause.message or None
    return None
