"""A small server-sent-events reader over httpx streams (the wire format, parsed as a browser would)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx


@dataclass
class SSE:
    event: str
    data: str
    id: str | None
    comment: bool = False


async def read_sse(response: httpx.Response) -> AsyncIterator[SSE]:
    """Events (and comment lines, e.g. heartbeats, as `comment=True`) as they arrive."""
    event, data, event_id = "message", [], None
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SSE(event=event, data="\n".join(data), id=event_id)
            event, data, event_id = "message", [], None
        elif line.startswith(":"):
            yield SSE(event="", data=line[1:].strip(), id=None, comment=True)
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
