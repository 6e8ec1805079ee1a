"""`ScriptedModel`: a deterministic model for tests and the offline quick start.

Built from a list of canned responses (round N gets item N-1, so it is stateless and retry-safe) or from a
function of the request. Tool calls without an id get `call_r{round}_{i}`; a response without usage gets
a rough one (characters // 4) so usage sums are testable. Every request is recorded in `.requests`.

`stream` serves the same response as `complete` and hands its text to `on_text` word by word (each chunk
keeps its trailing whitespace, so the chunks join to the exact text).
"""

from __future__ import annotations

import inspect
import json
import re
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

from pydantic import JsonValue

from durable_agent.agent.messages import (
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ToolResultMessage,
    UserMessage,
)
from durable_agent.agent.models import Usage
from durable_agent.agent.providers.base import FatalModelError, ModelError, TextSink

ScriptFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]
_WORDS = re.compile(r"\s*\S+\s*|\s+")


def split_words(text: str) -> list[str]:
    """`"Hello big  world"` -> `["Hello ", "big  ", "world"]`; the chunks join back to `text`."""
    return _WORDS.findall(text)


def estimate_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    """Roughly four characters per token, one model call."""
    input_chars = len(request.instructions) + sum(m.chars for m in request.messages)
    output_chars = len(response.text or "") + sum(
        len(c.tool) + len(json.dumps(c.arguments)) for c in response.tool_calls
    )
    return Usage(input_tokens=input_chars // 4, output_tokens=output_chars // 4, model_calls=1)


def results_since_last_user(request: ModelRequest) -> list[ToolResultMessage]:
    """The tool results of the current turn (after the last user message): what a script's round answers."""
    results: list[ToolResultMessage] = []
    for message in request.messages:
        if isinstance(message, UserMessage):
            results.clear()
        elif isinstance(message, ToolResultMessage):
            results.append(message)
    return results


def text(text: str) -> ModelResponse:
    """A response with only text."""
    return ModelResponse(text=text)


def tool_calls(
    *calls: tuple[str, JsonValue], text: str | None = None, round: int | None = None
) -> ModelResponse:
    """A response calling tools, e.g. `tool_calls(("weather.get", {"city": "Paris"}))`.

    Ids are `call_r{round}_{i}`; without `round` they are filled in from the request's round when served.
    """
    return ModelResponse(
        text=text,
        tool_calls=[
            ModelToolCall(id="" if round is None else f"call_r{round}_{i}", tool=tool, arguments=arguments)
            for i, (tool, arguments) in enumerate(calls)
        ],
    )


MAX_RECORDED_REQUESTS = 1000


class ScriptedModel:
    """A `ModelProvider` that answers from a script instead of a network call."""

    name = "scripted"
    text = staticmethod(text)
    tool_calls = staticmethod(tool_calls)

    def __init__(self, script: Sequence[ModelResponse] | ScriptFunction, *, model: str = "scripted"):
        self.model = model
        self._script = script
        # The most recent requests, for tests to assert on; bounded so a long-running worker does not grow.
        self.requests: deque[ModelRequest] = deque(maxlen=MAX_RECORDED_REQUESTS)
        self._served: set[int] = set()  # the script indexes served at least once (bounded by the script)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._serve(request)

    def assert_complete(self) -> None:
        """Raise `AssertionError` unless every response of a list script was served at least once.

        A test whose prompt ended before the script expected (a tool that was never called, an approval that
        was never asked for) fails here with the rounds it skipped. A function script has no fixed length, so
        this checks nothing for it.
        """
        if callable(self._script):
            return
        unserved = [i + 1 for i in range(len(self._script)) if i not in self._served]
        if unserved:
            rounds = ", ".join(str(r) for r in unserved)
            raise AssertionError(
                f"scripted model {self.model!r}: {len(unserved)} of {len(self._script)} scripted responses were "
                f"never served (round {rounds}); the prompt ended before the script expected")

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse:
        response = await self._serve(request)
        for reasoning in response.reasoning if on_reasoning is not None else []:
            for chunk in split_words(reasoning.summary):
                await on_reasoning(chunk)
        for chunk in split_words(response.text or ""):
            await on_text(chunk)
        return response

    async def _serve(self, request: ModelRequest) -> ModelResponse:
        # A copy of the request and of its message list (a caller appending later does not change the record),
        # sharing the messages themselves: a deep copy took ~60-90 ms per call at 2,000 messages (a 500-turn
        # conversation), a cost of this test double that no real provider has.
        self.requests.append(request.model_copy(update={"messages": list(request.messages)}))
        # One deep copy of the script's response (a list script serves the same object on every retry), then
        # completed in place: call ids, model name and a usage estimate.
        response = (await self._respond(request)).model_copy(deep=True)
        for i, call in enumerate(response.tool_calls):
            if not call.id:
                call.id = f"call_r{request.round}_{i}"
        response.model = response.model or self.model
        if response.usage == Usage():
            response.usage = estimate_usage(request, response)
        return response

    async def _respond(self, request: ModelRequest) -> ModelResponse:
        if callable(self._script):
            try:
                result = self._script(request)
                if inspect.isawaitable(result):
                    result = await result
            except ModelError:
                raise
            except Exception as exc:
                raise FatalModelError(f"scripted model function failed: {type(exc).__name__}: {exc}") from exc
            if not isinstance(result, ModelResponse):
                raise FatalModelError(f"scripted model function returned {type(result).__name__}, "
                                      "expected ModelResponse")
            return result
        index = request.round - 1
        if not 0 <= index < len(self._script):
            raise FatalModelError(f"scripted model has no response for round {request.round}")
        self._served.add(index)
        return self._script[index]
