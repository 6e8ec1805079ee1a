"""`/approvals`: the calls waiting for a decision, a page at a time (and live as SSE), and deciding them.

`GET /prompts/{id}/approvals`: the calls one prompt waits for, read from the prompt itself (a query), not from
the visibility store, so they are never behind the prompt's own event stream. The chat page labels its approval
forms from here (the tool schema's titles and descriptions), on a fresh load and after a reload alike: one source
for both.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import TypeAdapter
from sse_starlette import EventSourceResponse, ServerSentEvent

from durable_agent.agent.models import ToolOutput
from durable_agent.api.auth import Principal
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, CallPath, Config, PathId, Service, links
from durable_agent.api.schemas import Approve, PendingApprovalItem, Reject
from durable_agent.api.service import AgentService
from durable_agent.client.pending import PAGE_SIZE, PendingList

router = APIRouter(tags=["approvals"])
ITEMS = TypeAdapter(list[PendingApprovalItem])
PAGE = 100  # waiting prompts per page unless `limit` says otherwise
Limit = Annotated[int, Query(ge=1, le=PAGE_SIZE, description="The calls of at most this many waiting prompts.")]
Cursor = Annotated[str | None, Query(max_length=4096, pattern=r"^[A-Za-z0-9_-]+$", description=(
    "The next page: the `cursor` of the last page's `Link: <...>; rel=\"next\"` header."))]


async def _page(caller: Principal, service: AgentService, limit: int, cursor: str | None) -> PendingList:
    try:
        return await service.pending(caller, limit=limit, cursor=cursor)
    except ValueError as exc:  # a cursor this list did not give
        raise Problem("invalid-request", str(exc)) from None


async def _items(caller: Principal, service: AgentService, found: PendingList) -> list[PendingApprovalItem]:
    """The page's rows as items. Built without validating again (`model_construct`): every field comes from a
    validated `PendingApproval`, and re-validating `input` and `input_schema` was most of a long list's time."""
    contexts = await service.approval_contexts(found.rows)
    return [PendingApprovalItem.of(
        row, can_decide=service.may_decide(caller, row.user_id, row),
        context=contexts.get((row.prompt_id, row.tool_call_id)),
        links=links(service, row.prompt_id, row.conversation_id))
        for row in found.rows]


@router.get("/approvals", response_model=list[PendingApprovalItem])
async def pending(caller: Caller, service: Service, limit: Limit = PAGE, cursor: Cursor = None) -> Response:
    """The waiting tool calls the caller may see, across prompts, each with its context (the prompt's text,
    the model's message, the calls of the same response): those of one page of at most `limit` waiting
    prompts. `X-Total-Count` says how many prompts wait in all; a `Link: <...>; rel="next"` header gives the
    next page while there is one."""
    found = await _page(caller, service, limit, cursor)
    headers = {"X-Total-Count": str(found.total)}
    if found.next_cursor is not None:
        headers["Link"] = f'</approvals?limit={limit}&cursor={found.next_cursor}>; rel="next"'
    return Response(ITEMS.dump_json(await _items(caller, service, found)), media_type="application/json",
                    headers=headers)


@router.get("/approvals/events", response_class=EventSourceResponse)
async def pending_events(caller: Caller, service: Service, config: Config,
                         interval: Annotated[float, Query(ge=0.2, le=60)] = 1.0,
                         limit: Limit = PAGE) -> EventSourceResponse:
    """The caller's pending approvals (the first page, as `GET /approvals`) as SSE: an `approvals` event with
    the list whenever it changes (checked every `interval` seconds through the search attributes), until the
    client disconnects."""

    async def changes() -> AsyncIterator[ServerSentEvent]:
        previous = None
        while True:
            current = ITEMS.dump_json(await _items(caller, service, await _page(caller, service, limit, None)))
            if current != previous:
                previous = current
                yield ServerSentEvent(data=current.decode(), event="approvals")
            await asyncio.sleep(interval)

    return EventSourceResponse(changes(), ping=config.heartbeat_seconds, sep="\n")


@router.post("/prompts/{prompt_id}/approvals/{tool_call_id:path}/approve", response_model=ToolOutput)
async def approve(prompt_id: PathId, tool_call_id: CallPath, caller: Caller, service: Service,
                  body: Approve | None = None) -> ToolOutput:
    """Approve (optionally with corrected arguments); returns the call once it has run. The approver
    recorded is the caller."""
    return await service.decide(caller, prompt_id, tool_call_id, "approve", corrected=body.input if body else None)


@router.post("/prompts/{prompt_id}/approvals/{tool_call_id:path}/reject", response_model=ToolOutput)
async def reject(prompt_id: PathId, tool_call_id: CallPath, caller: Caller, service: Service,
                 body: Reject | None = None) -> ToolOutput:
    return await service.decide(caller, prompt_id, tool_call_id, "reject", reason=body.reason if body else None)


@router.get("/prompts/{prompt_id}/approvals", response_model=list[PendingApprovalItem])
async def prompt_approvals(prompt_id: PathId, caller: Caller, service: Service) -> list[PendingApprovalItem]:
    """The calls this prompt waits for now (its sub-agents' included, as `<call>/<its call>`), each with the
    tool's input schema; straight from the prompt, so a call its event stream shows waiting is listed here."""
    handle, prompt = await service.prompt(caller, prompt_id)
    pending = await service.own_calls(prompt, await handle.pending_approvals())  # sub-agents': from their own
    on_this = {"prompt_id": prompt_id, "user_id": prompt.user_id, "conversation_id": prompt.conversation_id}
    return [PendingApprovalItem.of(call.model_copy(update=on_this),
                                   can_decide=service.may_decide(caller, prompt.user_id, call),
                                   links=links(service, prompt_id))
            for call in pending]
