"""Budgets over a period for a principal (a user or a conversation): the models the ledger, the prompt, the
activities, the client, the CLI and the API share. Pure: no Temporal, no I/O (docs/operations.md, Budgets).

A principal is `user:<id>` or `conversation:<id>`. Its ledger (workflows/budget_ledger.py) holds one
`BudgetLimit` (tokens and/or cost per UTC calendar day, week or month), what was spent in the current period,
extra allowance granted in it (an approved request for more), and open reservations (one per model round).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from durable_agent.agent.strict import StrictModel

Period = Literal["day", "week", "month"]
OnExhausted = Literal["stop", "ask"]
Unit = Literal["tokens", "cost"]
PRINCIPAL_KINDS = ("user", "conversation")
_PRINCIPAL = re.compile(r"^(user|conversation):[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}$")
LEDGER_ID_PREFIX = "dagent-budget-"
ADJECTIVE: dict[str, str] = {"day": "daily", "week": "weekly", "month": "monthly"}
MORE_BUDGET_TOOL = "dagent.more_budget"  # the synthetic call an "ask" budget waits on (never sent to the model)


def principal_problem(principal: str) -> str | None:
    """Why `principal` does not name a budget's owner (one line), or None."""
    if _PRINCIPAL.match(principal):
        return None
    return (f"budget principal {principal!r} must be user:<id> or conversation:<id> "
            "(letters, digits and . _ @ + - ; at most 200 characters)")


def ledger_id(principal: str) -> str:
    """The workflow id of a principal's ledger (one per principal, for ever)."""
    return LEDGER_ID_PREFIX + principal


def principals_for(user_id: str | None, conversation_id: str | None) -> list[str]:
    """The principals whose budgets may apply to a prompt of `user_id` (in `conversation_id`)."""
    found = [f"user:{user_id}"] if user_id else []
    if conversation_id:
        found.append(f"conversation:{conversation_id}")
    return [p for p in found if principal_problem(p) is None]


def period_start(now: datetime, period: Period) -> datetime:
    """The start (UTC) of the calendar period `now` falls in: midnight, Monday midnight, or the 1st."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def period_end(start: datetime, period: Period) -> datetime:
    if period == "day":
        return start + timedelta(days=1)
    if period == "week":
        return start + timedelta(days=7)
    return (start.replace(day=28) + timedelta(days=4)).replace(day=1)


class BudgetLimit(StrictModel):
    """A principal's budget: per period, tokens and/or cost; what happens when it is spent."""

    model_config = ConfigDict(frozen=True)

    period: Period = "day"
    max_tokens: int | None = Field(default=None, gt=0, description="Input plus output tokens per period.")
    max_cost: float | None = Field(default=None, gt=0, description="In the price table's currency, per period.")
    on_exhausted: OnExhausted = Field(default="stop", description=(
        "stop: the prompt completes with budget_stop; ask: it waits for an approver to grant more."))
    approvers: list[str] = Field(default_factory=list, description=(
        "Who may grant more (`user:<id>` / `role:<name>`); needed with on_exhausted=ask."))

    @model_validator(mode="after")
    def _complete(self) -> BudgetLimit:
        if self.max_tokens is None and self.max_cost is None:
            raise ValueError("give max_tokens and/or max_cost")
        if self.on_exhausted == "ask" and not self.approvers:
            raise ValueError("on_exhausted=ask needs approvers (user:<id> or role:<name>)")
        return self

    @field_validator("approvers")
    @classmethod
    def _typed(cls, approvers: list[str]) -> list[str]:
        for entry in approvers:
            if not re.match(r"^(user|role):[^\s:]+$", entry):
                raise ValueError(f"approver {entry!r} must be user:<id> or role:<name>")
        return approvers

    def describe(self) -> str:
        parts = [f"{self.max_tokens} tokens" if self.max_tokens else "", f"{self.max_cost:g} cost"
                 if self.max_cost else ""]
        return f"{' and '.join(p for p in parts if p)} per {self.period}"


class Grant(StrictModel):
    """Extra allowance an approver granted for the current period (applied once, by id)."""

    id: str
    unit: Unit
    amount: float = Field(gt=0)


class ConfigureRequest(StrictModel):
    """Update `configure`: set (or with `limit` None, remove) the principal's budget."""

    principal: str
    limit: BudgetLimit | None = None
    by: str | None = None


class ReserveRequest(StrictModel):
    """Update `reserve`: one model round of a prompt asks to go ahead."""

    reservation_id: str = Field(min_length=1, max_length=300)
    prompt_id: str = ""
    grant: Grant | None = None


class SettleRequest(StrictModel):
    """Update `settle`: what a reserved round actually spent."""

    reservation_id: str = Field(min_length=1, max_length=300)
    tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)


class PeriodTotals(StrictModel):
    """What a period spent, and the extra allowance granted in it (an approved request for more)."""

    spent_tokens: int = 0
    spent_cost: float = 0.0
    extra_tokens: int = 0
    extra_cost: float = 0.0

    def totals(self) -> dict[str, int | float]:
        """These four figures alone, to carry into another record of the same period."""
        return {name: getattr(self, name) for name in PeriodTotals.model_fields}


class BudgetStanding(PeriodTotals):
    """A principal's budget and spend in the current period: what the prompt's record, the CLI and metrics show."""

    principal: str
    limit: BudgetLimit | None = None
    period_start: datetime | None = None
    period_end: datetime | None = None
    reservations: int = Field(default=0, description="Model rounds reserved and not settled yet.")

    def exhausted(self) -> tuple[Unit, float, float] | None:
        """(unit, allowance, spent) of the first limit that is spent, or None while rounds may go ahead."""
        limit = self.limit
        if limit is None:
            return None
        if limit.max_tokens is not None and self.spent_tokens >= limit.max_tokens + self.extra_tokens:
            return "tokens", limit.max_tokens + self.extra_tokens, self.spent_tokens
        if limit.max_cost is not None and self.spent_cost >= limit.max_cost + self.extra_cost:
            return "cost", limit.max_cost + self.extra_cost, self.spent_cost
        return None

    def refusal(self) -> str | None:
        found = self.exhausted()
        if found is None or self.limit is None:
            return None
        unit, allowance, spent = found
        amount = f"{int(spent)} tokens used of {int(allowance)}" if unit == "tokens" else \
            f"{spent:.4f} spent of {allowance:g}"
        return f"{self.principal} {ADJECTIVE[self.limit.period]} budget reached: {amount}"


class PeriodSpend(PeriodTotals):
    """A finished period's spend (the ledger keeps the last few)."""

    period_start: datetime


class LedgerState(PeriodTotals):
    """The ledger workflow's input: what continue-as-new carries to the next run."""

    principal: str = "user:anonymous"
    limit: BudgetLimit | None = None
    period_start: datetime | None = None
    reservations: dict[str, datetime] = Field(default_factory=dict)
    grants: list[str] = Field(default_factory=list, description="Grant ids applied in this period.")
    settled: list[str] = Field(default_factory=list, description="Recently settled reservation ids.")
    past: list[PeriodSpend] = Field(default_factory=list)
    configured_by: str | None = None
    runs: int = 1
    updates_per_run: int = Field(default=500, ge=1, description="Continue as new after this many updates.")


class LedgerView(StrictModel):
    """Query `state`: the standing and the finished periods kept."""

    standing: BudgetStanding
    past: list[PeriodSpend] = Field(default_factory=list)
    configured_by: str | None = None
    runs: int = 1


class ReserveResult(StrictModel):
    """A reservation's answer: `refused` says why the round may not go ahead (one line), else None."""

    refused: str | None = None
    standing: BudgetStanding


class BudgetRefusal(StrictModel):
    """Why a prompt's round may not go ahead: the budget that is spent, and how to ask for more."""

    principal: str
    reason: str
    unit: Unit
    allowance: float
    spent: float
    limit: BudgetLimit


class BudgetRound(StrictModel):
    """Input of the `dagent.budget_reserve` activity: the prompt's principals and this round's reservation."""

    principals: list[str]
    reservation_id: str
    prompt_id: str = ""
    grant: Grant | None = None
    grant_principal: str | None = None


class BudgetRoundResult(StrictModel):
    refusal: BudgetRefusal | None = None
    standings: list[BudgetStanding] = Field(default_factory=list)
    decision_key: str | None = Field(default=None, description="The worker's decision key (a refusal only).")


class BudgetSettlement(StrictModel):
    """Input of the `dagent.budget_settle` activity: one round's actual spend, for every principal."""

    principals: list[str]
    reservation_id: str
    tokens: int = 0
    cost: float = 0.0


def standing_refusal(standing: BudgetStanding) -> BudgetRefusal | None:
    found = standing.exhausted()
    reason = standing.refusal()
    if found is None or reason is None or standing.limit is None:
        return None
    unit, allowance, spent = found
    return BudgetRefusal(principal=standing.principal, reason=reason, unit=unit, allowance=allowance, spent=spent,
                         limit=standing.limit)


__all__ = ["LEDGER_ID_PREFIX", "MORE_BUDGET_TOOL", "BudgetLimit", "BudgetRefusal", "BudgetRound",
           "BudgetRoundResult", "BudgetSettlement", "BudgetStanding", "ConfigureRequest", "Grant", "LedgerState",
           "LedgerView", "OnExhausted", "Period", "PeriodSpend", "PeriodTotals", "ReserveRequest", "ReserveResult",
           "SettleRequest", "Unit", "ledger_id", "period_end", "period_start", "principal_problem", "principals_for",
           "standing_refusal"]
