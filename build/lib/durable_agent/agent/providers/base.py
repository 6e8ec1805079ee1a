"""The one interface every model provider implements, and the errors it may raise."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from durable_agent.agent.errors import DurableAgentError
from durable_agent.agent.messages import ModelRequest, ModelResponse


class ModelError(DurableAgentError):
    """Base class for provider failures. `retryable` tells the activity layer what to do."""

    retryable: bool = False

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class RetryableModelError(ModelError):
    """429, 5xx, connection errors, timeouts: try again later (after `retry_after` seconds if known)."""

    retryable = True


class FatalModelError(ModelError):
    """400/401/403/404/422 and other errors that will not heal by retrying: the prompt fails."""

    retryable = False


@runtime_checkable
class ModelProvider(Protocol):
    """Calls one model. Implementations never retry on their own: Temporal owns retries."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


TextSink = Callable[[str], Awaitable[None]]
"""Receives each text delta of a streamed model reply, in order; the deltas join to the reply's full text."""


@runtime_checkable
class StreamingModelProvider(ModelProvider, Protocol):
    """A provider that can also stream: `stream` returns exactly what `complete` would (same text, tool calls,
    usage), awaiting `on_text(delta)` for each text delta as it arrives. Errors are classified as in
    `complete`, including ones that happen mid-stream; an exception raised by `on_text` itself propagates
    unchanged. Reasoning summary / thinking deltas go to `on_reasoning` when given."""

    async def stream(self, request: ModelRequest, on_text: TextSink,
                     on_reasoning: TextSink | None = None) -> ModelResponse: ...
