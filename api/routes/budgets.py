"""HTTP routes for period budgets (client/budgets.py): admins set and remove them; a user reads their own budget
and those of their conversations; an admin reads and lists all."""

from __future__ import annotations

from fastapi import APIRouter, Response

from durable_agent.agent.period_budgets import BudgetLimit, LedgerView
from durable_agent.api.auth import Principal
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, Service
from durable_agent.api.service import AgentService
from durable_agent.client.budgets import BudgetError, BudgetRow, check_principal, list_budgets, set_budget, show_budget
from durable_agent.workflows.names import USER_ID

router = APIRouter(tags=["budgets"])


def _principal(principal: str) -> str:
    try:
        return check_principal(principal)
    except BudgetError as exc:
        raise Problem("invalid-request", str(exc)) from None


def _admin(caller: Principal, what: str) -> None:
    if not caller.is_admin:
        raise Problem("not-allowed", f"only an admin may {what}")


async def _may_read(service: AgentService, caller: Principal, principal: str) -> bool:
    """An admin; the user themself; the user whose conversation it is."""
    if caller.is_admin or principal == f"user:{caller.id}":
        return True
    kind, _, name = principal.partition(":")
    if kind != "conversation":
        return False
    description = await service.describe(name)
    return description is not None and description.typed_search_attributes.get(USER_ID) == caller.id


@router.put("/budgets/{principal}", response_model=LedgerView)
async def put_budget(principal: str, body: BudgetLimit, caller: Caller, service: Service) -> LedgerView:
    """Set the budget of `user:<id>` or `conversation:<id>` (admins only); applies from the next model round."""
    _admin(caller, "set budgets")
    try:
        return await set_budget(service.agent, _principal(principal), body, by=caller.id)
    except BudgetError as exc:
        raise Problem("invalid-request", str(exc)) from None


@router.delete("/budgets/{principal}", status_code=204)
async def delete_budget(principal: str, caller: Caller, service: Service) -> Response:
    """Remove a budget (admins only): prompts under it stop reserving from the next round."""
    _admin(caller, "remove budgets")
    await set_budget(service.agent, _principal(principal), None, by=caller.id)
    return Response(status_code=204)


@router.get("/budgets/{principal}", response_model=LedgerView)
async def get_budget(principal: str, caller: Caller, service: Service) -> LedgerView:
    """A budget and its spend in the current period: an admin's, or the caller's own (user or conversation)."""
    if not await _may_read(service, caller, _principal(principal)):
        raise Problem("not-allowed", f"{caller.id} may not read the budget of {principal}")
    try:
        return await show_budget(service.agent, principal)
    except BudgetError as exc:
        raise Problem("not-found", str(exc)) from None


@router.get("/budgets", response_model=list[BudgetRow])
async def get_budgets(caller: Caller, service: Service) -> list[BudgetRow]:
    """Every budget (an admin), else the caller's own user budget if it has one."""
    rows = await list_budgets(service.agent)
    return rows if caller.is_admin else [row for row in rows if row.principal == f"user:{caller.id}"]
