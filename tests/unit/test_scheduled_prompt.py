"""`ToolContext.schedule_prompt` / `cancel_scheduled_prompt` (agent/context.py): typed side outputs, one-line errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from durable_agent.agent.context import DirectoryFileStore, Services, ToolContext
from durable_agent.agent.models import PromptRef, ScheduledPrompt


def _ctx(tmp_path: Path, conversation_id: str | None = "c1", key: str = "wf/call_r1_0") -> ToolContext:
    return ToolContext(prompt=PromptRef(prompt_id="p", user_id="u", conversation_id=conversation_id),
                       tool_call_id="call_r1_0",
                       idempotency_key=key, state={}, services=Services(), file_store=DirectoryFileStore(tmp_path))


def test_schedule_and_cancel_are_side_outputs_with_stable_ids(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    first = ctx.schedule_prompt("stretch", delay_seconds=60)
    again = _ctx(tmp_path).schedule_prompt("stretch", delay_seconds=60)  # a retry of the same call
    other = _ctx(tmp_path, key="wf/call_r1_1").schedule_prompt("stretch", delay_seconds=60)
    at = datetime(2030, 1, 1, tzinfo=UTC)
    ctx.schedule_prompt("new year", at=at, id="ny")
    cancel = ctx.cancel_scheduled_prompt("ny")
    assert first.id == again.id != other.id and first.id.startswith("sch-")
    assert ctx.side_outputs == [
        ScheduledPrompt(tool_call_id="call_r1_0", id=first.id, message="stretch", delay_seconds=60),
        ScheduledPrompt(tool_call_id="call_r1_0", id="ny", message="new year", at=at),
        ScheduledPrompt(tool_call_id="call_r1_0", id="ny", cancel=True),
    ] and cancel.cancel


def test_bad_requests_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^scheduling a prompt needs a conversation"):
        _ctx(tmp_path, conversation_id=None).schedule_prompt("x", delay_seconds=1)
    with pytest.raises(ValueError, match=r"^give exactly one of delay_seconds or at$"):
        _ctx(tmp_path).schedule_prompt("x")
    with pytest.raises(ValueError, match=r"^give exactly one of delay_seconds or at$"):
        _ctx(tmp_path).schedule_prompt("x", delay_seconds=1, at=datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        _ctx(tmp_path).schedule_prompt("x", delay_seconds=-1)
