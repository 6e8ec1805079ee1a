"""Every entry point of a workflow takes its payloads raw and decodes them itself, so no input can wedge it.

When the SDK decodes a typed argument and fails, or calls a handler with the wrong number of arguments
(`temporal workflow signal --name reject` without `--input`, a start with two inputs), the exception is
raised outside our code: the *workflow task* fails and is retried forever, and the workflow sits in
Running. `raw_payloads` makes the SDK hand a single payload over undecoded and call the entry point with
whatever number of payloads arrived; `decode_payloads` turns them into the expected model or into a
reason, which the workflow records (signals), refuses with (update validators, queries) or fails with
(the run input).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from durable_agent.workflows import names

ModelT = TypeVar("ModelT", bound=BaseModel)
FnT = TypeVar("FnT", bound=Callable[..., Any])
MAX_REASON_CHARS = 2000


def raw_payloads(fn: FnT) -> FnT:
    """Declare `fn(self, *payloads)` to the SDK as taking one `RawValue`.

    The SDK uses a handler's declared parameter types only when their number matches the payloads sent:
    with exactly one payload `fn` receives it undecoded (decoding never fails); with none it is called
    with no argument; with several it gets them decoded without type hints (or the SDK drops a signal
    it cannot decode, logging why). `fn` must accept any number of positional arguments.
    """
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[-1].kind is not inspect.Parameter.VAR_POSITIONAL:
        raise TypeError(f"{fn.__qualname__} must take *payloads")
    self_param = params[0]
    payload = inspect.Parameter("payload", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=RawValue)
    fn.__signature__ = inspect.Signature([self_param, payload])  # type: ignore[attr-defined]
    returns = fn.__annotations__.get("return")
    fn.__annotations__ = {"payload": RawValue, **({"return": returns} if returns is not None else {})}
    return fn


def decode_payloads(payloads: Sequence[object], model: type[ModelT], *,
                    optional: bool = False) -> tuple[ModelT | None, str | None]:
    """(the decoded model, None) or (None, why it could not be decoded).

    With `optional`, no payload at all (or a JSON null) means the model's defaults.
    """
    if optional and not payloads:
        return model(), None
    if len(payloads) != 1:
        return None, f"expected one {model.__name__} payload, got {len(payloads)}"
    raw = payloads[0]
    if isinstance(raw, model):
        return raw, None
    try:
        if not isinstance(raw, RawValue):
            return model.model_validate(raw), None  # decoded by the SDK (several payloads were sent)
        converter = workflow.payload_converter()
        if optional and converter.from_payload(raw.payload) is None:
            return model(), None
        value = converter.from_payload(raw.payload, model)
        if not isinstance(value, model):  # e.g. binary/plain decodes to bytes whatever the type hint
            return None, f"not a valid {model.__name__} (got {type(value).__name__})"
        return value, None
    except Exception as exc:  # any payload at all may arrive here: every failure becomes a reason
        return None, _encrypted(raw) or _reason(model, exc)


ENCRYPTED = b"binary/encrypted"  # config/storage/codec.py ENCODING and KEY_ID_METADATA
ENCRYPTION_KEY_ID = "encryption-key-id"


def _encrypted(raw: object) -> str | None:
    """Why an encrypted payload reached the workflow undecrypted: the worker has no codec for its key."""
    if not isinstance(raw, RawValue) or raw.payload.metadata.get("encoding") != ENCRYPTED:
        return None
    key_id = raw.payload.metadata.get(ENCRYPTION_KEY_ID, b"").decode(errors="replace") or "?"
    return (f"the payload is encrypted with codec key {key_id!r} and this worker has no codec key: start the "
            "worker with the client's DAGENT_CODEC_KEYS (and DAGENT_CODEC_KEY_ID)")[:MAX_REASON_CHARS]


def invalid_input(problem: str) -> ApplicationError:
    return ApplicationError(problem, type=names.INVALID_INPUT_ERROR, non_retryable=True)


def decoded(payloads: Sequence[object], model: type[ModelT]) -> ModelT:
    """The payloads as `model`, or an `InvalidInput` error saying why not (an update or a run refuses with it)."""
    value, problem = decode_payloads(payloads, model)
    if value is None:
        raise invalid_input(problem or "no payload")
    return value


def decode_input(payloads: Sequence[object], model: type[ModelT]) -> tuple[ModelT, str | None]:
    """A workflow's run input: (the decoded input, None), or (a default input, the reason it is invalid)."""
    value, problem = decode_payloads(payloads, model)
    if value is None:
        what = "cannot read the" if problem and problem.startswith("the payload is encrypted") else "invalid"
        return model(), f"{what} {model.__name__} input: {problem}"[:MAX_REASON_CHARS]
    return value, None


def _reason(model: type[BaseModel], exc: BaseException) -> str:
    cause = exc.__cause__ if isinstance(exc, RuntimeError) and exc.__cause__ else exc
    if isinstance(cause, ValidationError):
        detail = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in cause.errors())
    else:
        detail = f"{type(cause).__name__}: {cause}"
    return f"not a valid {model.__name__} ({detail})"[:MAX_REASON_CHARS]
