"""A prompt's live events as server-sent events: stream offsets are the SSE ids, so `Last-Event-ID` resumes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import ServerSentEvent

from durable_agent.api.problems import Problem
from durable_agent.client import PromptHandle
from durable_agent.workflows.protocol import TextDelta, ToolProgress

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
