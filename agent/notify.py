"""Who is told of a call waiting for approval, through which channels, and when: the first message, reminders,
an escalation that adds deciders, all before the approval's expiry (docs/telling-approvers.md).

Pure models and functions, no I/O and no Temporal: the tool's policy declares a `Notify` on its `Approval`
(or the deployment gives one to every approval that declares none); the workflow runs its steps on timers
(workflows/prompt/notifications.py) and the worker sends them (activities/notify.py).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field, JsonValue, field_validator

from durable_agent.agent.strict import StrictModel

Channel = Literal["slack", "email", "webhook"]
StepKind = Literal["requested", "reminder", "escalated", "decided"]
MAX_REMINDERS = 10
REDACTED = "[redacted]"
SECRET_KEY = re.compile(r"pass(word|phrase)?|secret|token|api[_-]?key|private[_-]?key|authorization|credential|"
                        r"cookie|session", re.IGNORECASE)
ADDRESSEE = re.compile(r"^(user|role|email|slack):.+$|^[^:]+$")


class Notify(StrictModel):
    """Who is told of a waiting call, and when. `to` names addressees: `user:alice`, `role:finance`, a bare
    name (a user), `email:ops@example.com`, `slack:#approvals` (a Slack channel) or `slack:U123` (a Slack
    user). Every step goes to every channel in `channels`; a channel reaches the addressees it can resolve."""

    channels: list[Channel] = Field(min_length=1)
    to: list[str] = Field(default_factory=list, description="Addressees of the first message and reminders.")
    remind_after: timedelta | None = Field(default=None, description=(
        "A reminder this long after the request, and again every `remind_after` (at most `max_reminders`)."))
    max_reminders: int = Field(default=3, ge=0, le=MAX_REMINDERS)
    escalate_after: timedelta | None = Field(default=None, description=(
        "This long after the request, `escalate_to` are told and may decide the call too."))
    escalate_to: list[str] = Field(default_factory=list, description="Approver entries added: `role:cfo`, `user:bob`.")

    @field_validator("to", "escalate_to")
    @classmethod
    def _addressees(cls, value: list[str]) -> list[str]:
        bad = [entry for entry in value if not ADDRESSEE.match(entry)]
        if bad:
            raise ValueError(f"addressees must be user:, role:, email:, slack: or a bare user id; not {bad}")
        return value

    @field_validator("remind_after", "escalate_after")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be positive")
        return value


class Step(StrictModel):
    """One step of a call's notifications: what is sent `at_seconds` after the request."""

    kind: StepKind
    number: int = 0  # the reminder's number (1, 2, ...); 0 for the other kinds
    at_seconds: float

    @property
    def name(self) -> str:
        """Stable within a call: part of the step's idempotency key."""
        return f"{self.kind}-{self.number}" if self.kind == "reminder" else self.kind


def schedule(remind_after: float | None, max_reminders: int, escalate_after: float | None,
             expires_after: float | None) -> list[Step]:
    """The timed steps after the first message, in time order, each strictly before the expiry (a step due at
    the expiry itself would only tell people of a call nobody can decide any more)."""
    steps: list[Step] = []
    if remind_after:
        steps += [Step(kind="reminder", number=n, at_seconds=remind_after * n) for n in range(1, max_reminders + 1)]
    if escalate_after:
        steps.append(Step(kind="escalated", at_seconds=escalate_after))
    steps = [s for s in steps if expires_after is None or s.at_seconds < expires_after]
    return sorted(steps, key=lambda s: (s.at_seconds, s.kind != "escalated"))


def redacted(value: JsonValue) -> JsonValue:
    """Arguments as shown to people outside the record: values under secret-looking keys replaced."""
    if isinstance(value, dict):
        return {key: REDACTED if SECRET_KEY.search(key) else redacted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def idempotency_key(prompt_id: str, run_id: str, call_id: str, step: str, channel: str) -> str:
    """The key of one step's message on one channel: the same across retries and worker crashes."""
    return f"{prompt_id}/{run_id}/{call_id}/{step}/{channel}"


class NoticeSent(StrictModel):
    """One step's message on one channel, as the record keeps it: what was sent, to whom, when, and whether it
    reached them (`error`: why not, after the retries)."""

    step: str
    channel: Channel
    to: list[str] = Field(default_factory=list, description="The addressees the channel reached.")
    at: datetime = Field(description="When the step was sent (the workflow's clock).")
    ok: bool = True
    error: str | None = None
    unreached: list[str] = Field(default_factory=list, description="Addressees the channel could not resolve.")
    refs: list[str] = Field(default_factory=list, description="The channel's message ids (Slack: `channel:ts`).")
