"""Budgets over a period, from the client side: set, show and list them; find the ones a new prompt is under.

Each principal's budget lives in its ledger workflow (workflows/budget/ledger.py); setting one starts the ledger
if needed (update-with-start). A prompt started by `AgentClient` names the principals whose ledger has a budget
(`PromptRequest.budgets`), found with one describe per candidate: a prompt with none reserves nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.ids import IdTaken
from durable_agent.agent.period_budgets import (
    BudgetLimit,
    BudgetStanding,
    ConfigureRequest,
    LedgerView,
    ledger_id,
    ledger_principal,
    principal_problem,
    principals_for,
)
from durable_agent.config.connection import described
from durable_agent.workflows.budget.access import check_ledger, ledger_update
from durable_agent.workflows.names import (
    BUDGET_LEDGER_WORKFLOW,
    BUDGET_MEMO,
    BUDGET_STATE_QUERY,
    CONFIGURE_BUDGET_UPDATE,
    USER_ID,
)

if TYPE_CHECKING:
    from durable_agent.client._client import AgentClient

__all__ = ["BudgetError", "BudgetRow", "applying_budgets", "budget_limit", "list_budgets", "set_budget",
           "show_budget"]


class BudgetError(ValueError):
    """A budget spec or principal that cannot be used, in one line."""


class BudgetRow(BaseModel):
    principal: str
    limit: BudgetLimit


def check_principal(principal: str) -> str:
    if (problem := principal_problem(principal)) is not None:
        raise BudgetError(problem)
    return principal


def budget_limit(**fields: object) -> BudgetLimit:
    """A `BudgetLimit` from loose fields (None: not given), or a one-line `BudgetError`."""
    try:
        return BudgetLimit.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        raise BudgetError(f"{where}: {message}" if where else message) from None


async def set_budget(agent: AgentClient, principal: str, limit: BudgetLimit | None, *,
                     by: str | None = None) -> LedgerView:
    """Set (`limit` None: remove) the principal's budget; applies from the next round of any prompt under it.
    Removing a budget that was never set starts no ledger."""
    check_principal(principal)
    if limit is None and await described(agent.client.get_workflow_handle(ledger_id(principal))) is None:
        return LedgerView(standing=BudgetStanding(principal=principal))
    try:
        return await ledger_update(agent.client, agent.settings.task_queue, principal, CONFIGURE_BUDGET_UPDATE,
                                   ConfigureRequest(principal=principal, limit=limit, by=by), LedgerView)
    except WorkflowUpdateFailedError as exc:
        raise BudgetError(str(exc.cause or exc)) from None


async def show_budget(agent: AgentClient, principal: str) -> LedgerView:
    """The principal's budget and spend in the current period (`BudgetError` when it has no ledger, `IdTaken`
    when another workflow holds its id)."""
    check_principal(principal)
    handle = agent.client.get_workflow_handle(ledger_id(principal))
    try:
        view: LedgerView = await handle.query(BUDGET_STATE_QUERY, result_type=LedgerView)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise BudgetError(f"no budget for {principal}") from None
        raise
    except Exception:
        await check_ledger(agent.client, principal)
        raise
    return view


async def list_budgets(agent: AgentClient) -> list[BudgetRow]:
    """Every principal with a budget (from the ledgers' memos: no worker needed)."""
    rows = []
    query = f"WorkflowType = '{BUDGET_LEDGER_WORKFLOW}' AND ExecutionStatus = 'Running'"
    async for execution in agent.client.list_workflows(query):
        memo = await execution.memo()
        limit = memo.get(BUDGET_MEMO)
        principal = ledger_principal(execution.id)
        if limit and principal is not None:
            rows.append(BudgetRow(principal=principal, limit=BudgetLimit.model_validate(limit)))
    return sorted(rows, key=lambda row: row.principal)


async def applying_budgets(client: Client, user_id: str | None, conversation_id: str | None) -> list[str]:
    """The principals (the user's, the conversation's) whose ledger runs with a budget right now: one describe
    each (a conversation's user, when not given, from its `UserId` search attribute). `IdTaken` when another
    workflow runs at a ledger's id: the prompt would otherwise run without the budget."""
    if user_id is None and conversation_id:
        conversation = await described(client.get_workflow_handle(conversation_id))
        user_id = conversation.typed_search_attributes.get(USER_ID) if conversation else None
    found = []
    for principal in principals_for(user_id, conversation_id):
        description = await described(client.get_workflow_handle(ledger_id(principal)))
        if description is None or description.status != WorkflowExecutionStatus.RUNNING:
            continue
        if description.workflow_type != BUDGET_LEDGER_WORKFLOW:
            raise IdTaken(description.id, f"budget ledger of {principal}", description.workflow_type)
        if await description.memo_value(BUDGET_MEMO, None):
            found.append(principal)
    return found
