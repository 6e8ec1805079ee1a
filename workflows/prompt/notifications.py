"""Telling approvers of a waiting call: the first message, reminders and an escalation, each step on a workflow
timer (durable across worker and server restarts) that stops the moment the call is decided, and, once it is
decided, the Slack messages updated in place. Each step's message on each channel is one `dagent.notify`
activity keyed by prompt, run, call, step and channel; a step that cannot be delivered after its retries is
recorded as failed and never fails or holds up the prompt. What was sent, to whom and when is on the call's
entry (`ToolOutput.notifications`) and, as each activity's summary, in the Temporal UI.

No Temporal decorators: the approvals desk (workflows/prompt/approvals.py) starts a call's notifications when it
waits and tells this room when the call is decided.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent.models import ToolOutput
from durable_agent.agent.notify import Channel, NoticeSent, Notify, idempotency_key, schedule
from durable_agent.workflows.activity_refs import NOTIFY
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.wire.decisions import PendingApproval
from durable_agent.workflows.wire.notify import Notice

NOTIFY_TIMEOUT = timedelta(seconds=15)  # a channel's own timeouts are 10 s (activities/notify.py)
NOTIFY_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                           maximum_interval=timedelta(minutes=1), maximum_attempts=6)
FLUSH_LIMIT = timedelta(seconds=60)  # how long a finished prompt waits for its last messages (the updates)
UPDATED_CHANNELS: tuple[Channel, ...] = ("slack",)
CALLED_OFF = "not sent: the call was decided first"  # channels whose messages are updated when the call is decided


class Notifications(Room):
    """`relist` is the desk's hook when a waiting call's listing changed: an escalation added deciders, or a step
    could not be delivered (it publishes the listing again)."""

    def __init__(self, context: PromptContext, *, relist: Callable[[], None]) -> None:
        super().__init__(context)
        self._relist = relist
        self._sending: dict[str, dict[asyncio.Task[None], Channel]] = {}  # call id -> its sends in flight

    def follow(self, waiting: PendingApproval, decided: Callable[[], bool]) -> None:
        """Tell the call's addressees now, and remind and escalate on timers until `decided()`."""
        plan = waiting.notify
        if plan is not None and not decided():
            self._host.spawn(self._follow(waiting, plan, decided))

    async def _follow(self, waiting: PendingApproval, plan: Notify, decided: Callable[[], bool]) -> None:
        requested_at = waiting.requested_at or self._host.now()
        told = list(plan.to)
        await self._step(waiting, plan, "requested", told)
        for step in schedule(_seconds(plan.remind_after), plan.max_reminders, _seconds(plan.escalate_after),
                             _seconds(waiting.expires_after)):
            due = requested_at + timedelta(seconds=step.at_seconds) - self._host.now()
            if due > timedelta(0):
                await self._host.wait(decided, due, f"{step.name} {waiting.tool} {waiting.tool_call_id}")
            if decided():
                return
            if step.kind == "escalated":
                self._escalate(waiting, plan.escalate_to)
                told += [who for who in plan.escalate_to if who not in told]
                await self._step(waiting, plan, step.name, plan.escalate_to)
            else:
                await self._step(waiting, plan, step.name, told)

    def _escalate(self, waiting: PendingApproval, added: list[str]) -> None:
        """`added` may decide the call from now on (a policy naming nobody already lets anyone decide whom the
        front door lets through: it stays so). The view is the entry's result: the record shows them too."""
        approvers = waiting.approvers
        if not approvers:
            return
        waiting.approvers = approvers + [who for who in added if who not in approvers]
        self._record.touch(self._entry(waiting))
        self._relist()

    async def _step(self, waiting: PendingApproval, plan: Notify, step: str, to: list[str]) -> None:
        await asyncio.gather(*(self._start(waiting, channel, step, to) for channel in plan.channels))

    def _entry(self, waiting: PendingApproval) -> ToolOutput:
        entry = self._record.tool_call(waiting.tool_call_id)
        assert entry is not None
        return entry

    def _start(self, waiting: PendingApproval, channel: Channel, step: str, to: list[str], *,
               refs: list[str] | None = None) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._send(waiting, channel, step, to, refs=refs))
        sending = self._sending.setdefault(waiting.tool_call_id, {})
        sending[task] = channel
        task.add_done_callback(lambda done: sending.pop(done, None))
        return task

    def decided(self, waiting: PendingApproval) -> None:
        """The call is decided (or expired, or superseded): a step still being sent where it cannot be updated
        is called off (no reminder after the decision), and its messages that can be are updated in place."""
        entry = self._entry(waiting)
        if entry.decision is None:
            return
        for task, channel in list(self._sending.get(entry.id, {}).items()):
            if channel not in UPDATED_CHANNELS:
                task.cancel()
        for channel in UPDATED_CHANNELS:
            refs = [ref for sent in entry.notifications if sent.channel == channel for ref in sent.refs]
            if refs:
                self._start(waiting, channel, "decided", [], refs=refs)

    async def _send(self, waiting: PendingApproval, channel: Channel, step: str, to: list[str], *,
                    refs: list[str] | None = None) -> None:
        entry = self._entry(waiting)
        notice = Notice(
            key=idempotency_key(self._host.workflow_id, self._host.run_id, entry.id, step, channel),
            channel=channel, step=step, call=waiting.model_copy(update={"input": entry.input}), to=to,
            decision=entry.decision.model_dump(mode="json") if entry.decision else None, refs=refs or [])
        try:
            result = await self._host.run_activity(
                NOTIFY, notice, start_to_close_timeout=NOTIFY_TIMEOUT, retry_policy=NOTIFY_RETRY,
                summary=summary(channel, step, entry, to),
                # Called off when the call is decided: an attempt already sending finishes and counts (what it
                # sent is recorded as sent); one waiting out its retry backoff stops there.
                wait_for_cancellation=True)
            sent = NoticeSent(step=step, channel=channel, to=result.to, at=self._host.now(), refs=result.refs,
                              unreached=result.unreached)
        except (ActivityError, asyncio.CancelledError) as exc:
            reason = CALLED_OFF if is_cancellation(exc) else failure_reason(exc)
            self._host.logger.warning("notification %s of %s not delivered on %s: %s", step, entry.id, channel, reason)
            sent = NoticeSent(step=step, channel=channel, to=to, at=self._host.now(), ok=False, error=reason)
        entry.notifications.append(sent)
        self._record.touch(entry)
        if not sent.ok and entry.decision is None:
            self._relist()  # the inbox and `dagent pending` show what was not delivered
        if entry.decision is not None and step != "decided" and sent.refs:  # posted after the decision: update it
            self._start(waiting, channel, "decided-late", [], refs=sent.refs)

    def _updating(self) -> int:
        return sum(channel in UPDATED_CHANNELS for sending in self._sending.values() for channel in sending.values())

    async def flush(self) -> None:
        """Wait (a while) for the messages still being sent that a decision updates in place, and their updates;
        a step on another channel still being retried is not waited for."""
        if self._updating():
            if not await self._host.wait(lambda: not self._updating(), FLUSH_LIMIT, "last notifications"):
                self._host.logger.warning("%d notification(s) still being sent when the prompt ended", self._updating())


def _seconds(after: timedelta | None) -> float | None:
    return after.total_seconds() if after else None


def summary(channel: str, step: str, entry: ToolOutput, to: list[str]) -> str:
    """The activity's summary in the Temporal UI: what is sent, about which call, to whom."""
    whom = ", ".join(to) if to else "the deployment's default addressees"
    return f"notify {channel} {step}: {entry.tool} {entry.id} -> {whom}"[:400]
