"""Every call waiting for a decision across prompts, for the CLI's `dagent pending` and the API's inbox:
each addressed from its top prompt (a sub-agent's as `<call>/<call>` with the whole path), every prompt
asked at once and for a bounded time, so one whose worker is down cannot hold the list."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel
from temporalio.service import RPCError

from durable_agent.workflows.names import PARENT_PROMPT_ID
from durable_agent.workflows.protocol import PendingApproval

if TYPE_CHECKING:
    from durable_agent.client._client import AgentClient

MAX_DEPTH = 32  # sub-agents of sub-agents: far more levels than any real agent uses
QUERY_SECONDS = 5.0  # how long the list waits for one prompt's worker to answer

T = TypeVar("T")


class PendingRow(BaseModel):
    """One pending call as a person decides it: on `prompt_id` (the top prompt) as `call.tool_call_id`."""

    prompt_id: str
    user_id: str | None
    conversation_id: str | None = None
    call: PendingApproval


async def top_prompt(client: AgentClient, prompt_id: str) -> str:
    """The prompt at the top of a chain of sub-agents (the prompt itself when it is nobody's sub-agent), by
    each prompt's `ParentPromptId` search attribute: one describe per level, answered without a worker."""
    current = prompt_id
    for _ in range(MAX_DEPTH):
        parent = (await client.prompt(current).workflow.describe()).typed_search_attributes.get(PARENT_PROMPT_ID)
        if parent is None:
            return current
        current = parent
    return current


class PendingList(BaseModel):
    rows: list[PendingRow]
    unanswered: list[str]  # waiting prompts whose worker did not answer in time: their calls are not listed


async def pending_list(client: AgentClient, user_id: str | None, *, timeout: float = QUERY_SECONDS) -> PendingList:
    """Every call waiting for a decision, once, addressed from its top prompt (a sub-agent's as `<call>/<call>`
    with the whole path). A waiting prompt whose calls its top prompt does not list (yet) is listed itself.
    Prompts are asked at once, each for at most `timeout` seconds: one whose worker does not answer is left
    out (and named in `unanswered`) rather than holding the list."""
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
            rows += [PendingRow(prompt_id=top, user_id=entry.user_id, conversation_id=entry.conversation_id,
                                call=call) for call in calls[top]]
        if top == entry.prompt_id or entry.prompt_id not in calls:
            continue
        listed = {(call.path[-1], call.tool_call_id.rsplit("/", 1)[-1]) for call in calls[top] if call.path}
        rows += [PendingRow(prompt_id=entry.prompt_id, user_id=entry.user_id, conversation_id=entry.conversation_id,
                            call=call)
                 for call in calls[entry.prompt_id] if (entry.prompt_id, call.tool_call_id) not in listed]
    return PendingList(rows=rows, unanswered=sorted(silent))
