"""Shared plumbing for the providers' `stream` methods.

Every failure raised by the SDK - when the request is sent, or at any point while the stream's body is read
(an error event, a dropped connection, a read timeout) - goes through the provider's own error mapping, so a
streamed call fails exactly like `complete`. An exception raised by the caller's `on_text` sink is not an SDK
failure: it passes through `guarded_events` untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

from durable_agent.agent.providers.base import ModelError

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)
ErrorMapper = Callable[[Exception], ModelError]


class _SDKStream(Protocol[T]):
    def __aiter__(self) -> AsyncIterator[T]: ...

    async def close(self) -> None: ...


async def open_stream(call: Awaitable[T], to_error: ErrorMapper) -> T:
    """Await the SDK call that starts a stream (an HTTP error status is raised here, before any event)."""
    try:
        return await call
    except Exception as exc:
        raise to_error(exc) from None


async def guarded_events(stream: _SDKStream[T], to_error: ErrorMapper) -> AsyncIterator[T]:
    """Yield the stream's events, mapping SDK failures with `to_error`; always closes the stream.

    Use it under `contextlib.aclosing` so the HTTP response is released as soon as the consumer stops.
    """
    try:
        async for event in stream:
            yield event
    except Exception as exc:
        raise to_error(exc) from None
    finally:
        with contextlib.suppress(Exception):
            await stream.close()


class Accumulator(Protocol[T_contra]):
    def add(self, event: T_contra) -> str | None: ...


async def accumulate(stream: _SDKStream[T], acc: Accumulator[T], on_text: Callable[[str], Awaitable[None]],
                     to_error: ErrorMapper, *, on_reasoning: Callable[[str], Awaitable[None]] | None = None) -> None:
    """Feed every event of `stream` to `acc`, passing the text deltas it returns to `on_text` and the reasoning
    deltas it collects in `acc.reasoning_deltas` (if it has that list) to `on_reasoning`.

    SDK and accumulator failures map through `to_error`; an exception from `on_text` passes unchanged.
    """
    async with contextlib.aclosing(guarded_events(stream, to_error)) as events:
        async for event in events:
            try:
                delta = acc.add(event)
            except Exception as exc:
                raise to_error(exc) from None
            if delta:
                await on_text(delta)
            pending: list[str] | None = getattr(acc, "reasoning_deltas", None)
            if pending:
                chunks = list(pending)
                pending.clear()
                if on_reasoning is not None:
                    for chunk in chunks:
                        await on_reasoning(chunk)


def event_type(event: Any) -> str:
    """An event's `type` (an SDK may hand over an event type it does not know as a loosely built object)."""
    value = getattr(event, "type", None)
    return value if isinstance(value, str) else ""
