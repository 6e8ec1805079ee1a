"""The FastAPI app: routes over `AgentClient`, authenticated, with problem+json errors and SSE.

`create_app(agent=..., config=...)` serves an existing client (tests, the quick start); without a client it
connects with `Settings.from_env()` at startup (`dagent api`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated

from ag_ui.core import RunAgentInput, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import Depends, FastAPI, Header, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.staticfiles import StaticFiles
from sse_starlette import EventSourceResponse, ServerSentEvent

from durable_agent.agent.models import Conversation, PromptState, ToolOutput
from durable_agent.api.agui import agui_run
from durable_agent.api.auth import Authenticator, Principal, current_principal
from durable_agent.api.config import ApiConfig
from durable_agent.api.events import prompt_events, resume_offset
from durable_agent.api.headers import SecurityHeadersMiddleware
from durable_agent.api.limits import BodyLimitMiddleware
from durable_agent.api.problems import PROBLEM_BASE, PROBLEM_TYPES, Problem, install_problem_handlers
from durable_agent.api.prompt_approvals import router as prompt_approval_routes
from durable_agent.api.schedules import router as schedule_routes
from durable_agent.api.schemas import (
    CALL_PATH_PATTERN,
    ID_PATTERN,
    Approve,
    ConversationRecord,
    Links,
    Me,
    PendingApprovalItem,
    PromptListItem,
    PromptRecord,
    PromptRef,
    Reject,
    SendMessage,
    StartConversation,
    StartPrompt,
    Steer,
)
from durable_agent.api.service import AgentService, temporal_call
from durable_agent.client import AgentClient
from durable_agent.client.priority import prompt_priority
from durable_agent.workers.settings import Settings
from durable_agent.workflows.names import CONVERSATION_WORKFLOW

Caller = Annotated[Principal, Depends(current_principal)]
PathId = Annotated[str, Path(pattern=ID_PATTERN)]
# A call of this prompt, or a sub-agent's addressed through it: `<call>/<its call>` (the `/` sent as %2F or as is).
CallPath = Annotated[str, Path(pattern=CALL_PATH_PATTERN)]
STATIC = resources.files("durable_agent.api") / "static"
SWAGGER_ASSETS = resources.files("fastapi_offline") / "static"  # Swagger UI and ReDoc, shipped on PyPI
DOCS_ASSETS = "/docs-assets"


def _service(request: Request) -> AgentService:
    service: AgentService = request.app.state.service
    return service


Service = Annotated[AgentService, Depends(_service)]


def _links(service: AgentService, prompt_id: str, conversation_id: str | None = None) -> Links:
    settings = service.agent.settings
    return Links(self=f"/prompts/{prompt_id}", events=f"/prompts/{prompt_id}/events",
                 temporal_ui=settings.workflow_url(prompt_id) if settings.ui_url else None,
                 chat=f"/chat#conversation={conversation_id}" if conversation_id else None)


def create_app(agent: AgentClient | None = None, config: ApiConfig | None = None,
               settings: Settings | None = None) -> FastAPI:
    config = config or ApiConfig.load()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        client = agent or await AgentClient.connect(settings or Settings.from_env())
        app.state.service = AgentService(client, config)
        yield

    app = FastAPI(title="Durable Agent API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Prompts, conversations, approvals and live events of Durable Agent. "
                              "Every request needs `Authorization: Bearer <API key or JWT>`; errors are "
                              "RFC 9457 problem details (`application/problem+json`).")
    app.state.authenticator = Authenticator(config)
    app.state.config = config
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    app.add_middleware(SecurityHeadersMiddleware)
    install_problem_handlers(app)
    app.include_router(schedule_routes)  # recurring prompts (api/schedules.py)
    app.include_router(prompt_approval_routes)  # one prompt's waiting calls (api/prompt_approvals.py)
    app.include_router(__import__("durable_agent.api.budgets", fromlist=["router"]).router)  # api/budgets.py
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(SWAGGER_ASSETS)), name="docs-assets")

    # --- pages (no data without a token: they call the API from the browser) ---------------------

    @app.get("/", include_in_schema=False)
    async def index() -> Response:
        return HTMLResponse('<!doctype html><meta charset="utf-8"><title>Durable Agent</title>'
                            '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
                            '<p><a href="/inbox">Approvals inbox</a> · <a href="/chat">Chat</a> · '
                            '<a href="/docs">API docs</a></p>')

    @app.get("/inbox", include_in_schema=False)
    async def inbox_page() -> Response:
        return HTMLResponse((STATIC / "inbox.html").read_text())

    @app.get("/chat", include_in_schema=False)
    async def chat_page() -> Response:
        return HTMLResponse((STATIC / "chat.html").read_text())

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml",
                        headers={"Cache-Control": "max-age=86400"})

    # API docs from local files (no CDN: they work offline), started by a script file (no inline script).
    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Response:
        return HTMLResponse((STATIC / "docs.html").read_text())

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> Response:
        return HTMLResponse((STATIC / "redoc.html").read_text())

    @app.get("/problems/{slug}", include_in_schema=False)
    async def problem_doc(slug: str) -> Response:
        if slug not in PROBLEM_TYPES:
            raise Problem("not-found", f"no problem type {slug!r}")
        status, title = PROBLEM_TYPES[slug]
        return JSONResponse({"type": PROBLEM_BASE + slug, "title": title, "status": status})

    # --- identity --------------------------------------------------------------------------------

    @app.get("/me", response_model=Me, tags=["identity"])
    async def me(caller: Caller) -> Me:
        return Me(id=caller.id, roles=sorted(caller.roles), is_approver=caller.is_approver, is_admin=caller.is_admin)

    # --- prompts ---------------------------------------------------------------------------------

    @app.post("/prompts", status_code=201, response_model=PromptRef, tags=["prompts"])
    async def start_prompt(body: StartPrompt, caller: Caller, service: Service) -> PromptRef:
        """Start a prompt as the caller (its `user_id` is the authenticated principal). The API assigns the id
        (random, never reused): a caller cannot choose one, so nobody can take another user's."""
        if body.prompt_id is not None:
            raise Problem("invalid-request", "prompt_id: the API assigns prompt ids; leave it out")
        handle = await service.agent.start(body.input, user_id=caller.id, model=body.model,
                                           instructions=body.instructions, max_rounds=body.max_rounds,
                                           priority=prompt_priority(caller.id, priority_key=body.priority))
        return PromptRef(id=handle.id, links=_links(service, handle.id))

    @app.get("/prompts", response_model=list[PromptListItem], tags=["prompts"])
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
        return [PromptListItem(id=p.prompt_id, user_id=p.user_id, conversation_id=p.conversation_id, state=p.state,
                               status=p.status, started_at=p.started_at,
                               links=_links(service, p.prompt_id, p.conversation_id)) for p in found]

    @app.get("/prompts/{prompt_id}", response_model=PromptRecord, tags=["prompts"])
    async def get_prompt(prompt_id: PathId, caller: Caller, service: Service) -> PromptRecord:
        _, prompt = await service.prompt(caller, prompt_id)
        return PromptRecord(prompt=prompt, links=_links(service, prompt_id, prompt.conversation_id))

    @app.post("/prompts/{prompt_id}/steer", status_code=202, tags=["prompts"])
    async def steer(prompt_id: PathId, body: Steer, caller: Caller, service: Service) -> dict[str, str]:
        handle, prompt = await service.prompt(caller, prompt_id)
        service.require_owner_or_admin(caller, prompt.user_id, f"prompt {prompt_id!r}")
        if prompt.finished_at is not None:
            raise Problem("prompt-finished", f"prompt {prompt_id!r} is already {prompt.state}")
        await handle.steer(body.message)
        return {"status": "accepted"}

    @app.post("/prompts/{prompt_id}/cancel", status_code=202, tags=["prompts"])
    async def cancel(prompt_id: PathId, caller: Caller, service: Service) -> dict[str, str]:
        handle, prompt = await service.prompt(caller, prompt_id)
        service.require_owner_or_admin(caller, prompt.user_id, f"prompt {prompt_id!r}")
        if prompt.finished_at is not None:
            raise Problem("prompt-finished", f"prompt {prompt_id!r} is already {prompt.state}")
        await handle.cancel()
        return {"status": "accepted"}

    # --- approvals -------------------------------------------------------------------------------

    @app.get("/approvals", response_model=list[PendingApprovalItem], tags=["approvals"])
    async def pending(caller: Caller, service: Service) -> list[PendingApprovalItem]:
        """Every waiting tool call the caller may see, across prompts, each with its context (the prompt's
        text, the model's message, the calls of the same response)."""
        rows = await service.pending(caller)
        contexts = await service.approval_contexts(rows)
        return [PendingApprovalItem.of(row.call, prompt_id=row.prompt_id, user_id=row.user_id,
                                       conversation_id=row.conversation_id,
                                       can_decide=service.may_decide(caller, row.user_id, row.call),
                                       links=_links(service, row.prompt_id, row.conversation_id),
                                       context=contexts.get((row.prompt_id, row.call.tool_call_id)))
                for row in rows]

    @app.get("/approvals/events", tags=["approvals"], response_class=EventSourceResponse)
    async def pending_events(caller: Caller, service: Service,
                             interval: Annotated[float, Query(ge=0.2, le=60)] = 1.0) -> EventSourceResponse:
        """The caller's pending approvals as SSE: an `approvals` event with the whole list whenever it changes
        (checked every `interval` seconds through the search attributes), until the client disconnects."""

        async def changes() -> AsyncIterator[ServerSentEvent]:
            previous = None
            while True:
                items = await pending(caller, service)
                current = json.dumps([item.model_dump(mode="json") for item in items])
                if current != previous:
                    previous = current
                    yield ServerSentEvent(data=current, event="approvals")
                await asyncio.sleep(interval)

        return EventSourceResponse(changes(), ping=config.heartbeat_seconds, sep="\n")

    @app.post("/prompts/{prompt_id}/approvals/{tool_call_id:path}/approve", response_model=ToolOutput,
              tags=["approvals"])
    async def approve(prompt_id: PathId, tool_call_id: CallPath, caller: Caller, service: Service,
                      body: Approve | None = None) -> ToolOutput:
        """Approve (optionally with corrected arguments); returns the call once it has run. The approver
        recorded is the caller."""
        return await service.decide(caller, prompt_id, tool_call_id, "approve",
                                    corrected=body.input if body else None)

    @app.post("/prompts/{prompt_id}/approvals/{tool_call_id:path}/reject", response_model=ToolOutput,
              tags=["approvals"])
    async def reject(prompt_id: PathId, tool_call_id: CallPath, caller: Caller, service: Service,
                     body: Reject | None = None) -> ToolOutput:
        return await service.decide(caller, prompt_id, tool_call_id, "reject", reason=body.reason if body else None)

    # --- conversations ---------------------------------------------------------------------------

    @app.post("/conversations", status_code=201, response_model=ConversationRecord, tags=["conversations"])
    async def start_conversation(body: StartConversation, caller: Caller, service: Service) -> ConversationRecord:
        """Start a conversation as the caller, or attach to the caller's conversation with that id."""
        if body.conversation_id is not None:
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

    @app.get("/conversations/{conversation_id}", response_model=ConversationRecord, tags=["conversations"])
    async def get_conversation(conversation_id: PathId, caller: Caller, service: Service) -> ConversationRecord:
        conversation: Conversation = await service.conversation(caller, conversation_id)
        return ConversationRecord(conversation=conversation, links=Links(
            self=f"/conversations/{conversation_id}", chat=f"/chat#conversation={conversation_id}"))

    @app.post("/conversations/{conversation_id}/messages", status_code=201, response_model=PromptRef,
              tags=["conversations"])
    async def send(conversation_id: PathId, body: SendMessage, caller: Caller, service: Service) -> PromptRef:
        """Send a message to a conversation: it becomes a prompt (which may wait for the running one)."""
        conversation = await service.conversation(caller, conversation_id)
        service.require_owner_or_admin(caller, conversation.user_id, f"conversation {conversation_id!r}")
        handle = service.agent.conversation(conversation_id)
        prompt = await temporal_call(lambda: handle.send(body.input, user_id=conversation.user_id),
                                     missing="unknown-conversation", detail=f"no conversation {conversation_id!r}")
        return PromptRef(id=prompt.id, conversation_id=conversation_id,
                         links=_links(service, prompt.id, conversation_id))

    # --- live events -----------------------------------------------------------------------------

    @app.get("/prompts/{prompt_id}/events", tags=["events"], response_class=EventSourceResponse)
    async def events(prompt_id: PathId, caller: Caller, service: Service,
                     last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
                     from_offset: Annotated[int | None, Query(alias="from", ge=0)] = None) -> EventSourceResponse:
        """Server-sent events: every output, state change, approval request and streamed text delta, with the
        stream offset as the SSE id. Reconnect with `Last-Event-ID` to continue without gap or repeat.
        Ends with an `end` event once the prompt finishes; comments every `heartbeat_seconds` keep it open."""
        handle, _ = await service.prompt(caller, prompt_id)
        return EventSourceResponse(prompt_events(handle, resume_offset(last_event_id, from_offset)),
                                   ping=config.heartbeat_seconds, sep="\n")

    @app.post("/agui", tags=["events"], response_class=StreamingResponse)
    async def agui(body: RunAgentInput, caller: Caller, service: Service) -> StreamingResponse:
        """AG-UI: `thread_id` is a conversation (started for the caller when new). Without `resume`, the last
        user message becomes a prompt; with `resume`, the entries decide the interrupted calls of the prompt
        named by `forwarded_props.prompt_id` and the run continues. Tool approvals arrive as an interrupt."""
        thread_id = body.thread_id
        if not re.match(ID_PATTERN, thread_id):
            raise Problem("invalid-request", f"threadId must match {ID_PATTERN}")
        props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
        if body.resume:
            prompt_id = props.get("prompt_id")
            if not isinstance(prompt_id, str):
                raise Problem("invalid-request", "resuming needs forwarded_props.prompt_id")
            handle, _ = await service.prompt(caller, prompt_id)
            last = None
            for entry in body.resume:
                payload = entry.payload if isinstance(entry.payload, dict) else {}
                approved = entry.status == "resolved" and payload.get("approved") is True
                corrected = payload.get("input") if isinstance(payload.get("input"), dict) else None
                await service.decide(caller, prompt_id, entry.interrupt_id, "approve" if approved else "reject",
                                     corrected=corrected, reason=payload.get("reason"))
                last = entry.interrupt_id
            run = agui_run(handle, thread_id=thread_id, run_id=body.run_id, skip_through_approval=last)
        else:
            text = next((m.content for m in reversed(body.messages)
                         if isinstance(m, UserMessage) and isinstance(m.content, str)), None)
            if not text:
                raise Problem("invalid-request", "the run needs a user message with text content")
            started = await start_conversation(StartConversation(conversation_id=thread_id), caller, service)
            prompt = await service.agent.conversation(started.conversation.id).send(text, user_id=caller.id)
            handle = await service.agent.conversation(thread_id).prompt_started(prompt.id, timeout=300)
            run = agui_run(handle, thread_id=thread_id, run_id=body.run_id)
        encoder = EventEncoder()

        async def stream() -> AsyncIterator[str]:
            async for event in run:
                yield encoder.encode(event)

        return StreamingResponse(stream(), media_type=encoder.get_content_type(),
                                 headers={"X-Prompt-Id": handle.id, "Cache-Control": "no-store"})

    return app
