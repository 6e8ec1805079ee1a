"""SDK exceptions -> `RetryableModelError` / `FatalModelError`.

Temporal owns retries, so this only classifies: 408/409/429/5xx, connection errors and timeouts are
retryable (honouring `retry-after-ms` / `retry-after`); every other 4xx fails fast. Messages name the
provider, model and status, and never contain the API key (it is scrubbed even if a server echoes it).

Streams add errors that arrive after a 200: an error event inside the stream is classified by its error
type / code (`overloaded_error`, `server_error`, `rate_limit_exceeded`, ... are retryable), a connection
dropped mid-body is retryable, and so is a stream that ends before its final event.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime

import anthropic
import httpx2
import openai

from durable_agent.agent.providers.base import FatalModelError, ModelError, RetryableModelError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Error types / codes sent inside a stream (after the 200) that a retry may cure.
RETRYABLE_STREAM_CODES = frozenset({
    "api_error", "internal_error", "internal_server_error", "overloaded", "overloaded_error",
    "rate_limit_error", "rate_limit_exceeded", "server_error", "service_unavailable", "timeout",
    "timeout_error", "too_many_requests", "vector_store_timeout",
    # Bedrock's exception frames (`:exception-type`), as the anthropic SDK's Bedrock client reports them
    "throttlingexception", "internalserverexception", "serviceunavailableexception", "modeltimeoutexception",
    "modelstreamerrorexception",
})
_MAX_DETAIL = 500

_STATUS_NAMES = {
    400: "bad request",
    401: "authentication failed",
    403: "permission denied",
    404: "not found",
    408: "request timeout",
    409: "conflict",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
}


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if present."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _inner(body: object) -> object:
    """An error body's error: `{"error": {...}}` or the body itself."""
    return body.get("error", body) if isinstance(body, Mapping) else body


def _body_detail(body: object) -> str:
    inner = _inner(body)
    if isinstance(inner, Mapping):
        message = inner.get("message")
        return message if isinstance(message, str) else ""
    return inner if isinstance(inner, str) else ""


def _scrub(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text[:_MAX_DETAIL]


def _stream_codes(body: object) -> list[str]:
    """`type` / `code` of an error body."""
    inner = _inner(body)
    if not isinstance(inner, Mapping):
        return []
    return [str(inner[key]) for key in ("type", "code") if isinstance(inner.get(key), str | int)]


def stream_error(
    codes: Iterable[str | None], detail: str, *, provider: str, model: str, secrets: Iterable[str | None] = ()
) -> ModelError:
    """An error event received inside a stream, classified by its error type / code."""
    known = [code for code in codes if code]
    label = "/".join(dict.fromkeys(known)) or "error"
    detail = _scrub(detail, list(secrets))
    message = f"{provider} model {model!r}: error in stream ({label})" + (f": {detail}" if detail else "")
    if any(code.lower() in RETRYABLE_STREAM_CODES for code in known):
        return RetryableModelError(message)
    return FatalModelError(message)


def truncated_stream(*, provider: str, model: str, missing: str) -> RetryableModelError:
    """The stream ended cleanly but before its final event: the reply is incomplete, so try again."""
    return RetryableModelError(f"{provider} model {model!r}: stream ended before {missing}")


def to_model_error(
    exc: Exception, *, provider: str, model: str, secrets: Iterable[str | None] = ()
) -> ModelError:
    """Classify any exception raised while calling a provider SDK. Already-classified errors pass through."""
    if isinstance(exc, ModelError):
        return exc
    secrets = list(secrets)
    where = f"{provider} model {model!r}"
    if isinstance(exc, anthropic.APIStatusError) and exc.status_code < 400:
        # an `error` event inside a 200 stream (the SDK raises it with the stream's status)
        detail = _body_detail(exc.body) or exc.message
        return stream_error(_stream_codes(exc.body), detail, provider=provider, model=model, secrets=secrets)
    if isinstance(exc, openai.APIStatusError | anthropic.APIStatusError):
        status = exc.status_code
        detail = _scrub(_body_detail(exc.body) or exc.message, secrets)
        label = _STATUS_NAMES.get(status, "server error" if status >= 500 else "client error")
        message = f"{where}: HTTP {status} ({label})" + (f": {detail}" if detail else "")
        if status in RETRYABLE_STATUSES or status >= 500:
            retry_after = parse_retry_after(exc.response.headers)
            return RetryableModelError(message, status=status, retry_after=retry_after)
        return FatalModelError(message, status=status)
    if isinstance(exc, openai.APITimeoutError | anthropic.APITimeoutError):
        return RetryableModelError(f"{where}: request timed out")
    if isinstance(exc, openai.APIConnectionError | anthropic.APIConnectionError):
        return RetryableModelError(f"{where}: connection error: {_scrub(str(exc.__cause__ or exc), secrets)}")
    if isinstance(exc, openai.APIResponseValidationError | anthropic.APIResponseValidationError):
        return FatalModelError(f"{where}: unexpected response: {_scrub(str(exc), secrets)}",
                               status=exc.status_code)
    if isinstance(exc, openai.APIError):
        # an `{"error": ...}` chunk inside a 200 stream
        codes = [exc.type, exc.code, *_stream_codes(exc.body)]
        return stream_error(codes, exc.message, provider=provider, model=model, secrets=secrets)
    if isinstance(exc, httpx2.TimeoutException):  # raised raw while reading a stream's body
        return RetryableModelError(f"{where}: request timed out")
    if isinstance(exc, httpx2.TransportError):
        return RetryableModelError(f"{where}: connection error: {_scrub(str(exc), secrets)}")
    return FatalModelError(f"{where}: {type(exc).__name__}: {_scrub(str(exc), secrets)}")
