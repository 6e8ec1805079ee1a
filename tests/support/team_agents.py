"""A team's workflow that runs prompts through `run_prompt`/`start_prompt` (workflows/agent_call.py), as the
docs show it: imported by the tests' workers like any team workflow module."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent import PromptRequest, run_prompt, start_prompt
    from durable_agent.agent.models import TextOutput


@workflow.defn
class ExpenseReview:
    """Asks an agent to pay an expense (a call that waits for a person's approval), then returns its answer."""

    @workflow.run
    async def run(self, user: str) -> str:
        prompt = await run_prompt(PromptRequest(input="pay the team dinner", user_id=user),
                                  execution_timeout=timedelta(minutes=5))
        texts = [entry.text for entry in prompt.output if isinstance(entry, TextOutput)]
        return f"{prompt.state}: {texts[-1] if texts else ''}"


@workflow.defn
class TwoAgents:
    """Two prompts side by side, each a child of this workflow."""

    @workflow.run
    async def run(self, user: str) -> list[str]:
        first = await start_prompt(PromptRequest(input="say one", user_id=user))
        second = await start_prompt(PromptRequest(input="say two", user_id=user))
        return [(await first).id, (await second).id]
