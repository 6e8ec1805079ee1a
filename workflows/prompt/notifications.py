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

from durable_agent.agent.models import ToolOutput, ToolPending
from durable_agent.agent.notify import Channel, NoticeSent, idempotency_key, schedule
from durable_agent.workflows.activity_refs import NOTIFY
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.decision_checks import WaitingCall
from durable_agent.workflows.wire.notify import Notice, NotifyPlan

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

    def follow(self, waiting: WaitingCall, decided: Callable[[], bool]) -> None:
        """Tell the call's addressees now, and remind and escalate on timers until `decided()`."""
        plan = waiting.requirement.notify
        if plan is not None and not decided():
            self._host.spawn(self._follow(waiting, plan, decided))

    async def _follow(self, waiting: WaitingCall, plan: NotifyPlan, decided: Callable[[], bool]) -> None:
        entry = waiting.entry
        assert isinstance(entry.result, ToolPending)
        requested_at = entry.result.requested_at
        told = list(plan.to)
        await self._step(waiting, plan, "requested", told)
        for step in schedule(plan.remind_after_seconds, plan.max_reminders, plan.escalate_after_seconds,
                             waiting.requirement.expires_after_seconds):
            due = requested_at + timedelta(seconds=step.at_seconds) - self._host.now()
            if due > timedelta(0):
                await self._host.wait(decided, due, f"{step.name} {entry.tool} {entry.id}")
            if decided():
                return
            if step.kind == "escalated":
                self._escalate(waiting, plan.escalate_to)
                told += [who for who in plan.escalate_to if who not in told]
                await self._step(waiting, plan, step.name, plan.escalate_to)
            else:
                await self._step(waiting, plan, step.name, told)

    def _escalate(self, waiting: WaitingCall, added: list[str]) -> None:
        """`added` may decide the call from now on (a policy naming nobody already lets anyone decide whom the
        front door lets through: it stays so)."""
        approvers = waiting.requirement.approvers
        if not approvers:
            return
        widened = approvers + [who for who in added if who not in approvers]
        waiting.requirement = waiting.requirement.model_copy(update={"approvers": widened})
        if isinstance(waiting.entry.result, ToolPending):
            waiting.entry.result.approvers = widened
        self._record.touch(waiting.entry)
        self._relist()

    async def _step(self, waiting: WaitingCall, plan: NotifyPlan, step: str, to: list[str]) -> None:
        await asyncio.gather(*(self._start(waiting, channel, step, to) for channel in plan.channels))

    def _start(self, waiting: WaitingCall, channel: Channel, step: str, to: list[str], *,
               refs: list[str] | None = None) -> asyncio.Task[None]:
        task = asyncio.ensure_future(self._send(waiting, channel, step, to, refs=refs))
        sending = self._sending.setdefault(waiting.entry.id, {})
        sending[task] = channel
        task.add_done_callback(lambda done: sending.pop(done, None))
        return task

    def decided(self, waiting: WaitingCall) -> None:
        """The call is decided (or expired, or superseded): a step still being sent where it cannot be updated
        is called off (no reminder after the decision), and its messages that can be are updated in place."""
        entry = waiting.entry
        if entry.decision is None:
            return
        for task, channel in list(self._sending.get(entry.id, {}).items()):
            if channel not in UPDATED_CHANNELS:
                task.cancel()
        for channel in UPDATED_CHANNELS:
            refs = [ref for sent in entry.notifications if sent.channel == channel for ref in sent.refs]
            if refs:
                self._start(waiting, channel, "decided", [], refs=refs)

    async def _send(self, waiting: WaitingCall, channel: Channel, step: str, to: list[str], *,
                    refs: list[str] | None = None) -> None:
        entry, requirement, prompt = waiting.entry, waiting.requirement, self._record.prompt
        pending = entry.result if isinstance(entry.result, ToolPending) else None
        notice = Notice(
            key=idempotency_key(self._host.workflow_id, self._host.run_id, entry.id, step, channel),
            channel=channel, step=step, prompt_id=self._host.workflow_id, run_id=self._host.run_id,
            user_id=prompt.user_id, tool_call_id=entry.id, tool=entry.tool, input=entry.input,
            reason=pending.reason if pending else "", to=to, approvers=requirement.approvers,
            four_eyes=requirement.four_eyes,
            expires_at=pending.expires_at.isoformat() if pending and pending.expires_at else None,
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


def summary(channel: str, step: str, entry: ToolOutput, to: list[str]) -> str:
    """The activity's summary in the Temporal UI: what is sent, about which call, to whom."""
    whom = ", ".join(to) if to else "the deployment's default addressees"
    return f"notify {channel} {step}: {entry.tool} {entry.id} -> {whom}"[:400]
