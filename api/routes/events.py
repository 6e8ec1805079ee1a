"""Live events: a prompt's SSE stream (stream offsets are the SSE ids, so `Last-Event-ID` resumes), and AG-UI
runs over conversations."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Annotated

from ag_ui.core import RunAgentInput, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse
from sse_starlette import EventSourceResponse, ServerSentEvent

from durable_agent.agent.ids import CALLER_ID_PATTERN, caller_id_problem
from durable_agent.api.agui import agui_run
from durable_agent.api.problems import Problem
from durable_agent.api.routes.common import Caller, Config, PathId, Service
from durable_agent.api.routes.conversations import start_conversation
from durable_agent.api.schemas import StartConversation
from durable_agent.client import PromptHandle
from durable_agent.workflows.protocol import TextDelta, ToolProgress

router = APIRouter(tags=["events"])
END_EVENT = "end"
DELTA_EVENT = "text_delta"
PROGRESS_EVENT = "tool_progress"
MAX_OFFSET_DIGITS = 18  # a stream offset fits in 64 bits; `int` refuses strings over 4,300 digits (a 500)


def resume_offset(last_event_id: str | None, from_offset: int | None) -> int:
    """Where to start: after the last event the client saw, else `from`, else the beginning. A `Last-Event-ID`
    that is not one of this stream's ids (ASCII digits) is a 422 problem: `str.isdigit` alone also accepts
    Unicode digits such as "²", which `int` refuses."""
    value = (last_event_id or "").strip()
    if not value:
        return from_offset or 0
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_OFFSET_DIGITS:
        raise Problem("invalid-request", "Last-Event-ID must be the id of an event of this stream (ASCII digits, "
                                         f"at most {MAX_OFFSET_DIGITS})")
    return int(value) + 1


async def prompt_events(handle: PromptHandle, start: int) -> AsyncIterator[ServerSentEvent]:
    """Every event from `start` until the prompt finishes, then one `end` event (without an id) with its state."""
    async for offset, item in handle.live(start):
        if isinstance(item, TextDelta):  # live only (from heartbeats): no id, so resuming never expects it
            yield ServerSentEvent(data=item.model_dump_json(), event=DELTA_EVENT)
        elif isinstance(item, ToolProgress):  # the same: a running tool's latest `report_progress`
            yield ServerSentEvent(data=item.model_dump_json(), event=PROGRESS_EVENT)
        elif offset is not None:
            yield ServerSentEvent(data=item.model_dump_json(), event=item.kind, id=str(offset))
    prompt = await handle.get()
    yield ServerSentEvent(data=json.dumps({"state": prompt.state, "error": prompt.error}), event=END_EVENT)


@router.get("/prompts/{prompt_id}/events", response_class=EventSourceResponse)
async def events(prompt_id: PathId, caller: Caller, service: Service, config: Config,
                 last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
                 from_offset: Annotated[int | None, Query(alias="from", ge=0)] = None) -> EventSourceResponse:
    """Server-sent events: every output, state change, approval request and streamed text delta, with the
    stream offset as the SSE id. Reconnect with `Last-Event-ID` to continue without gap or repeat.
    Ends with an `end` event once the prompt finishes; comments every `heartbeat_seconds` keep it open."""
    handle, _ = await service.prompt(caller, prompt_id)
    return EventSourceResponse(prompt_events(handle, resume_offset(last_event_id, from_offset)),
                               ping=config.heartbeat_seconds, sep="\n")


@router.post("/agui", response_class=StreamingResponse)
async def agui(body: RunAgentInput, caller: Caller, service: Service) -> StreamingResponse:
    """AG-UI: `thread_id` is a conversation (started for the caller when new). Without `resume`, the last
    user message becomes a prompt; with `resume`, the entries decide the interrupted calls of the prompt
    named by `forwarded_props.prompt_id` and the run continues. Tool approvals arrive as an interrupt."""
    thread_id = body.thread_id
    if (problem := caller_id_problem(thread_id, "threadId")) is not None:
        raise Problem("invalid-request", problem)
    props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    if body.resume:
        prompt_id = props.get("prompt_id")
        if not isinstance(prompt_id, str) or not re.fullmatch(CALLER_ID_PATTERN, prompt_id):
            raise Problem("invalid-request", "resuming needs forwarded_props.prompt_id (a prompt id)")
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
    return StreamingResponse((encoder.encode(event) async for event in run), media_type=encoder.get_content_type(),
                             headers={"X-Prompt-Id": handle.id, "Cache-Control": "no-store"})
