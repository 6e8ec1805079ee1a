"""`dagent ls`: recent prompts with their state, user, age and summary; waiting ones first."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus

from durable_agent.client import prompt_query
from durable_agent.workflows.names import PROMPT_STATE, USER_ID

WAITING = "waiting_for_approval"


class PromptRow(BaseModel):
    id: str
    state: str
    user: str | None
    started_at: datetime
    summary: str


def age(started_at: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or datetime.now(UTC)) - started_at).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _query(state: str | None, user: str | None, *, running: bool = False) -> str:
    return prompt_query(user_id=user or None, state=(WAITING if state == "waiting" else state) or None,
                        running=running)


async def _row(execution: WorkflowExecution) -> PromptRow:
    attributes = execution.typed_search_attributes
    state = attributes.get(PROMPT_STATE) or "running"
    if execution.status not in (None, WorkflowExecutionStatus.RUNNING) and state in ("running", WAITING):
        state = execution.status.name.lower()  # terminated or timed out: the workflow could not say
    memo = await execution.memo()
    return PromptRow(id=execution.id, state=state, user=attributes.get(USER_ID), started_at=execution.start_time,
                     summary=str(memo.get("summary", "")))


async def recent_prompts(client: Client, *, state: str | None = None, user: str | None = None,
                         limit: int = 20) -> list[PromptRow]:
    """Up to `limit` prompts, newest first, those waiting for approval before the rest."""
    rows: list[PromptRow] = []
    if state in (None, "waiting"):
        async for execution in client.list_workflows(_query("waiting", user, running=True),
                                                     limit=limit):
            rows.append(await _row(execution))
    if state != "waiting" and len(rows) < limit:
        waiting = {row.id for row in rows}
        async for execution in client.list_workflows(_query(state, user), limit=limit + len(waiting)):
            if execution.id not in waiting and len(rows) < limit:
                rows.append(await _row(execution))
    return sorted(rows, key=lambda row: (row.state == WAITING, row.started_at), reverse=True)
