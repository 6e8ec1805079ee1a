"""`/conversations`: start or attach to one, read it, send it a message (which becomes a prompt)."""

from __future__ import annotations

from fastapi import APIRouter

from durable_agent.agent.ids import caller_id_problem
from durable_agent.agent.models import Conversation
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, PathId, Service, links
from durable_agent.api.schemas import ConversationRecord, Links, PromptLink, SendMessage, StartConversation
from durable_agent.api.service import temporal_call
from durable_agent.workflows.names import CONVERSATION_WORKFLOW

router = APIRouter(tags=["conversations"])


@router.post("/conversations", status_code=201, response_model=ConversationRecord)
async def start_conversation(body: StartConversation, caller: Caller, service: Service) -> ConversationRecord:
    """Start a conversation as the caller, or attach to the caller's conversation with that id."""
    if body.conversation_id is not None:
        if (problem := caller_id_problem(body.conversation_id, "conversation_id")) is not None:
            raise Problem("invalid-request", problem)
        await service.require_kind(body.conversation_id, CONVERSATION_WORKFLOW, "conversation")
        try:
            existing = await service.conversation(caller, body.conversation_id)
        except Problem as exc:
            if exc.slug != "unknown-conversation":
                raise
        else:
            service.require_owner_or_admin(caller, existing.user_id, f"conversation {body.conversation_id!r}")
    handle = await service.agent.start_conversation(user_id=caller.id, conversation_id=body.conversation_id,
                                                    model=body.model, instructions=body.instructions)
    conversation = await handle.get()
    return ConversationRecord(conversation=conversation, links=Links(
        self=f"/conversations/{handle.id}", chat=f"/chat#conversation={handle.id}"))


@router.get("/conversations/{conversation_id}", response_model=ConversationRecord)
async def get_conversation(conversation_id: PathId, caller: Caller, service: Service) -> ConversationRecord:
    conversation: Conversation = await service.conversation(caller, conversation_id)
    return ConversationRecord(conversation=conversation, links=Links(
        self=f"/conversations/{conversation_id}", chat=f"/chat#conversation={conversation_id}"))


@router.post("/conversations/{conversation_id}/messages", status_code=201, response_model=PromptLink)
async def send(conversation_id: PathId, body: SendMessage, caller: Caller, service: Service) -> PromptLink:
    """Send a message to a conversation: it becomes a prompt (which may wait for the running one)."""
    conversation = await service.conversation(caller, conversation_id)
    service.require_owner_or_admin(caller, conversation.user_id, f"conversation {conversation_id!r}")
    handle = service.agent.conversation(conversation_id)
    prompt = await temporal_call(lambda: handle.send(body.input, user_id=conversation.user_id),
                                 missing="unknown-conversation", detail=f"no conversation {conversation_id!r}")
    return PromptLink(id=prompt.id, conversation_id=conversation_id, links=links(service, prompt.id, conversation_id))
