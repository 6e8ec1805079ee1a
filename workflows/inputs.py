"""Decode a workflow's input inside the workflow, so bad input fails the workflow with a clear reason.

When the SDK decodes a typed workflow argument and validation fails, the *workflow task* fails and is
retried forever: the workflow sits in Running. Taking the raw payload and decoding it here turns the
same mistake (e.g. a hand-written `temporal workflow start --input`) into a failed workflow that says why.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue

ModelT = TypeVar("ModelT", bound=BaseModel)
MAX_REASON_CHARS = 2000


def decode_input(raw: RawValue | ModelT, model: type[ModelT]) -> tuple[ModelT, str | None]:
    """(the decoded input, None), or (a default input, the reason it could not be decoded)."""
    if isinstance(raw, model):
        return raw, None
    try:
        payload = raw.payload if isinstance(raw, RawValue) else None
        if payload is None:
            raise TypeError(f"expected a JSON object, got {type(raw).__name__}")
        return workflow.payload_converter().from_payload(payload, model), None
    except (ValidationError, ValueError, TypeError, RuntimeError) as exc:
        cause = exc.__cause__ if isinstance(exc, RuntimeError) and exc.__cause__ else exc
        reason = f"invalid {model.__name__} input: {cause}"[:MAX_REASON_CHARS]
        return model(), reason
