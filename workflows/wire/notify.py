"""Notifications on the wire: a policy's `Notify` in wire units, and the notify activity's input and result."""

from __future__ import annotations

from pydantic import Field, JsonValue

from durable_agent.agent.notify import Channel, Notify
from durable_agent.agent.strict import StrictModel as _Model


class NotifyPlan(_Model):
    """`agent.notify.Notify` in wire units (seconds)."""

    channels: list[Channel]
    to: list[str] = Field(default_factory=list)
    remind_after_seconds: float | None = None
    max_reminders: int = 3
    escalate_after_seconds: float | None = None
    escalate_to: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, notify: Notify) -> NotifyPlan:
        return cls(channels=notify.channels, to=notify.to, max_reminders=notify.max_reminders,
                   remind_after_seconds=notify.remind_after.total_seconds() if notify.remind_after else None,
                   escalate_after_seconds=notify.escalate_after.total_seconds() if notify.escalate_after else None,
                   escalate_to=notify.escalate_to)


class Notice(_Model):
    """One step's message on one channel (activity `dagent.notify`). `key` is the same on every attempt."""

    key: str
    channel: Channel
    step: str
    prompt_id: str
    run_id: str
    user_id: str
    tool_call_id: str
    tool: str
    input: JsonValue = None
    reason: str
    to: list[str] = Field(default_factory=list)
    approvers: list[str] | None = None
    four_eyes: bool = False
    expires_at: str | None = None
    decision: JsonValue = Field(default=None, description="The decision, for the `decided` step (updates in place).")
    refs: list[str] = Field(default_factory=list, description="Messages to update in place (the `decided` step).")


class NoticeResult(_Model):
    to: list[str] = Field(default_factory=list)
    unreached: list[str] = Field(default_factory=list)
    refs: list[str] = Field(default_factory=list)
