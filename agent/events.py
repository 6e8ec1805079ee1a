"""Events plugins' `on_event` hooks receive."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue


class PromptEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["approval_requested", "approval_decided", "prompt_finished"]
    prompt_id: str
    user_id: str
    conversation_id: str | None = None
    tool_call_id: str | None = None
    tool: str | None = None
    input: JsonValue = None
    reason: str | None = None
    state: str | None = None
