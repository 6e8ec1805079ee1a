"""Event latency: from an output being recorded by the workflow to a watcher receiving it.

`.venv/bin/python -m bench.event_latency [--prompts 5 --rounds 10]` starts its own dev server and an
in-process worker, watches each prompt with `PromptHandle.events()`, and for every tool entry compares
the time the watcher received the `output_updated` event carrying its result with the entry's
`finished_at` (workflow time when the result was recorded). Prints the median and p90.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from datetime import UTC, datetime

from pydantic import BaseModel

from bench.measure import percentile
from bench.scratch import scripted_agent
from durable_agent.agent.context import ToolContext
from durable_agent.agent.messages import ModelRequest, ModelResponse, ToolResultMessage
from durable_agent.agent.models import ToolOutput
from durable_agent.agent.providers.scripted import ScriptedModel, text, tool_calls
from durable_agent.agent.tools import tool


class Step(BaseModel):
    n: int


@tool("bench.step")
async def step(args: Step, ctx: ToolContext) -> int:
    """A trivial tool."""
    await asyncio.sleep(0.05)
    return args.n


def _script(rounds: int) -> ScriptedModel:
    def script(request: ModelRequest) -> ModelResponse:
        done = sum(isinstance(m, ToolResultMessage) for m in request.messages)
        return tool_calls(("bench.step", {"n": done})) if done < rounds else text("done")
    return ScriptedModel(script)


async def measure(prompts: int, rounds: int) -> list[float]:
    latencies: list[float] = []
    async with scripted_agent("event-latency", step, _script(rounds)) as agent:
        for _ in range(prompts):
            handle = await agent.start("go", max_rounds=rounds + 1)
            async for _, event in handle.events():
                received = datetime.now(UTC)
                entry = event.output
                if event.kind == "output_updated" and isinstance(entry, ToolOutput) and entry.finished_at:
                    latencies.append((received - entry.finished_at).total_seconds() * 1000)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    latencies = sorted(asyncio.run(measure(args.prompts, args.rounds)))
    p90 = percentile(latencies, 90)  # was the smallest sample for fewer than 10 events
    print(f"event latency (output recorded -> watcher), {len(latencies)} events: "
          f"median {statistics.median(latencies):.1f} ms, p90 {p90:.1f} ms, max {latencies[-1]:.1f} ms")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
