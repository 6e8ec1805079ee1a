"""A fake OpenAI Responses server that answers at a real model's pace: a time to first token, then tokens at a
rate, streamed as the Responses API's server-sent events (`tests/fakes/llm_server.py` builds them).

Unlike `FakeLLMServer`'s queue, the reply is computed from each request (`respond`), so any number of prompts
can talk to it at once; `pace` can change between requests. Served by uvicorn in the caller's event loop
(`serve_paced_llm`). A request without `stream: true` is answered whole after the same total time. `calls`
records every request's arrival and how long it was served, for the time the model itself took.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from durable_agent.api.server import serve_in_background
from tests.fakes.llm_server import FakeCall, FakeUsage, responses_body, responses_events

TEXT_DELTA_EVENT = "event: response.output_text.delta"


@dataclass(frozen=True)
class Pace:
    """How a call unfolds: nothing for `first_token_seconds`, then `tokens` words at `tokens_per_second`."""

    first_token_seconds: float = 0.4
    tokens: int = 60
    tokens_per_second: float = 50.0

    @property
    def seconds(self) -> float:
        rate = self.tokens_per_second
        return self.first_token_seconds + (self.tokens / rate if rate > 0 else 0.0)

    def text(self) -> str:
        return " ".join(f"w{i}" for i in range(self.tokens))


Respond = Callable[[dict[str, Any]], Sequence[FakeCall]]  # the request's JSON body -> tool calls (none: done)


@dataclass
class PacedLLM:
    respond: Respond
    pace: Pace = field(default_factory=Pace)
    model: str = "paced-model"
    calls: list[tuple[float, float]] = field(default_factory=list)  # (arrived, seconds served), monotonic

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/responses", self._responses, methods=["POST"])])

    def model_seconds(self, since: float = 0.0) -> float:
        """Seconds the model spent on the requests that arrived after `since` (time.monotonic())."""
        return sum(served for arrived, served in self.calls if arrived >= since)

    async def _responses(self, request: Request) -> Response:
        arrived, pace = time.monotonic(), self.pace
        body = await request.json()
        calls = list(self.respond(body))
        reply = responses_body(pace.text() if pace.tokens else None, calls,
                               FakeUsage(input_tokens=100, output_tokens=pace.tokens), self.model)
        if not body.get("stream"):
            await asyncio.sleep(pace.seconds)
            self.calls.append((arrived, time.monotonic() - arrived))
            return JSONResponse(reply)
        return StreamingResponse(self._paced(responses_events(reply), pace, arrived),
                                 media_type="text/event-stream")

    async def _paced(self, events: list[str], pace: Pace, arrived: float) -> AsyncIterator[str]:
        await asyncio.sleep(pace.first_token_seconds)
        gap = 1 / pace.tokens_per_second if pace.tokens_per_second > 0 else 0.0
        for event in events:
            if gap and event.startswith(TEXT_DELTA_EVENT):
                await asyncio.sleep(gap)
            yield event
        self.calls.append((arrived, time.monotonic() - arrived))


@contextlib.asynccontextmanager
async def serve_paced_llm(llm: PacedLLM) -> AsyncIterator[str]:
    """Serve `llm` on a free port in this event loop; yields the OpenAI SDK's `base_url` (…/v1)."""
    async with serve_in_background(llm.app()) as url:
        yield f"{url}/v1"


def function_call_outputs_after_last_user(body: dict[str, Any]) -> tuple[str, int]:
    """The last user message's text and how many tool results follow it in a Responses request's `input`."""
    items = body.get("input") or []
    if isinstance(items, str):
        return items, 0
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            results = sum(1 for later in items[index + 1:] if later.get("type") == "function_call_output")
            return str(content or ""), results
    return "", 0
