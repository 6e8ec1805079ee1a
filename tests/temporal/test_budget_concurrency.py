"""How far concurrent prompts can pass a period budget (issue 41, review security-turn4 §2.5): 30 prompts of one
user with 40,000-character inputs start at once under 100 tokens a day. The ledger lets at most
`concurrent_rounds` (4) rounds run at once, so the overshoot is at most 4 rounds whatever the concurrency (the
review measured 80,464 tokens of 100 before, growing with concurrency). Real dev server and worker."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.period_budgets import BudgetLimit, ledger_id
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, text
from tests.support.workers import agent_worker

PROMPTS = 30
INPUT_CHARS = 40_000
CONCURRENT_ROUNDS = 4  # BudgetLimit.concurrent_rounds by default


def _answer(request: ModelRequest) -> ModelResponse:
    return text("ok")


async def test_concurrent_prompts_pass_a_budget_by_at_most_its_concurrent_rounds(dev_env: WorkflowEnvironment) -> None:
    user = f"conc-{uuid.uuid4().hex[:8]}"
    limit = BudgetLimit(period="day", max_tokens=100)
    async with agent_worker(dev_env, plugins=[Plugin("none")], model=ScriptedModel(_answer)) as client:
        try:
            await client.set_budget(f"user:{user}", limit)
            handles = await asyncio.gather(*(client.start(f"{n} " + "x" * INPUT_CHARS, user_id=user)
                                             for n in range(PROMPTS)))
            prompts = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 300)
            view = await client.budget(f"user:{user}")
        finally:
            await client.client.get_workflow_handle(ledger_id(f"user:{user}")).terminate("test over")
    rounds = [p.usage.input_tokens + p.usage.output_tokens for p in prompts if p.usage.model_calls]
    ran, spent = len(rounds), view.standing.spent_tokens
    overshoot = spent - 100
    print(f"\n{PROMPTS} prompts x {INPUT_CHARS} chars under 100 tokens/day: {ran} rounds ran, {spent} tokens spent "
          f"(overshoot {overshoot}, largest round {max(rounds)})")
    assert 1 <= ran <= CONCURRENT_ROUNDS, ran
    assert spent == sum(rounds) and overshoot <= CONCURRENT_ROUNDS * max(rounds)
    stopped = [p for p in prompts if p.budget_stop]
    assert len(stopped) == PROMPTS - ran and view.standing.reservations == 0
    assert all(p.state == ("stopped" if p.budget_stop else "completed") for p in prompts)  # stopped: work undone
