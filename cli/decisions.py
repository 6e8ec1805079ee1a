"""Approvals across sub-agents for the CLI: every pending call addressed from its top prompt, and a decision
sent to the top prompt followed to the (grand)child prompt that runs the call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel
from temporalio.service import RPCError

from agent.models import TERMINAL_STATES, ToolOutput, ToolPending
from client import AgentClient, PromptHandle
from workflows.protocol import PendingApproval

MAX_DEPTH = 32  # sub-agents of sub-agents: far more levels than any real agent uses
POLL_SECONDS = 0.2
QUERY_SECONDS = 5.0  # how long `dagent pending` waits for one prompt's worker to answer

T = TypeVar("T")

Decide = Callable[[PromptHandle, str], Awaitable[ToolOutput | None]]


class PendingRow(BaseModel):
    """One pending call as a person decides it: on `prompt_id` (the top prompt) as `call.tool_call_id`."""

    prompt_id: str
    user_id: str | None
    call: PendingApproval


async def top_prompt(client: AgentClient, prompt_id: str) -> str:
    """The prompt at the top of a chain of sub-agents (the prompt itself when it is nobody's sub-agent)."""
    current = prompt_id
    for _ in range(MAX_DEPTH):
        handle = client.prompt(current)
        if (await handle.get()).parent_prompt_id is None:
            return current
        parent = (await handle.workflow.describe()).parent_id
        if parent is None:
            return current
        current = parent
    return current


async def pending_rows(client: AgentClient, user_id: str | None, *, timeout: float = QUERY_SECONDS,
                       unanswered: list[str] | None = None) -> list[PendingRow]:
    """Every call waiting for a decision, once, addressed from its top prompt (a sub-agent's as `<call>/<call>`
    with the whole path). A waiting prompt whose calls its top prompt does not list (yet) is listed itself.
    Prompts are asked at once, each for at most `timeout` seconds: one whose worker does not answer is left
    out (and its id added to `unanswered`) rather than holding the list."""
    waiting = await client.waiting_prompts(user_id=user_id)
    silent: set[str] = set()

    async def bounded(prompt_id: str, work: Awaitable[T]) -> T | None:
        try:
            return await asyncio.wait_for(work, timeout)
        except (TimeoutError, RPCError):
            silent.add(prompt_id)
            return None

    tops = await asyncio.gather(*(bounded(w.prompt_id, top_prompt(client, w.prompt_id)) for w in waiting))
    sub_agents = [w.prompt_id for w, top in zip(waiting, tops, strict=True) if top not in (None, w.prompt_id)]
    asked = list(dict.fromkeys([top for top in tops if top is not None] + sub_agents))
    answers = await asyncio.gather(*(bounded(p, client.prompt(p).pending_approvals()) for p in asked))
    calls = {p: a for p, a in zip(asked, answers, strict=True) if a is not None}
    rows: list[PendingRow] = []
    listed_tops: set[str] = set()
    for entry, top in zip(waiting, tops, strict=True):
        if top is None or top not in calls:
            continue
        if top not in listed_tops:
            listed_tops.add(top)
            rows += [PendingRow(prompt_id=top, user_id=entry.user_id, call=call) for call in calls[top]]
        if top == entry.prompt_id or entry.prompt_id not in calls:
            continue
        listed = {(call.path[-1], call.tool_call_id.rsplit("/", 1)[-1]) for call in calls[top] if call.path}
        rows += [PendingRow(prompt_id=entry.prompt_id, user_id=entry.user_id, call=call)
                 for call in calls[entry.prompt_id] if (entry.prompt_id, call.tool_call_id) not in listed]
    if unanswered is not None:
        unanswered += sorted(silent)
    return rows


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
