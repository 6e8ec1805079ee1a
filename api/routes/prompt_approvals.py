"""`GET /prompts/{id}/approvals`: the calls one prompt waits for, read from the prompt itself (a query), not
from the visibility store, so they are never behind the prompt's own event stream. The chat page labels its
approval forms from here (the tool schema's titles and descriptions), on a fresh load and after a reload
alike: one source for both."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from durable_agent.api.auth import Principal, current_principal
from durable_agent.api.schemas import ID_PATTERN, Links, PendingApprovalItem
from durable_agent.api.service import AgentService

router = APIRouter(tags=["approvals"])
Caller = Annotated[Principal, Depends(current_principal)]
PathId = Annotated[str, Path(pattern=ID_PATTERN)]


def _service(request: Request) -> AgentService:
    service: AgentService = request.app.state.service
    return service


Service = Annotated[AgentService, Depends(_service)]


@router.get("/prompts/{prompt_id}/approvals", response_model=list[PendingApprovalItem])
async def prompt_approvals(prompt_id: PathId, caller: Caller, service: Service) -> list[PendingApprovalItem]:
    """The calls this prompt waits for now (its sub-agents' included, as `<call>/<its call>`), each with the
    tool's input schema; straight from the prompt, so a call its event stream shows waiting is listed here."""
    handle, prompt = await service.prompt(caller, prompt_id)
    pending = await service.own_calls(prompt, await handle.pending_approvals())  # sub-agents': from their own
    settings = service.agent.settings
    links = Links(self=f"/prompts/{prompt_id}", events=f"/prompts/{prompt_id}/events",
                  temporal_ui=settings.workflow_url(prompt_id) if settings.ui_url else None)
    on_this = {"prompt_id": prompt_id, "user_id": prompt.user_id, "conversation_id": prompt.conversation_id}
    return [PendingApprovalItem.of(call.model_copy(update=on_this),
                                   can_decide=service.may_decide(caller, prompt.user_id, call), links=links)
            for call in pending]
