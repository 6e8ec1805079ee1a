"""What the providers built on a vendor SDK share: the client (SDK retries off), the name in records, and
every failure turned into a `ModelError` with the API key scrubbed from its text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from durable_agent.agent.messages import ModelResponse
from durable_agent.agent.providers.base import ModelError
from durable_agent.agent.providers.errors import to_model_error, truncated_stream

T = TypeVar("T")
KEPT = frozenset({"model", "extra_headers", "extra_query", "extra_body", "timeout"})  # parameters, not body fields


def sent_as_given(kwargs: dict[str, Any], *, emptied: Collection[str] = ()) -> dict[str, Any]:
    """An SDK `create` call's keyword arguments with the body's fields, but the model, moved into `extra_body`.

    The OpenAI SDK walks each typed parameter against its TypedDict schema before sending it, to rename aliased
    keys and format dates and files. The bodies the adapters build have none of those, so the walk changes nothing,
    yet it costs the worker about half a millisecond of CPU per transcript item on every call (bench/RESULTS.md).
    `extra_body` is merged into the JSON body as given, so the request on the wire is the same; a prompt's own
    `extra` settings (already in `extra_body`) still win over the fields they repeat. The model stays a parameter:
    the SDK reads it (Azure's deployment path). `emptied`: parameters its signature requires, passed empty and
    replaced by the body's. Only for a call nobody else reads: see `observed`.
    """
    body = {key: value for key, value in kwargs.items() if key not in KEPT}
    kept = {key: value for key, value in kwargs.items() if key in KEPT}
    return {**kept, **{key: [] for key in emptied if key in body},
            "extra_body": {**body, **kwargs.get("extra_body", {})}}


def observed(*functions: object) -> bool:
    """Whether something wraps one of these (`__wrapped__`: wrapt's proxies and `functools.wraps` both set it), as
    instrumentations of the SDK do (OpenTelemetry's, OpenLLMetry, Langfuse, Sentry) to record a call's parameters:
    they would find the request under `extra_body`."""
    return any(hasattr(function, "__wrapped__") for function in functions)


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
