"""How a client or an activity reaches a principal's budget ledger: an update with start (USE_EXISTING), so
the ledger exists on first use. Used outside workflow code only (client/budgets.py, activities)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy

from durable_agent.agent.period_budgets import LedgerState, ledger_id
from durable_agent.workflows.names import BUDGET_LEDGER_WORKFLOW

ResultT = TypeVar("ResultT", bound=BaseModel)


async def ledger_update(client: Client, task_queue: str, principal: str, update: str, request: BaseModel,
                        result_type: type[ResultT]) -> ResultT:
    """Run `update` on the principal's ledger, starting the ledger first if it does not run yet."""
    start = WithStartWorkflowOperation(
        BUDGET_LEDGER_WORKFLOW, LedgerState(principal=principal), id=ledger_id(principal), task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING, static_summary=f"budget of {principal}")
    result: ResultT = await client.execute_update_with_start_workflow(
        update, request, start_workflow_operation=start, result_type=result_type)
    return result


__all__ = ["ledger_update"]
