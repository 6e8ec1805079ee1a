"""The budget ledger (issue 27): one workflow per principal holds a period's budget, reservations and spend.

Real Temporal: the dev server for reserve/settle/refuse and continue-as-new, the time-skipping server for the
period rollover (a day passes in milliseconds). Updates reach the ledger the way the prompt's activities do
(update-with-start), so the first use starts it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.period_budgets import (
    BudgetLimit,
    BudgetStanding,
    Grant,
    LedgerState,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    ledger_id,
    period_end,
    period_start,
)
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel
from durable_agent.client import AgentClient
from durable_agent.client.budgets import BudgetError, budget_limit, list_budgets, set_budget, show_budget
from durable_agent.workflows.budget.access import ledger_update
from durable_agent.workflows.names import BUDGET_LEDGER_WORKFLOW, RESERVE_BUDGET_UPDATE, SETTLE_BUDGET_UPDATE
from tests.support.workers import agent_worker


def _principal() -> str:
    return f"user:ledger-{uuid.uuid4().hex[:8]}"


async def _reserve(client: AgentClient, principal: str, rid: str, grant: Grant | None = None) -> ReserveResult:
    return await ledger_update(client.client, client.settings.task_queue, principal, RESERVE_BUDGET_UPDATE,
                               ReserveRequest(reservation_id=rid, grant=grant), ReserveResult)


async def _settle(client: AgentClient, principal: str, rid: str, tokens: int, cost: float = 0.0) -> BudgetStanding:
    return await ledger_update(client.client, client.settings.task_queue, principal, SETTLE_BUDGET_UPDATE,
                               SettleRequest(reservation_id=rid, tokens=tokens, cost=cost), BudgetStanding)


async def test_reserve_settle_refuse_and_grant(dev_env: WorkflowEnvironment) -> None:
    principal = _principal()
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=ScriptedModel([])) as client:
        # First use starts the ledger (no budget: every round may go ahead).
        free = await _reserve(client, principal, "p1/1")
        assert free.refused is None and free.standing.limit is None and free.standing.reservations == 1

        await set_budget(client, principal, BudgetLimit(period="day", max_tokens=1000, max_cost=2.0), by="admin")
        assert (await _settle(client, principal, "p1/1", 600, 0.5)).spent_tokens == 600
        retried = await _settle(client, principal, "p1/1", 600, 0.5)  # an activity retry: counted once
        assert retried.spent_tokens == 600 and retried.spent_cost == 0.5 and retried.reservations == 0

        assert (await _reserve(client, principal, "p1/2")).refused is None
        await _settle(client, principal, "p1/2", 500)
        refused = await _reserve(client, principal, "p1/3")
        assert refused.refused == f"{principal} daily budget reached: 1100 tokens used of 1000"
        assert refused.standing.reservations == 0  # a refused round holds nothing

        # A grant (an approved request for more) raises this period's allowance, once per grant id.
        grant = Grant(id="p1/more-1", unit="tokens", amount=500)
        assert (await _reserve(client, principal, "p1/3", grant)).refused is None
        again = await _reserve(client, principal, "p1/4", grant)
        assert again.standing.extra_tokens == 500 and again.refused is None

        view = await show_budget(client, principal)
        assert view.standing.spent_tokens == 1100 and view.configured_by == "admin"
        assert view.standing.limit == BudgetLimit(period="day", max_tokens=1000, max_cost=2.0)
        for _ in range(100):  # visibility follows the memo shortly after
            rows = {row.principal: row.limit for row in await list_budgets(client)}
            if principal in rows:
                break
            await asyncio.sleep(0.1)
        assert rows[principal].max_tokens == 1000

        # Another period: this one's spend is kept (it starts the month), not rolled away.
        monthly = await set_budget(client, principal, BudgetLimit(period="month", max_tokens=1000))
        start = monthly.standing.period_start
        assert monthly.standing.spent_tokens == 1100 and start is not None and start.day == 1
        assert monthly.standing.period_end == period_end(start, "month") and monthly.past == []

        await set_budget(client, principal, None)  # removed: rounds go ahead again
        assert (await _reserve(client, principal, "p1/5")).refused is None


async def test_ledger_continues_as_new_with_its_state(dev_env: WorkflowEnvironment) -> None:
    principal = _principal()
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=ScriptedModel([])) as client:
        await client.client.start_workflow(BUDGET_LEDGER_WORKFLOW, LedgerState(principal=principal, updates_per_run=3),
                                           id=ledger_id(principal), task_queue=client.settings.task_queue)
        await set_budget(client, principal, BudgetLimit(period="month", max_tokens=10_000))
        for n in range(1, 8):
            await _reserve(client, principal, f"r{n}")
            await _settle(client, principal, f"r{n}", 100)
        view = await show_budget(client, principal)
        assert view.runs >= 3, "the ledger continued as new"
        assert view.standing.spent_tokens == 700 and view.standing.reservations == 0
        description = await client.client.get_workflow_handle(ledger_id(principal)).describe()
        assert description.status == WorkflowExecutionStatus.RUNNING


async def test_period_rolls_over_at_the_utc_day(skip_env: WorkflowEnvironment) -> None:
    principal = _principal()
    async with agent_worker(skip_env, plugins=[Plugin("none")], model=ScriptedModel([])) as client:
        try:
            await _roll_over(skip_env, client, principal)
        finally:  # a ledger left with no worker holds the shared time-skipping server's clock at its day end
            await client.client.get_workflow_handle(ledger_id(principal)).terminate("test over")


async def _roll_over(skip_env: WorkflowEnvironment, client: AgentClient, principal: str) -> None:
    """Spend past the day's budget, skip a day: a new period with nothing spent, the last one kept."""
    await set_budget(client, principal, BudgetLimit(period="day", max_tokens=100))
    await _reserve(client, principal, "a")
    await _settle(client, principal, "a", 150)
    assert (await _reserve(client, principal, "b")).refused is not None
    first = (await show_budget(client, principal)).standing.period_start
    await skip_env.sleep(timedelta(days=1, minutes=1))
    view = await show_budget(client, principal)
    assert view.standing.period_start == first + timedelta(days=1)
    assert view.standing.spent_tokens == 0
    assert [p.spent_tokens for p in view.past] == [150]
    assert (await _reserve(client, principal, "c")).refused is None

def test_periods_and_specs() -> None:
    now = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)  # a Thursday
    assert period_start(now, "day") == datetime(2026, 11, 26, tzinfo=UTC)
    assert period_start(now, "week") == datetime(2026, 11, 23, tzinfo=UTC)
    assert period_start(now, "month") == datetime(2026, 11, 1, tzinfo=UTC)
    assert period_end(datetime(2026, 12, 1, tzinfo=UTC), "month") == datetime(2027, 1, 1, tzinfo=UTC)
    assert period_end(datetime(2026, 1, 1, tzinfo=UTC), "month") == datetime(2026, 2, 1, tzinfo=UTC)
    with pytest.raises(BudgetError, match=r"^give max_tokens and/or max_cost$"):
        budget_limit(period="day")
    with pytest.raises(BudgetError, match=r"^period: Input should be 'day', 'week' or 'month'$"):
        budget_limit(period="year", max_tokens=5)
    with pytest.raises(BudgetError, match=r"^on_exhausted=ask needs approvers"):
        budget_limit(max_tokens=5, on_exhausted="ask")
    with pytest.raises(BudgetError, match=r"^approvers: approver 'bob' must be user:<id> or role:<name>$"):
        budget_limit(max_tokens=5, on_exhausted="ask", approvers=["bob"])
