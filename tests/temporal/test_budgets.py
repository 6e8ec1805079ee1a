"""Budgets (issue 27): a prompt stops making model calls once its token or cost limit is reached.

Real dev server (the session `dev_env`) and worker. The scripted model never gives a final answer (it calls a
tool every round) and reports 400 input + 100 output tokens per call; with the scripted model's name priced
at $1,000 / $2,000 per million tokens each call costs $0.60. The prompt ends `stopped` with `budget_stop`, a system
message in its output and `force_completed`, after the round that crossed the limit; no budget, no change.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.testing import WorkflowEnvironment

from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse
from durable_agent.agent.models import MessageOutput, ToolOutput, Usage
from durable_agent.agent.plugins import Plugin
from durable_agent.agent.providers.scripted import ScriptedModel, tool_calls
from durable_agent.agent.tools import tool
from durable_agent.client import AgentClient
from durable_agent.workers.worker import build_runtime, create_worker
from durable_agent.workflows.budget.limits import PromptBudget, budget_reached
from tests.support.workers import TEST_SETTINGS


class Step(BaseModel):
    n: int


@tool("loop.step")
async def step(args: Step, ctx: ToolContext) -> str:
    """One more step."""
    return f"step {args.n}"


def _script(request: ModelRequest) -> ModelResponse:
    response = tool_calls(("loop.step", {"n": request.round}))
    response.usage = Usage(input_tokens=400, output_tokens=100, model_calls=1)
    return response


async def test_token_and_cost_budgets_stop_the_loop(dev_env: WorkflowEnvironment) -> None:
    model = ScriptedModel(_script, model="budget-model")
    settings = TEST_SETTINGS.model_copy(update={
        "task_queue": f"tq-{uuid.uuid4().hex[:10]}",
        "prices": json.dumps({"budget-model": {"input": 1000, "output": 2000}})})
    runtime = build_runtime(settings, plugins=[Plugin("loop", tools=[step])],
                            providers={"normal": model, "high": model})
    client = AgentClient(dev_env.client, settings)
    async with create_worker(dev_env.client, runtime, task_queue=settings.task_queue, settings=settings):
        by_tokens = await client.start("go", max_rounds=20, budget=PromptBudget(max_tokens=1200))
        by_cost = await client.start("go", max_rounds=20, budget=PromptBudget(max_cost=1.0))
        unlimited = await client.start("go", max_rounds=4)
        tokens, cost, plain = await asyncio.wait_for(
            asyncio.gather(by_tokens.result(), by_cost.result(), unlimited.result()), 60)

    # 500 tokens per round: 1000 after round 2 is under 1200, 1500 after round 3 is not.
    assert tokens.state == "stopped" and tokens.force_completed and tokens.rounds == 3
    assert tokens.budget_stop == "token budget reached: 1500 tokens used of 1200"
    assert sum(isinstance(e, ToolOutput) for e in tokens.output) == 3 and tokens.usage.model_calls == 3
    last = tokens.output[-1]
    assert isinstance(last, MessageOutput) and last.source == "budget" and last.role == "system"
    assert last.text == ("Stopped: token budget reached: 1500 tokens used of 1200. The work is not finished: this "
                         "prompt's own limit was spent; ask again with a higher limit (`--max-tokens` / `--max-cost`).")
    assert tokens.stop is not None and tokens.stop.kind == "prompt_budget" and tokens.stop.words() == last.text
    # $0.60 per round: $1.20 after round 2 reaches $1.
    assert cost.rounds == 2 and cost.budget_stop == "cost budget reached: 1.2000 spent of 1"
    assert cost.state == "stopped"
    # Without a budget: the max_rounds guard stops it too (the model still had calls to make), no budget fields.
    assert plain.rounds == 4 and plain.force_completed and plain.budget_stop is None and plain.state == "stopped"
    assert plain.stop is not None and plain.stop.kind == "max_rounds"
    assert [(e.source, e.text) for e in plain.output if isinstance(e, MessageOutput)] == [
        ("limit", "Stopped: round limit reached after 4 rounds. The work may not be finished: the model still had "
                  "calls to make; ask again with a higher `--max-rounds`, or go on in a conversation.")]


def test_budget_values() -> None:
    with pytest.raises(ValidationError):
        PromptBudget(max_tokens=0)
    with pytest.raises(ValidationError):
        PromptBudget(max_cost=-1)
    usage = Usage(input_tokens=10, output_tokens=5, cost=None)
    assert budget_reached(usage, None) is None
    assert budget_reached(usage, PromptBudget(max_cost=0.01)) is None  # no price known: the cost limit cannot apply
    assert budget_reached(usage, PromptBudget(max_tokens=15)) == "token budget reached: 15 tokens used of 15"


def test_dagent_run_refuses_a_bad_budget_in_one_line() -> None:
    import subprocess

    from tests.support.processes import DAGENT_CMD, REPO_ROOT

    done = subprocess.run([*DAGENT_CMD, "run", "hi", "--max-tokens", "0", "--address", "127.0.0.1:1"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr == "error: max_tokens: Input should be greater than 0\n"
