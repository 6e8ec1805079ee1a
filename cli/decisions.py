"""Deciding from the CLI (`dagent approve` / `reject`): a decision sent to the top prompt followed to the
(grand)child prompt that runs the call, and each decision reported as taken, also when its call waits for the
rest of its batch. (The list of pending calls is `AgentClient.pending`, client/pending.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from durable_agent.agent.models import TERMINAL_STATES, ToolOutput, ToolPending
from durable_agent.cli.render import short, taken_words
from durable_agent.client import AgentClient, PromptHandle

POLL_SECONDS = 0.2
ONCE_RUN_SECONDS = 60.0  # `approve --all` reports how the calls ended, or how they stand after this long

Decide = Callable[[PromptHandle, str], Awaitable[ToolOutput | None]]


async def decide(client: AgentClient, prompt_id: str, tool_call_id: str, how: Decide) -> ToolOutput | None:
    """Decide one call through `prompt_id` and return it once decided and run. A sub-agent's call answers at
    once with the decision (the top prompt forwards it): follow it to the prompt that runs it."""
    handle = client.prompt(prompt_id)
    path = next((p.path for p in await handle.pending_approvals() if p.tool_call_id == tool_call_id), [])
    resolved = await how(handle, tool_call_id)
    if resolved is None or not path or not isinstance(resolved.result, ToolPending):
        return resolved
    return await _run_in_sub_agent(client.prompt(path[-1]), tool_call_id) or resolved


async def _run_in_sub_agent(handle: PromptHandle, tool_call_id: str) -> ToolOutput | None:
    own_id = tool_call_id.rsplit("/", 1)[-1]
    while True:
        prompt = await handle.get()
        entry = prompt.tool_call(own_id)
        batch_waits = prompt.state == "waiting_for_approval" and entry is not None and entry.decision is not None
        if entry is None or entry.finished_at is not None or batch_waits or prompt.state in TERMINAL_STATES:
            return entry.model_copy(update={"id": tool_call_id}) if entry is not None else None
        await asyncio.sleep(POLL_SECONDS)


async def once_run(handle: PromptHandle, outcomes: list[ToolOutput | None]) -> list[ToolOutput | None]:
    """The calls as they ended, read from the record once every one has finished (a sub-agent's call is
    followed by `decide`), the prompt ended, or `ONCE_RUN_SECONDS` passed."""
    for _ in range(int(ONCE_RUN_SECONDS / POLL_SECONDS)):
        prompt = await handle.get()
        outcomes = [(prompt.tool_call(o.id) or o) if o is not None else None for o in outcomes]
        if prompt.state in TERMINAL_STATES or all(
                o is None or o.finished_at is not None or "/" in o.id for o in outcomes):
            break
        await asyncio.sleep(POLL_SECONDS)
    return outcomes


async def waiting_count(handle: PromptHandle, decided_id: str) -> int:
    """How many other calls of the prompt still wait for a decision (0 if it does not answer)."""
    try:
        return sum(1 for p in await handle.pending_approvals() if p.tool_call_id != decided_id)
    except Exception:  # a finished prompt, or no worker to answer the query: nothing to wait for that we know of
        return 0


def taken_line(entry: ToolOutput, others_waiting: int) -> str:
    """A decision as taken, for a call that has not run (or ended) yet because its batch still waits:
    `… → approved by alice at 11:05:11; runs when the other 2 decisions are in`."""
    return f"tool    {entry.tool} {short(entry.input)} [{entry.id}] → {taken_words(entry, others_waiting)}"


def is_waiting_for_batch(entry: ToolOutput | None) -> bool:
    return entry is not None and entry.decision is not None and isinstance(entry.result, ToolPending)
