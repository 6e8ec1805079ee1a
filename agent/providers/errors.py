"""SDK exceptions -> `RetryableModelError` / `FatalModelError`.

Temporal owns retries, so this only classifies: 408/409/429/5xx, connection errors and timeouts are
retryable (honouring `retry-after-ms` / `retry-after`); every other 4xx fails fast. Messages name the
provider, model and status, and never contain the API key (it is scrubbed even if a server echoes it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from email.utils import parsedate_to_datetime

import anthropic
import openai

from agent.providers.base import FatalModelError, ModelError, RetryableModelError

RETRYABLE_STATUSES = frozenset({408, 409, 429})
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


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


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


def _body_detail(body: object) -> str:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            if isinstance(message, str):
                return message
        elif isinstance(inner, str):
            return inner
    elif isinstance(body, str):
        return body
    return ""


def _scrub(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text[:_MAX_DETAIL]


def to_model_error(
    exc: Exception, *, provider: str, model: str, secrets: Iterable[str | None] = ()
) -> ModelError:
    """Classify any exception raised while calling a provider SDK. Already-classified errors pass through."""
    if isinstance(exc, ModelError):
        return exc
    secrets = list(secrets)
    where = f"{provider} model {model!r}"
    if isinstance(exc, openai.APIStatusError | anthropic.APIStatusError):
        status = exc.status_code
        detail = _scrub(_body_detail(exc.body) or exc.message, secrets)
        label = _STATUS_NAMES.get(status, "server error" if status >= 500 else "client error")
        message = f"{where}: HTTP {status} ({label})" + (f": {detail}" if detail else "")
        if is_retryable_status(status):
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
    return FatalModelError(f"{where}: {type(exc).__name__}: {_scrub(str(exc), secrets)}")
