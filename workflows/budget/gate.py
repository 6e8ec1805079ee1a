"""The prompt's period budgets (agent/period_budgets.py): each model round is reserved from the principals'
ledgers before it runs and settled with its actual spend after it; a spent budget stops the prompt, or, under
an `ask` budget, waits on a `dagent.more_budget` call at the approvals desk (the same machinery as any tool
call: inbox, `dagent approve`, HTTP; approvers checked by identity, four-eyes, a correctable amount).

A prompt whose request names no budget principal never gets here: no activity, rounds cost what they did.
"""

from __future__ import annotations

import math
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent.models import ApprovalRequest, ToolSuccess
from durable_agent.agent.period_budgets import (
    MAX_COST,
    MAX_TOKENS,
    MORE_BUDGET_TOOL,
    BudgetRefusal,
    BudgetRound,
    BudgetSettlement,
    BudgetStanding,
    Grant,
)
from durable_agent.workflows.activity_refs import BUDGET_RESERVE, BUDGET_SETTLE
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.approvals import ApprovalDesk, refusal_text
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.protocol import CallNeedingApproval, RoundResult

BUDGET_TIMEOUT = timedelta(seconds=30)
BUSY_PAUSE = timedelta(seconds=1)
BUDGET_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                           maximum_attempts=10)


class BudgetGate(Room):
    """`active`: the run goes through its ledgers (it names principals); a grant is asked at the `desk`."""

    def __init__(self, context: PromptContext, desk: ApprovalDesk) -> None:
        super().__init__(context)
        self._desk = desk
        self._reservation: str | None = None  # this round's reservation, until settled
        self._grant: tuple[str, Grant] | None = None  # (principal, extra approved) for the next reserve
        self.stop_reason: str | None = None

    @property
    def active(self) -> bool:
        return bool(self._request.budgets)

    async def reserve(self, round_number: int) -> bool:
        """Reserve the round with every ledger; False (with `stop_reason`) when a spent budget stops the prompt.
        Under an `ask` budget the prompt first waits for an approver to grant more."""
        host = self._host
        reservation = f"{host.workflow_id}/{host.run_id}/{round_number}"
        while True:
            principal, grant = self._grant or (None, None)
            try:
                verdict = await host.run_activity(
                    BUDGET_RESERVE, BudgetRound(
                        principals=self._request.budgets, reservation_id=reservation,
                        prompt_id=self._record.prompt.id, grant=grant, grant_principal=principal),
                    start_to_close_timeout=BUDGET_TIMEOUT, retry_policy=BUDGET_RETRY,
                    summary=f"budget reserve round {round_number}")
            except ActivityError as exc:
                if is_cancellation(exc):
                    raise
                self.stop_reason = f"the budget ledger could not be reached: {failure_reason(exc)}"
                return False
            if verdict.busy:  # the budget's concurrent rounds all run (the ledger waited 20 s): ask again
                await host.sleep(BUSY_PAUSE, "budget busy")
                continue
            self._grant = None
            self._record_standings(verdict.standings)
            refusal = verdict.refusal
            if refusal is None:
                self._reservation = reservation
                return True
            if refusal.limit.on_exhausted != "ask" or not await self._ask_for_more(refusal, verdict.decision_key):
                self.stop_reason = refusal.reason
                return False

    async def settle(self, result: RoundResult) -> None:
        """The round's actual tokens and cost, to every ledger (its reservation closes)."""
        reservation, self._reservation = self._reservation, None
        if reservation is None:
            return
        usage, round_number = result.usage, self._record.prompt.rounds
        try:
            standings = await self._host.run_activity(
                BUDGET_SETTLE, BudgetSettlement(
                    principals=self._request.budgets, reservation_id=reservation,
                    tokens=usage.input_tokens + usage.output_tokens, cost=usage.cost or 0.0),
                start_to_close_timeout=BUDGET_TIMEOUT, retry_policy=BUDGET_RETRY,
                summary=f"budget settle round {round_number}")
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            self._record.ignore("budget_settle", f"round {round_number} spend not recorded by the budget ledgers: "
                                          f"{failure_reason(exc)}")
            return
        self._record_standings(standings)

    def _record_standings(self, standings: list[BudgetStanding]) -> None:
        """Spend against budget in the record, one entry per principal, as the ledgers last answered."""
        prompt = self._record.prompt
        known = {standing.principal: standing for standing in prompt.budgets}
        known.update({standing.principal: standing for standing in standings})
        prompt.budgets = [known[p] for p in self._request.budgets if p in known]

    def _default_grant(self, refusal: BudgetRefusal) -> int | float:
        """What is already spent over the allowance plus one round (this prompt's average so far; before any
        round, one period's limit), so one grant lets the prompt go on instead of asking again at once."""
        usage, rounds, limit = self._record.prompt.usage, self._record.prompt.rounds, refusal.limit
        over = max(refusal.spent - refusal.allowance, 0.0)
        if refusal.unit == "tokens":
            spent = usage.input_tokens + usage.output_tokens
            one_round = spent / rounds if rounds and spent else float(limit.max_tokens or 1)
            return max(math.ceil(over + one_round), 1)
        one_round = (usage.cost or 0.0) / rounds if rounds and usage.cost else float(limit.max_cost or 0.01)
        return round(over + one_round, 4)

    async def _ask_for_more(self, refusal: BudgetRefusal, decision_key: str | None) -> bool:
        """A pending `dagent.more_budget` call, decided at the desk by the budget's approvers (four-eyes: never
        the prompt's own user); a correction of `asking` changes the amount. True once more was granted (added to
        this period's allowance by the ledger at the next reserve)."""
        limit, unit, host = refusal.limit, refusal.unit, self._host
        asking = self._default_grant(refusal)
        fixed = {"budget": refusal.principal, "period": limit.period, "unit": unit, "allowance": refusal.allowance,
                 "spent": refusal.spent}
        titles = {"budget": "Budget", "period": "Period", "unit": "Unit", "allowance": "Allowed this period",
                  "spent": "Spent this period"}
        schema = {"type": "object", "required": ["asking"],
                  "properties": {**{key: {"const": value, "title": titles[key]} for key, value in fixed.items()},
                                 "asking": {"type": "integer" if unit == "tokens" else "number",
                                            "exclusiveMinimum": 0,
                                            "maximum": MAX_TOKENS if unit == "tokens" else MAX_COST,
                                            "title": f"Grant ({unit})",
                                            "description": f"More {unit} for this {limit.period}; the default "
                                                           "covers what is spent over the allowance and one "
                                                           "more round."}}}
        call = CallNeedingApproval(
            id="more-budget", tool=MORE_BUDGET_TOOL, input={**fixed, "asking": asking}, input_schema=schema,
            approval=ApprovalRequest(
                reason=f"{refusal.reason}; approve to grant {asking:g} more {unit} this {limit.period}",
                approvers=limit.approvers, decision_key=decision_key, four_eyes=True))
        entry = self._record.open_call(call)
        decision = await self._desk.request_and_wait(entry, call)
        entry.decision = decision
        if decision.decision != "approved":
            self._record.end_call(entry, refusal_text(decision), decision.decision)
            return False
        amount = entry.input["asking"] if isinstance(entry.input, dict) else asking
        assert isinstance(amount, int | float)
        self._record.resolve(entry, ToolSuccess(output=f"granted {amount:g} more {unit} to {refusal.principal} "
                                                       f"this {limit.period}"))
        self._record.close_call(entry, "success")
        grant_id = f"{host.workflow_id}/{host.run_id}/{entry.id}"
        self._grant = (refusal.principal, Grant(id=grant_id, unit=unit, amount=float(amount)))
        return True


__all__ = ["BudgetGate"]
