"""Per-prompt spending limits, enforced between rounds of the prompt's loop (docs/operations.md, Budgets).

A prompt started with a `PromptBudget` makes no further model call once its usage has reached a limit: the
round that crossed it finishes (its tool calls included), then the prompt completes with
`force_completed=True`, `budget_stop` saying which limit stopped it, and a system message in its output.
A prompt without a budget behaves exactly as before (histories of such prompts replay unchanged).
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from durable_agent.agent.models import Usage
from durable_agent.agent.strict import StrictModel


class PromptBudget(StrictModel):
    """Limits for one prompt, over all its model calls (sub-agents' usage included)."""

    model_config = ConfigDict(frozen=True)

    max_tokens: int | None = Field(default=None, gt=0, description="Input plus output tokens.")
    max_cost: float | None = Field(default=None, gt=0, description=(
        "In the price table's currency (DAGENT_PRICES); applies only when the worker knows the model's price."))


def budget_reached(usage: Usage, budget: PromptBudget | None) -> str | None:
    """Why the prompt must stop (one line), or None while it is within its budget."""
    if budget is None:
        return None
    tokens = usage.input_tokens + usage.output_tokens
    if budget.max_tokens is not None and tokens >= budget.max_tokens:
        return f"token budget reached: {tokens} tokens used of {budget.max_tokens}"
    if budget.max_cost is not None and usage.cost is not None and usage.cost >= budget.max_cost:
        return f"cost budget reached: {usage.cost:.4f} spent of {budget.max_cost:g}"
    return None


__all__ = ["PromptBudget", "budget_reached"]
