"""The calls a prompt waits on, kept in its memo so that one visibility query lists every waiting call.

A prompt's memo entry `PENDING_MEMO_KEY` holds what `pending_approvals` would answer (its own waiting calls
and its sub-agents' calls, addressed `<call>/<call>`), rewritten by the workflow when a call starts or stops
waiting. `AgentClient.pending` reads it from `client.list_workflows(...)` instead of querying each prompt (a
query is a workflow task on the prompt's worker; at thousands of waiting prompts, thousands of them).

A call whose input and input schema together exceed `DETAIL_BYTES` of JSON keeps its row without them
(listed in `detail_omitted`): the memo stays small, and a list asks that prompt for the detail.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import BaseModel, Field
from temporalio.api.common.v1 import Payload

from durable_agent.workflows.protocol import PendingApproval

PENDING_MEMO_KEY: Final = "dagent.pending"  # a wire name: running prompts' memos carry it
DETAIL_BYTES: Final = 4096  # a call's input + input schema, as JSON, kept in the memo up to this size


class PendingMemo(BaseModel):
    """The memo value: the waiting calls, in record order."""

    calls: list[PendingApproval] = Field(default_factory=list)
    detail_omitted: list[str] = Field(default_factory=list, description=(
        "Calls listed without `input` and `input_schema` (too large for a memo): ask the prompt for them."))


def pending_memo(calls: list[PendingApproval]) -> dict[str, Any]:
    """The memo value for these waiting calls, as plain JSON (readable in the Temporal UI and CLI)."""
    kept: list[PendingApproval] = []
    omitted: list[str] = []
    for call in calls:
        if len(json.dumps([call.input, call.input_schema], separators=(",", ":"), default=str)) > DETAIL_BYTES:
            omitted.append(call.tool_call_id)
            call = call.model_copy(update={"input": None, "input_schema": None})
        kept.append(call)
    return PendingMemo(calls=kept, detail_omitted=omitted).model_dump(mode="json", exclude_defaults=True)


def read_plain_pending_memo(payload: Payload) -> PendingMemo | None:
    """The memo value straight from a plain-JSON payload (no codec, not stored outside history): one parse,
    without the data converter's per-call set-up (what listing thousands of prompts spends most on). None
    when the payload is not plain JSON (the caller decodes it with its data converter) or is unreadable."""
    if payload.metadata.get("encoding") != b"json/plain":
        return None
    try:
        return PendingMemo.model_validate_json(payload.data)
    except ValueError:
        return None


def read_pending_memo(value: object) -> PendingMemo | None:
    """The memo value as a model; None when absent (a prompt started before the memo existed) or unreadable."""
    if not isinstance(value, dict):
        return None
    try:
        return PendingMemo.model_validate(value)
    except ValueError:
        return None
