"""What the providers built on a vendor SDK share: the client (SDK retries off), the name in records, and
every failure turned into a `ModelError` with the API key scrubbed from its text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from durable_agent.agent.messages import ModelResponse
from durable_agent.agent.providers.base import ModelError
from durable_agent.agent.providers.errors import to_model_error, truncated_stream

T = TypeVar("T")


class SDKProvider:
    """Subclasses set `name` and call the SDK through `_complete` / `_finish`."""

    name = "sdk"

    def __init__(self, *, model: str, api_key: str | None, client: Any, name: str | None) -> None:
        self.model = model
        self._api_key = api_key
        self.name = name or type(self).name
        self._client = client

    def _error(self, exc: Exception) -> ModelError:
        return to_model_error(exc, provider=self.name, model=self.model, secrets=[self._api_key])

    async def _complete(self, call: Callable[[], Awaitable[T]], parse: Callable[[T], ModelResponse]) -> ModelResponse:
        """One request and its parsed response; any failure of either is a `ModelError`."""
        try:
            return parse(await call())
        except Exception as exc:
            raise self._error(exc) from None

    def _finish(self, ended: T | None, missing: str, parse: Callable[[T], ModelResponse]) -> ModelResponse:
        """The response of a stream that ended with `ended`; None: it ended before `missing` came (retryable)."""
        if ended is None:
            raise truncated_stream(provider=self.name, model=self.model, missing=missing)
        try:
            return parse(ended)
        except Exception as exc:
            raise self._error(exc) from None
