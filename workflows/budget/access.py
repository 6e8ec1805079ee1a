"""How a client or an activity reaches a principal's budget ledger: an update with start (USE_EXISTING), so
the ledger exists on first use. Used outside workflow code only (client/budgets.py, activities).

The ledger's id is derived (`dagent-budget-...`, a reserved prefix no API caller may choose), but anyone with
raw Temporal access can start another workflow there: whatever fails is checked against the type that runs at
the id, and a squatter is `IdTaken` (never "no budget", never the worker's own error text)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.ids import IdTaken
from durable_agent.agent.period_budgets import LedgerState, ledger_id
from durable_agent.workflows.names import BUDGET_LEDGER_WORKFLOW

ResultT = TypeVar("ResultT", bound=BaseModel)


async def check_ledger(client: Client, principal: str) -> None:
    """`IdTaken` when a running workflow of another type holds the principal's ledger id."""
    workflow_id = ledger_id(principal)
    try:
        found = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return
        raise
    if found.status == WorkflowExecutionStatus.RUNNING and found.workflow_type != BUDGET_LEDGER_WORKFLOW:
        raise IdTaken(workflow_id, f"budget ledger of {principal}", found.workflow_type)


async def ledger_update(client: Client, task_queue: str, principal: str, update: str, request: BaseModel,
                        result_type: type[ResultT]) -> ResultT:
    """Run `update` on the principal's ledger, starting the ledger first if it does not run yet."""
    start = WithStartWorkflowOperation(
        BUDGET_LEDGER_WORKFLOW, LedgerState(principal=principal), id=ledger_id(principal), task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, static_summary=f"budget of {principal}")
    try:
        result: ResultT = await client.execute_update_with_start_workflow(
            update, request, start_workflow_operation=start, result_type=result_type)
    except Exception:
        await check_ledger(client, principal)  # a squatter's "no such update handler" is IdTaken
        raise
    return result


__all__ = ["check_ledger", "ledger_update"]
