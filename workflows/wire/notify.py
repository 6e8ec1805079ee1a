"""Notifications on the wire: the notify activity's input and result."""

from __future__ import annotations

from pydantic import Field, JsonValue

from durable_agent.agent.notify import Channel
from durable_agent.agent.strict import StrictModel as _Model
from durable_agent.workflows.wire.decisions import PendingApproval


class Notice(_Model):
    """One step's message on one channel (activity `dagent.notify`) about one waiting call. `key` is the same
    on every attempt."""

    key: str
    channel: Channel
    step: str
    call: PendingApproval = Field(description="The waiting call (its arguments as they are now).")
    to: list[str] = Field(default_factory=list)
    decision: JsonValue = Field(default=None, description="The decision, for the `decided` step (updates in place).")
    refs: list[str] = Field(default_factory=list, description="Messages to update in place (the `decided` step).")


class NoticeResult(_Model):
    to: list[str] = Field(default_factory=list)
    unreached: list[str] = Field(default_factory=list)
    refs: list[str] = Field(default_factory=list)
