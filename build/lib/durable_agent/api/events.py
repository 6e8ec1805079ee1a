"""A prompt's live events as server-sent events: stream offsets are the SSE ids, so `Last-Event-ID` resumes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import ServerSentEvent

from durable_agent.client import PromptHandle
from durable_agent.workflows.protocol import TextDelta

END_EVENT = "end"
DELTA_EVENT = "text_delta"


def resume_offset(last_event_id: str | None, from_offset: int | None) -> int:
    """Where to start: after the last event the client saw, else `from`, else the beginning."""
    if last_event_id is not None and last_event_id.strip().isdigit():
        return int(last_event_id.strip()) + 1
    return from_offset or 0


async def prompt_events(handle: PromptHandle, start: int) -> AsyncIterator[ServerSentEvent]:
    """Every event from `start` until the prompt finishes, then one `end` event (without an id) with its state."""
    async for offset, item in handle.live(start):
        if isinstance(item, TextDelta):  # live only (from heartbeats): no id, so resuming never expects it
            yield ServerSentEvent(data=item.model_dump_json(), event=DELTA_EVENT)
        elif offset is not None:
            yield ServerSentEvent(data=item.model_dump_json(), event=item.kind, id=str(offset))
    prompt = await handle.get()
    yield ServerSentEvent(data=json.dumps({"state": prompt.state, "error": prompt.error}), event=END_EVENT)
