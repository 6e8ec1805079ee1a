"""Deciding from the CLI (`dagent approve` / `reject`): a decision sent to the top prompt followed to the
(grand)child prompt that runs the call, and each decision reported as taken, also when its call waits for the
rest of its batch. (The list of pending calls is `AgentClient.pending`, client/pending.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from durable_agent.agent.models import TERMINAL_STATES, ApprovalRequest, ToolOutput
from durable_agent.cli.hints import missing_prompt_id
from durable_agent.cli.render import decision_words, short, state_words, taken_words
from durable_agent.client import AgentClient, DecisionRefused, PromptHandle

POLL_SECONDS = 0.2
EXPLAIN_SECONDS = 10.0  # how long a refusal waits to say who decided, before it says only what the server said
ONCE_RUN_SECONDS = 60.0  # `approve --all` reports how the calls ended, or how they stand after this long

Decide = Callable[[PromptHandle, str], Awaitable[ToolOutput | None]]


async def decide(client: AgentClient, prompt_id: str, tool_call_id: str, how: Decide) -> ToolOutput | None:
    """Decide one call through `prompt_id` and return it once decided and run. A sub-agent's call answers at
    once with the decision (the top prompt forwards it): follow it to the prompt that runs it."""
    handle = client.prompt(prompt_id)
    try:
        path = next((p.path for p in await handle.pending_approvals() if p.tool_call_id == tool_call_id), [])
    except Exception as exc:  # a finished prompt without a worker to replay it: the decision below says why
        if missing_prompt_id(exc) is not None:
            raise  # a mistyped id: cli/errors.py suggests the right one
        path = []
    try:
        resolved = await how(handle, tool_call_id)
    except DecisionRefused as exc:
        better = await explained(handle, tool_call_id, exc)
        if better is exc:
            raise  # with its cause: an unknown prompt id is explained from it (cli/hints.py)
        raise better from None
    if resolved is None or not path or not isinstance(resolved.result, ApprovalRequest):
        return resolved
    return await _run_in_sub_agent(client.prompt(path[-1]), tool_call_id) or resolved


async def explained(handle: PromptHandle, tool_call_id: str, refused: DecisionRefused) -> DecisionRefused:
    """A refusal because the call or the prompt is done, saying who decided the call and how (from the
    record; the finished prompt's from its result, which needs no worker), instead of the server's words."""
    if refused.kind not in ("prompt-finished", "already-decided", "not-pending"):
        return refused
    try:
        prompt = await asyncio.wait_for(handle.result() if refused.kind == "prompt-finished" else handle.get(),
                                        EXPLAIN_SECONDS)
    except Exception:  # nothing more to say than the refusal itself
        return refused
    entry = prompt.tool_call(tool_call_id)
    ended = f"prompt {handle.id} is {state_words(prompt.state)}" if prompt.state in TERMINAL_STATES else \
        f"prompt {handle.id}"
    if entry is None:
        return DecisionRefused(f"{ended}; it has no call {tool_call_id!r}", refused.kind)
    if entry.decision is not None:
        return DecisionRefused(f"{ended}: {entry.tool} [{entry.id}] was already "
                               f"{decision_words(entry.decision, entry.input)}", refused.kind)
    result = f" ({entry.result.error})" if entry.result is not None and entry.result.type == "error" else ""
    return DecisionRefused(f"{ended}: {entry.tool} [{entry.id}] was never decided{result}", refused.kind)


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
    return entry is not None and entry.decision is not None and isinstance(entry.result, ApprovalRequest)
