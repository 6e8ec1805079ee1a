"""The approvals desk of a prompt: calls waiting for a decision, the decisions taken, and the handlers' entry
points that take them. Every check a decision passes first (who may decide, signed tokens, four-eyes, corrections
against the tool's schema and its approval policy) is in workflows/prompt/decision_checks.py. Decisions on a sub-agent's
calls are checked here and forwarded (workflows/prompt/sub_agents.py).

No Temporal decorators: PromptWorkflow's signal and update handlers delegate here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent.events import EventKind, PromptEvent
from durable_agent.agent.models import ApprovalRequest, Decision, ToolOutput
from durable_agent.workflows import details, telemetry
from durable_agent.workflows.activity_refs import EMIT_EVENT
from durable_agent.workflows.corrections import merge_patch
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.inputs import decode_payloads
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.decision_checks import Decider, DecisionChecks
from durable_agent.workflows.prompt.notifications import Notifications
from durable_agent.workflows.prompt.refusals import Refusal, applied
from durable_agent.workflows.prompt.sub_agents import SubAgents
from durable_agent.workflows.protocol import (
    ApproveRequest,
    CallNeedingApproval,
    EventDelivery,
    PendingApproval,
    RejectRequest,
    StreamEvent,
)

EVENT_RETRY = RetryPolicy(maximum_attempts=3)

DecisionT = TypeVar("DecisionT", ApproveRequest, RejectRequest)


def refusal_text(decision: Decision) -> str:
    """What the model reads for a call that was not approved."""
    if decision.decision == "expired":
        return "The call was not run: approval expired before anyone decided."
    if decision.decision == "superseded":
        return "The call was not run: the user sent a new message instead of deciding."
    by = f" by {decision.by}" if decision.by else ""
    reason = f": {decision.reason}" if decision.reason else ""
    return f"The call was rejected{by}{reason}"


class ApprovalDesk(Room):
    """`steered`: a user message arrived (waiting calls are superseded). The desk keeps the prompt's sub-agents
    (`children`): it lists and forwards their waiting calls, and they list its own to a parent prompt."""

    def __init__(self, context: PromptContext, *, steered: Callable[[], bool]) -> None:
        super().__init__(context)
        self._steered = steered
        self.children = self._children = SubAgents(context, self)
        # Calls waiting for a decision, in record order (each entry's result in the record is its request).
        self.waiting: dict[str, PendingApproval] = {}
        self.decisions: dict[str, Decision] = {}
        self.checks = DecisionChecks(context, self._children, self.waiting, self.decisions)
        self.event_hooks = False  # the worker's plugins hear of approval requests (set by each model round)
        self.notices = Notifications(context, relist=self._relist)  # workflows/prompt/notifications.py

    # --- waiting calls -----------------------------------------------------------------------------------

    def request(self, entry: ToolOutput, call: CallNeedingApproval, *, publish: bool = True) -> None:
        """Make the call `pending` in place, its planned request stamped with the time (`publish`: and say so in
        the memo now, not after its batch)."""
        now = self._host.now()
        expires_in = call.approval.expires_after
        prompt = self._record.prompt
        waiting = PendingApproval(
            **{**dict(call.approval), "requested_at": now, "expires_at": now + expires_in if expires_in else None},
            prompt_id=self._host.workflow_id, user_id=prompt.user_id, conversation_id=prompt.conversation_id,
            tool_call_id=entry.id, tool=entry.tool, input=entry.input, input_schema=call.input_schema,
            run_id=self._host.run_id, plugin=call.plugin)
        entry.result = waiting.request()
        self._record.touch(entry)
        self.waiting[entry.id] = waiting
        self._host.metrics.approval_requested(entry.tool)
        telemetry.log_step("approval requested", self._record.prompt.id, call_id=entry.id, tool=entry.tool)
        if self._record.prompt.state != "waiting_for_approval":
            self._record.set_state("waiting_for_approval")
        self.show_waiting()
        self._host.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=self._record.index(entry),
                                       output=entry))
        if publish:
            self.publish_pending()

    async def request_and_wait(self, entry: ToolOutput, call: CallNeedingApproval) -> Decision:
        """One call asks and waits alone (a request for more budget, workflows/budget/gate.py); a sub-agent's
        prompt reports it to its parent like any of its calls, so the top prompt shows and forwards it."""
        self.request(entry, call)
        await self.announce(entry, call.approval)
        await self._children.report_to_parent()
        return await self.wait(entry, call.approval)

    async def announce(self, entry: ToolOutput, approval: ApprovalRequest) -> None:
        """The plugins' event hooks hear of the request (an activity), when the worker has any."""
        if not self.event_hooks:
            return
        prompt = self._record.prompt
        event = PromptEvent(kind=EventKind.APPROVAL_REQUESTED, prompt_id=prompt.id, user_id=prompt.user_id,
                            conversation_id=prompt.conversation_id, tool_call_id=entry.id, tool=entry.tool,
                            input=entry.input, reason=approval.reason)
        try:
            await self._host.run_activity(EMIT_EVENT, EventDelivery(event=event), summary=f"event {event.kind}",
                                          start_to_close_timeout=timedelta(seconds=30), retry_policy=EVENT_RETRY)
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            self._host.logger.warning("event %s not delivered: %s", event.kind, failure_reason(exc))

    async def wait(self, entry: ToolOutput, approval: ApprovalRequest) -> Decision:
        """The call's decision: taken, expired, or superseded by a user message."""
        pending = entry.result if isinstance(entry.result, ApprovalRequest) else None
        requested_at = pending.requested_at if pending and pending.requested_at else self._host.now()
        prompt_id = self._record.prompt.id
        with telemetry.span(telemetry.APPROVAL_SPAN, self._record.call_span(entry.id),
                            **{"dagent.tool.id": entry.tool, "dagent.tool.call_id": entry.id,
                               "dagent.prompt.id": prompt_id}) as span:
            decision = await self._decision_for(entry, approval)
            waited = decision.at - requested_at
            span.set_attributes({"dagent.approval.decision": decision.decision,
                                 "dagent.approval.wait_seconds": waited.total_seconds()})
            if decision.by:
                span.set_attribute("dagent.approval.decided_by", decision.by)
            self._host.metrics.approval_decided(entry.tool, decision.decision, waited)
            telemetry.log_step("approval decided", prompt_id, call_id=entry.id, decision=decision.decision,
                               decided_by=decision.by)
            return decision

    async def _decision_for(self, entry: ToolOutput, approval: ApprovalRequest) -> Decision:
        expires_in = approval.expires_after
        if (waiting := self.waiting.get(entry.id)) is not None:
            self.notices.follow(waiting, lambda: entry.id not in self.waiting)
        if await self._host.wait(lambda: entry.id in self.decisions or self._steered(), expires_in,
                                 f"approval expiry {entry.tool}"):
            decision = self.decisions.get(entry.id) or Decision(
                decision="superseded", at=self._host.now(), reason="the user sent a new message")
        else:
            decision = Decision(decision="expired", at=self._host.now(), reason="approval expired")
        if entry.id not in self.waiting:  # a decision is settled when it arrives (_arrived)
            return self.decisions[entry.id]
        self.settle(entry, decision)
        await self._children.report_to_parent()
        return decision

    def settle(self, entry: ToolOutput, decision: Decision) -> None:
        """The call is decided: on its record entry, no longer waiting, and said so."""
        self.decisions[entry.id] = decision
        entry.decision = decision
        waiting = self.waiting.pop(entry.id, None)
        if waiting is not None:
            self.notices.decided(waiting)
        self._host.publish(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=self._record.index(entry), output=entry))
        if not self.waiting:
            self._record.set_state("running")
        else:
            self.show_waiting()  # the calls of the batch still waiting
        self.publish_pending()

    def show_waiting(self) -> None:
        """Current details (Temporal UI): every call waiting now, and how to decide in this deployment."""
        waiting = list(self.waiting.values())
        self._host.set_details(details.waiting_for_approval(
            self._record.prompt, [self.entry(w) for w in waiting], signed=any(w.signed_decisions for w in waiting)))

    def _relist(self) -> None:
        """A waiting call's listing changed (an escalation added deciders, a step was not delivered)."""
        self.show_waiting()
        self.publish_pending()

    def listed(self) -> list[PendingApproval]:
        """Every call waiting for a decision: this prompt's own, then its sub-agents'."""
        return [waiting.model_copy(update={"undelivered": [n for n in self.entry(waiting).notifications if not n.ok]})
                for waiting in self.waiting.values()] + self._children.pending_rows()

    def entry(self, waiting: PendingApproval) -> ToolOutput:
        """The waiting call's entry in the record."""
        entry = self._record.tool_call(waiting.tool_call_id)
        assert entry is not None
        return entry

    def publish_pending(self) -> None:
        self._record.publish_pending(bool(self.waiting) or self._children.waiting(), self.listed)

    async def resolved(self, tool_call_id: str) -> ToolOutput:
        """The call once it ran; or, in a batch whose other calls still wait, once this one is decided."""
        entry = self._record.tool_call(tool_call_id)
        if entry is None:
            raise Refusal("unknown-tool-call", f"no tool call {tool_call_id!r}").error()
        await self._host.wait(lambda: entry.finished_at is not None or (
            entry.id not in self.waiting and bool(self.waiting)))
        return entry

    # --- the handlers' entry points --------------------------------------------------------------------

    def approve_signal(self, request: ApproveRequest) -> Refusal | None:
        problem = self._problem(request)
        if problem is None:
            if self._children.call(request.tool_call_id) is not None:
                self._children.forward("approve", request)
            elif self.checks.policy_checks(request):
                self._host.spawn(self._approve_when_checked(request))
            else:
                self._accept_approval(request)
        return problem

    def reject_signal(self, request: RejectRequest) -> Refusal | None:
        problem = self._problem(request)
        if problem is None:
            if self._children.call(request.tool_call_id) is not None:
                self._children.forward("reject", request)
            else:
                self._accept_rejection(request)
        return problem

    def _problem(self, request: ApproveRequest | RejectRequest) -> Refusal | None:
        """Why the decision cannot be taken now (an approval's correction included), or None."""
        if isinstance(request, RejectRequest):
            return self.checks.problem("reject", request)
        return self.checks.problem("approve", request) or self.checks.correction_problem(request)

    def checked_request(self, payloads: tuple[object, ...], model: type[DecisionT]) -> DecisionT:
        """An update's decoded payload, or the reason it cannot be decided, as a refusal."""
        request, undecodable = decode_payloads(payloads, model)
        if request is None:
            raise Refusal("invalid-request", undecodable or "no decision in the update").error()
        if (refusal := self._problem(request)) is not None:
            raise refusal.error()
        return request

    async def approve_call(self, payloads: tuple[object, ...]) -> ToolOutput:
        request = applied(lambda: self.checked_request(payloads, ApproveRequest))
        if self._children.call(request.tool_call_id) is not None:
            return await self._children.forwarded("approve", request)
        decider = None
        if self.checks.policy_checks(request):
            checked = await self.checks.checked_correction(request)
            if isinstance(checked, Refusal):
                raise checked.error()
            decider = checked
        applied(lambda: self._accept_approval(request, decider))
        return await self.resolved(request.tool_call_id)

    async def reject_call(self, payloads: tuple[object, ...]) -> ToolOutput:
        request = applied(lambda: self.checked_request(payloads, RejectRequest))
        if self._children.call(request.tool_call_id) is not None:
            return await self._children.forwarded("reject", request)
        applied(lambda: self._accept_rejection(request))
        return await self.resolved(request.tool_call_id)

    # --- taking a decision -------------------------------------------------------------------------------

    def _accept_approval(self, request: ApproveRequest, decider: Decider | None = None) -> None:
        decider = self.checks.taken("approve", request, decider)
        entry = self.entry(self.waiting[request.tool_call_id])
        original = None
        if request.input is not None:  # JSON merge patch (RFC 7396): only the corrected fields change
            original, entry.input = entry.input, merge_patch(entry.input, request.input)
        self.decisions[request.tool_call_id] = Decision(
            decision="approved", by=decider.who.id, via=decider.via, at=self._host.now(),
            original_input=original)
        self._arrived(request.tool_call_id)

    def _accept_rejection(self, request: RejectRequest) -> None:
        decider = self.checks.taken("reject", request)
        self.decisions[request.tool_call_id] = Decision(
            decision="rejected", by=decider.who.id, via=decider.via, at=self._host.now(),
            reason=request.reason)
        self._arrived(request.tool_call_id)

    def _arrived(self, tool_call_id: str) -> None:
        """A decision was taken: on its entry (and the stream, the memo, the parent's report) now, not when the
        wait for it resumes: mid-batch, and while an approval-requested hook still runs."""
        self.settle(self.entry(self.waiting[tool_call_id]), self.decisions[tool_call_id])
        self._host.spawn(self._children.report_to_parent())

    async def _approve_when_checked(self, request: ApproveRequest) -> None:
        """A signal's approval with a correction: taken once the policy agrees (else audited, still pending)."""
        checked = await self.checks.checked_correction(request)
        if isinstance(checked, Decider):
            self._accept_approval(request, checked)
        else:
            self._children.report_refusal(request.tool_call_id, checked.message)

