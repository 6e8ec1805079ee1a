"""The prompt's way to its principals' budget ledgers: reserve before a model round, settle after it.

Both reach each ledger with update-with-start (USE_EXISTING), so a ledger exists on first use; both are
idempotent by reservation id, so an activity retry neither reserves nor counts twice. Only prompts whose
request names budget principals schedule them (workflows/budget/gate.py).
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent.agent.ids import IdTaken
from durable_agent.agent.logging import get_logger
from durable_agent.agent.period_budgets import (
    BudgetRound,
    BudgetRoundResult,
    BudgetSettlement,
    BudgetStanding,
    ReserveRequest,
    ReserveResult,
    SettleRequest,
    standing_refusal,
)
from durable_agent.workflows.budget.access import ledger_update
from durable_agent.workflows.names import (
    BUDGET_RESERVE_ACTIVITY,
    BUDGET_SETTLE_ACTIVITY,
    RESERVE_BUDGET_UPDATE,
    SETTLE_BUDGET_UPDATE,
)

log = get_logger("dagent.budgets")


class BudgetActivities:
    """`dagent.budget_reserve` and `dagent.budget_settle` (registered with the agent's other activities).
    `decision_key`: the worker's decision public key, which a request for more budget must be signed with too."""

    def __init__(self, decision_key: str | None = None) -> None:
        self.decision_key = decision_key

    def all(self) -> list[object]:
        return [self.reserve, self.settle]

    @activity.defn(name=BUDGET_RESERVE_ACTIVITY)
    async def reserve(self, request: BudgetRound) -> BudgetRoundResult:
        """Reserve the round with every principal; the first refusal stops it (the others' reservations are
        settled at zero, so nothing stays open). A ledger id held by another workflow stops it at once."""
        try:
            return await self._reserve(request)
        except IdTaken as exc:
            log.warning("a budget ledger id is taken", workflow_id=exc.workflow_id, found=exc.found)
            raise ApplicationError(str(exc), type="IdTaken", non_retryable=True) from None

    async def _reserve(self, request: BudgetRound) -> BudgetRoundResult:
        client, queue = activity.client(), activity.info().task_queue
        standings: list[BudgetStanding] = []
        for principal in request.principals:
            grant = request.grant if request.grant_principal == principal else None
            answer = await ledger_update(client, queue, principal, RESERVE_BUDGET_UPDATE, ReserveRequest(
                reservation_id=request.reservation_id, prompt_id=request.prompt_id, grant=grant), ReserveResult)
            standings.append(answer.standing)
            if answer.busy:  # the earlier ledgers keep this round's reservation: the retry reuses it (same id)
                log.info("budget busy", principal=principal)
                return BudgetRoundResult(busy=True, standings=standings)
            if answer.refused is not None:
                for reserved in standings[:-1]:
                    await ledger_update(client, queue, reserved.principal, SETTLE_BUDGET_UPDATE,
                                        SettleRequest(reservation_id=request.reservation_id), BudgetStanding)
                refusal = standing_refusal(answer.standing)
                log.info("budget refused a round", principal=principal, reason=answer.refused)
                return BudgetRoundResult(refusal=refusal, standings=standings, decision_key=self.decision_key)
        return BudgetRoundResult(standings=standings)

    @activity.defn(name=BUDGET_SETTLE_ACTIVITY)
    async def settle(self, request: BudgetSettlement) -> list[BudgetStanding]:
        client, queue = activity.client(), activity.info().task_queue
        return [await ledger_update(client, queue, principal, SETTLE_BUDGET_UPDATE, SettleRequest(
            reservation_id=request.reservation_id, tokens=request.tokens, cost=request.cost), BudgetStanding)
            for principal in request.principals]


__all__ = ["BudgetActivities"]
