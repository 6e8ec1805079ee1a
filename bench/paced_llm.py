"""A fake OpenAI Responses server that answers at a real model's pace: a time to first token, then tokens at a
rate, streamed as the Responses API's server-sent events (the subset the OpenAI SDK needs for text and function
calls; `tests/fakes/llm_server.py` speaks the whole protocol, and the providers' tests hold it to the SDK).

Unlike `FakeLLMServer`'s queue, the reply is computed from each request (`respond`), so any number of prompts
can talk to it at once; `pace` can change between requests. Served by uvicorn in the caller's event loop
(`serve_paced_llm`). A request without `stream: true` is answered whole after the same total time. `calls`
records every request's arrival and how long it was served, for the time the model itself took.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from durable_agent.api.server import serve_in_background

TEXT_DELTA_EVENT = "event: response.output_text.delta"


@dataclass(frozen=True)
class FakeCall:
    """A function call the model makes."""

    name: str
    arguments: dict[str, Any]
    id: str = "call_0"


def responses_body(text: str | None, calls: Sequence[FakeCall], output_tokens: int, model: str) -> dict[str, Any]:
    """`POST /v1/responses`: the response object."""
    output: list[dict[str, Any]] = []
    if text is not None:
        output.append({"type": "message", "id": "msg_paced", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{i}", "call_id": call.id, "name": call.name,
                "arguments": json.dumps(call.arguments), "status": "completed"} for i, call in enumerate(calls)]
    return {"id": "resp_paced", "object": "response", "created_at": 0, "model": model, "status": "completed",
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": 100 + output_tokens}}


def responses_events(body: dict[str, Any]) -> list[str]:
    """The same response as the Responses API streams it: text word by word, each call's arguments whole."""
    sequence = itertools.count()
    events: list[str] = []

    def emit(kind: str, **fields: Any) -> None:
        data = json.dumps({"type": kind, "sequence_number": next(sequence), **fields})
        events.append(f"event: {kind}\ndata: {data}\n\n")

    pending = {**body, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=pending)
    emit("response.in_progress", response=pending)
    for index, item in enumerate(body["output"]):
        if item["type"] == "message":
            emit("response.output_item.added", output_index=index, item={**item, "status": "in_progress",
                                                                          "content": []})
            part = item["content"][0]
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            emit("response.content_part.added", **where, part={**part, "text": ""})
            for piece in re.findall(r"\s*\S+\s*|\s+", part["text"]):
                emit("response.output_text.delta", **where, delta=piece, logprobs=[])
            emit("response.output_text.done", **where, text=part["text"], logprobs=[])
            emit("response.content_part.done", **where, part=part)
        else:
            emit("response.output_item.added", output_index=index, item={**item, "arguments": "",
                                                                          "status": "in_progress"})
            emit("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                 delta=item["arguments"])
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                 name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=body)
    return events


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

    def gaps(self, since: float = 0.0) -> list[float]:
        """Seconds from the end of each request that arrived after `since` to the arrival of the next: a round's
        time beyond the model between two model calls (its tool, the runtime's own work, the next request)."""
        calls = sorted((arrived, served) for arrived, served in self.calls if arrived >= since)
        return [after[0] - (arrived + served) for (arrived, served), after in itertools.pairwise(calls)]

    async def _responses(self, request: Request) -> Response:
        arrived, pace = time.monotonic(), self.pace
        body = await request.json()
        calls = list(self.respond(body))
        reply = responses_body(pace.text() if pace.tokens else None, calls, pace.tokens, self.model)
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
