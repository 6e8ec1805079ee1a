"""Budgets over a period for a principal (a user or a conversation): the models the ledger, the prompt, the
activities, the client, the CLI and the API share. Pure: no Temporal, no I/O (docs/operations.md, Budgets).

A principal is `user:<id>` or `conversation:<id>`, the id exactly as authenticated (any string an identity
provider issues, `auth0|eve` included, is one person; the ledger's workflow id encodes unusual ones). Its
ledger (workflows/budget/ledger.py) holds one `BudgetLimit` (tokens and/or cost per UTC calendar day, week or
month), what was spent in the current period, extra allowance granted in it (an approved request for more),
and open reservations (one per model round).
"""

from __future__ import annotations

import base64
import re
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from durable_agent.agent.strict import StrictModel

Period = Literal["day", "week", "month"]
OnExhausted = Literal["stop", "ask"]
Unit = Literal["tokens", "cost"]
PRINCIPAL_KINDS = ("user", "conversation")
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,199}")  # kept verbatim in the ledger's workflow id
MAX_PRINCIPAL_BYTES = 255  # OpenID Connect: a `sub` is at most 255 ASCII characters
LEDGER_ID_PREFIX = "dagent-budget-"  # under agent/ids.py's reserved `dagent-`: no caller can take a ledger's id
ENCODED = "~"  # `dagent-budget-user~<base32 of the id>`: never a plain id's form (no `~` in one)
MAX_TOKENS = 10**12  # upper bounds on every budget number: big enough for any real budget, finite for the ledger
MAX_COST = 1e9
ADJECTIVE: dict[str, str] = {"day": "daily", "week": "weekly", "month": "monthly"}
MORE_BUDGET_TOOL = "dagent.more_budget"  # the synthetic call an "ask" budget waits on (never sent to the model)


def principal_problem(principal: str) -> str | None:
    """Why `principal` does not name a budget's owner (one line), or None. Any id is accepted verbatim (it is
    one person or conversation, exactly) unless empty, over 255 bytes, or holding a control character."""
    kind, colon, name = principal.partition(":")
    if not colon or kind not in PRINCIPAL_KINDS or not name:
        return f"budget principal {principal!r} must be user:<id> or conversation:<id>"
    if len(name.encode()) > MAX_PRINCIPAL_BYTES:
        return f"budget principal {principal[:40]!r}...: the id is over {MAX_PRINCIPAL_BYTES} bytes"
    if any(unicodedata.category(char) == "Cc" for char in name):
        return f"budget principal {principal!r}: the id holds a control character"
    return None


def ledger_id(principal: str) -> str:
    """The workflow id of a principal's ledger (one per principal, for ever): `dagent-budget-user:alice`, or for
    an id with other characters (`auth0|eve`) `dagent-budget-user~<base32 of its UTF-8>` (one id per principal)."""
    kind, _, name = principal.partition(":")
    if _PLAIN_ID.fullmatch(name):
        return LEDGER_ID_PREFIX + principal
    encoded = base64.b32encode(name.encode()).decode().rstrip("=").lower()
    return f"{LEDGER_ID_PREFIX}{kind}{ENCODED}{encoded}"


def ledger_principal(workflow_id: str) -> str | None:
    """The principal whose ledger has this workflow id (`ledger_id` reversed), or None for another id."""
    rest = workflow_id.removeprefix(LEDGER_ID_PREFIX)
    if rest == workflow_id:
        return None
    kind, sep, encoded = rest.partition(ENCODED)
    if not sep or ":" in kind:
        return rest
    try:
        return f"{kind}:{base64.b32decode(encoded.upper() + '=' * (-len(encoded) % 8)).decode()}"
    except ValueError:
        return None


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


class _Finite(StrictModel):
    """Every budget number finite: `Infinity` or `NaN` (from a raw signal or update) is refused with a reason."""

    model_config = ConfigDict(allow_inf_nan=False)


class BudgetLimit(_Finite):
    """A principal's budget: per period, tokens and/or cost; what happens when it is spent."""

    model_config = ConfigDict(frozen=True)

    period: Period = "day"
    max_tokens: int | None = Field(default=None, gt=0, le=MAX_TOKENS, description="Input plus output tokens per "
                                                                                 "period.")
    max_cost: float | None = Field(default=None, gt=0, le=MAX_COST, description="In the price table's currency, "
                                                                               "per period.")
    on_exhausted: OnExhausted = Field(default="stop", description=(
        "stop: the prompt completes with budget_stop; ask: it waits for an approver to grant more."))
    approvers: list[str] = Field(default_factory=list, description=(
        "Who may grant more (`user:<id>` / `role:<name>`); needed with on_exhausted=ask."))
    metrics: bool = Field(default=False, description=(
        "Export this budget's spend and limit as gauges labelled with the principal (user ids on the metrics "
        "endpoint: off unless asked)."))
    concurrent_rounds: int = Field(default=4, ge=1, le=1000, description=(
        "Model rounds under this budget that may run at once (others wait for one to settle): a period's spend "
        "passes its limit by at most this many rounds."))

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


class Grant(_Finite):
    """Extra allowance an approver granted for the current period (applied once, by id)."""

    id: str
    unit: Unit
    amount: float = Field(gt=0, le=MAX_TOKENS)


class ConfigureRequest(_Finite):
    """Update `configure`: set (or with `limit` None, remove) the principal's budget."""

    principal: str
    limit: BudgetLimit | None = None
    by: str | None = None


class ReserveRequest(_Finite):
    """Update `reserve`: one model round of a prompt asks to go ahead."""

    reservation_id: str = Field(min_length=1, max_length=300)
    prompt_id: str = ""
    grant: Grant | None = None


class SettleRequest(_Finite):
    """Update `settle`: what a reserved round actually spent."""

    reservation_id: str = Field(min_length=1, max_length=300)
    tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    cost: float = Field(default=0.0, ge=0, le=MAX_COST)


class PeriodTotals(_Finite):
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


class LedgerView(_Finite):
    """Query `state`: the standing and the finished periods kept."""

    standing: BudgetStanding
    past: list[PeriodSpend] = Field(default_factory=list)
    configured_by: str | None = None
    runs: int = 1


class ReserveResult(_Finite):
    """A reservation's answer: `refused` says why the round may not go ahead (one line), else None; `busy`: every
    round the budget allows at once is running (ask again shortly)."""

    refused: str | None = None
    busy: bool = False
    standing: BudgetStanding


class BudgetRefusal(_Finite):
    """Why a prompt's round may not go ahead: the budget that is spent, and how to ask for more."""

    principal: str
    reason: str
    unit: Unit
    allowance: float
    spent: float
    limit: BudgetLimit


class BudgetRound(_Finite):
    """Input of the `dagent.budget_reserve` activity: the prompt's principals and this round's reservation."""

    principals: list[str]
    reservation_id: str
    prompt_id: str = ""
    grant: Grant | None = None
    grant_principal: str | None = None


class BudgetRoundResult(_Finite):
    refusal: BudgetRefusal | None = None
    busy: bool = Field(default=False, description="A ledger's concurrent rounds are all running: try again.")
    standings: list[BudgetStanding] = Field(default_factory=list)
    decision_key: str | None = Field(default=None, description="The worker's decision key (a refusal only).")


class BudgetSettlement(_Finite):
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


__all__ = ["LEDGER_ID_PREFIX", "MAX_COST", "MAX_TOKENS", "MORE_BUDGET_TOOL", "BudgetLimit", "BudgetRefusal",
           "BudgetRound", "BudgetRoundResult", "BudgetSettlement", "BudgetStanding", "ConfigureRequest", "Grant",
           "LedgerState", "LedgerView", "OnExhausted", "Period", "PeriodSpend", "PeriodTotals", "ReserveRequest",
           "ReserveResult", "SettleRequest", "Unit", "ledger_id", "ledger_principal", "period_end", "period_start",
           "principal_problem", "principals_for", "standing_refusal"]
