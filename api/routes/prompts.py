"""`/me` and `/prompts`: who the caller is; start, list, read, steer and cancel prompts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from durable_agent.agent.models import PromptState
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, PathId, Service, links
from durable_agent.api.schemas import Me, PromptLink, PromptListItem, PromptRecord, StartPrompt, Steer
from durable_agent.client.priority import prompt_priority

router = APIRouter()


@router.get("/me", response_model=Me, tags=["identity"])
async def me(caller: Caller) -> Me:
    return Me(id=caller.id, roles=sorted(caller.roles), is_approver=caller.is_approver, is_admin=caller.is_admin)


@router.post("/prompts", status_code=201, response_model=PromptLink, tags=["prompts"])
async def start_prompt(body: StartPrompt, caller: Caller, service: Service) -> PromptLink:
    """Start a prompt as the caller (its `user_id` is the authenticated principal). The API assigns the id
    (random, never reused): a caller cannot choose one, so nobody can take another user's."""
    if body.prompt_id is not None:
        raise Problem("invalid-request", "prompt_id: the API assigns prompt ids; leave it out")
    handle = await service.agent.start(body.input, user_id=caller.id, model=body.model,
                                       instructions=body.instructions, max_rounds=body.max_rounds,
                                       priority=prompt_priority(caller.id, priority_key=body.priority))
    return PromptLink(id=handle.id, links=links(service, handle.id))


@router.get("/prompts", response_model=list[PromptListItem], tags=["prompts"])
async def list_prompts(caller: Caller, service: Service,
                       user: Annotated[str | None, Query(pattern=r"^[^'\\]{1,200}$")] = None,
                       conversation: Annotated[str | None, Query(pattern=r"^[^'\\]{1,200}$")] = None,
                       state: PromptState | None = None,
                       limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[PromptListItem]:
    """Prompts by user, conversation and state. Without an approver/admin role, only the caller's own."""
    if not caller.sees_everything:
        if user is not None and user != caller.id:
            raise Problem("not-allowed", "you may list only your own prompts")
        user = caller.id
    found = await service.agent.list_prompts(user_id=user, conversation_id=conversation, state=state, limit=limit)
    return [PromptListItem(**dict(p), links=links(service, p.prompt_id, p.conversation_id)) for p in found]


@router.get("/prompts/{prompt_id}", response_model=PromptRecord, tags=["prompts"])
async def get_prompt(prompt_id: PathId, caller: Caller, service: Service) -> PromptRecord:
    _, prompt = await service.prompt(caller, prompt_id)
    return PromptRecord(prompt=prompt, links=links(service, prompt_id, prompt.conversation_id))


@router.post("/prompts/{prompt_id}/steer", status_code=202, tags=["prompts"])
async def steer(prompt_id: PathId, body: Steer, caller: Caller, service: Service) -> dict[str, str]:
    handle, prompt = await service.prompt(caller, prompt_id)
    service.require_owner_or_admin(caller, prompt.user_id, f"prompt {prompt_id!r}")
    if prompt.finished_at is not None:
        raise Problem("prompt-finished", f"prompt {prompt_id!r} is already {prompt.state}")
    await handle.steer(body.message)
    return {"status": "accepted"}


@router.post("/prompts/{prompt_id}/cancel", status_code=202, tags=["prompts"])
async def cancel(prompt_id: PathId, caller: Caller, service: Service) -> dict[str, str]:
    handle, prompt = await service.prompt(caller, prompt_id)
    service.require_owner_or_admin(caller, prompt.user_id, f"prompt {prompt_id!r}")
    if prompt.finished_at is not None:
        raise Problem("prompt-finished", f"prompt {prompt_id!r} is already {prompt.state}")
    await handle.cancel()
    return {"status": "accepted"}
