"""What watchers read: the live event stream's entries, streaming text and tool progress in heartbeats, and
the transcript query's pages.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from durable_agent.agent.events import EventKind, PromptEvent
from durable_agent.agent.models import Prompt, PromptOutput
from durable_agent.agent.strict import StrictModel as _Model  # the one strict base (agent/strict.py)


class EventDelivery(_Model):
    event: PromptEvent


class StreamEvent(_Model):
    """One entry of a prompt's live event stream; the stream offset is its sequence number."""

    kind: EventKind
    index: int | None = None
    output: PromptOutput | None = None
    state: str | None = None


class TextDelta(_Model):
    """Model text while it streams: `text` starts at `offset` in the round's text. The model activity keeps
    the text so far (its tail) in its heartbeat details, never in history; watchers read it from the
    prompt's pending activities and show only what is past what they already showed (a retried model
    call starts again at 0)."""

    round: int
    attempt: int
    offset: int
    text: str
    kind: Literal["text", "reasoning"] = "text"

    @property
    def end(self) -> int:
        return self.offset + len(self.text)

    def past(self, shown: int) -> str:
        """What this delta adds beyond the first `shown` characters of the round's text."""
        return self.text[max(shown - self.offset, 0):] if self.end > shown else ""


class StreamingText(_Model):
    """The heartbeat details of a model round that streams: its text and reasoning summary so far."""

    text: TextDelta | None = None
    reasoning: TextDelta | None = None


class ToolProgress(_Model):
    """What a running tool last reported with `ctx.report_progress`: carried in its activity's heartbeat
    details (never in history) and read by watchers from the prompt's pending activities."""

    tool_call_id: str
    tool: str
    message: str
    fraction: float | None = None


class TranscriptPageRequest(_Model):
    start: int = Field(default=0, ge=0, description="Position in the flat list: history outputs, then this prompt's.")
    max_bytes: int = Field(default=1_000_000, ge=1)


class TranscriptItem(_Model):
    prompt: int = Field(description="Index into the history; len(history) means the current prompt.")
    output: PromptOutput


class TranscriptPage(_Model):
    history: list[Prompt] = Field(default_factory=list, description="History headers (no outputs); first page only.")
    history_count: int
    output_count: int
    items: list[TranscriptItem]
    next_start: int | None = None
