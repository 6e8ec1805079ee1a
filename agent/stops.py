"""Why a prompt stopped with work undone, and how to go on: the record of a `stopped` prompt (a budget that is
spent, the round limit reached). Pure: built from what the prompt's record already holds, so the workflow
can build it deterministically and every surface (CLI, pages, API, Temporal UI) says the same words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from durable_agent.agent.period_budgets import ADJECTIVE, BudgetStanding
from durable_agent.agent.strict import StrictModel

StopKind = Literal["prompt_budget", "period_budget", "ledger", "max_rounds"]


def people_words(approvers: list[str]) -> str:
    """`user:alice`, `role:finance` as people read them: `alice or anyone with the finance role`."""
    words = [f"anyone with the {a.removeprefix('role:')} role" if a.startswith("role:") else a.removeprefix("user:")
             for a in approvers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" or {words[-1]}" if words else ""


class PromptStop(StrictModel):
    """A prompt that stopped before its work was done: why, who may let it go on and when its budget resets."""

    kind: StopKind
    reason: str = Field(description="Why it stopped (one line).")
    principal: str | None = Field(default=None, description="The budget's owner (`user:<id>`/`conversation:<id>`).")
    resets_at: datetime | None = Field(default=None, description="When the spent period budget starts afresh (UTC).")
    who_can_grant: list[str] = Field(default_factory=list, description=(
        "Who may grant more (`user:<id>`/`role:<name>`; an `ask` budget's approvers). Empty: whoever manages "
        "budgets (`dagent budget set`)."))
    next_step: str = Field(description="How to go on (one sentence).")

    def words(self) -> str:
        """`Stopped: <reason>. <how to go on>` — the one line every surface prints."""
        return f"Stopped: {self.reason}. {self.next_step}"


def budget_stop(reason: str, standings: list[BudgetStanding]) -> PromptStop:
    """The stop for `reason` (a per-prompt limit, a period budget named by its principal, or an unreachable
    ledger), with the spent period budget's reset time and approvers from the prompt's standings."""
    spent = next((s for s in standings if s.limit is not None and reason.startswith(
        f"{s.principal} {ADJECTIVE[s.limit.period]} budget reached")), None)
    if spent is not None and spent.limit is not None:
        grantors = list(spent.limit.approvers)
        resets = f"{spent.period_end:%Y-%m-%d %H:%M} UTC" if spent.period_end else "the next period"
        who = (f"{people_words(grantors)} may grant more" if grantors else
               f"whoever manages budgets may raise it (`dagent budget set {spent.principal} …`)")
        return PromptStop(kind="period_budget", reason=reason, principal=spent.principal,
                          resets_at=spent.period_end, who_can_grant=grantors,
                          next_step=f"The work is not finished: {who}, or ask again after the budget resets "
                                    f"at {resets}.")
    if reason.startswith("the budget ledger"):
        return PromptStop(kind="ledger", reason=reason,
                          next_step="The work is not finished: ask again once the budget ledger answers.")
    return PromptStop(kind="prompt_budget", reason=reason,
                      next_step="The work is not finished: this prompt's own limit was spent; ask again with a "
                                "higher limit (`--max-tokens` / `--max-cost`).")


def rounds_stop(rounds: int) -> PromptStop:
    return PromptStop(kind="max_rounds", reason=f"round limit reached after {rounds} rounds",
                      next_step="The work may not be finished: the model still had calls to make; ask again with "
                                "a higher `--max-rounds`, or go on in a conversation.")


__all__ = ["PromptStop", "StopKind", "budget_stop", "people_words", "rounds_stop"]
