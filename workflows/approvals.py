"""The approvals desk of a prompt: calls waiting for a decision, the decisions taken, and every check a
decision passes first (who may decide, signed tokens, four-eyes, corrections against the tool's schema and its
approval policy). Decisions on a sub-agent's calls are checked here and forwarded (workflows/sub_agents.py).

No Temporal decorators: PromptWorkflow's signal and update handlers delegate here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent import identity
from durable_agent.agent.events import EventKind, PromptEvent
from durable_agent.agent.identity import Identity
from durable_agent.agent.models import Decision, ToolOutput, ToolPending
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL
from durable_agent.workflows import details, telemetry
from durable_agent.workflows.audit import record_ignored
from durable_agent.workflows.corrections import correction_refusal, merge_patch, schema_problem
from durable_agent.workflows.decision_tokens import DecisionClaims, DecisionKind, may_decide, verify_decision
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.inputs import decode_payloads
from durable_agent.workflows.names import CHECK_CORRECTION_ACTIVITY, EMIT_EVENT_ACTIVITY
from durable_agent.workflows.protocol import (
    ApprovalRequirement,
    ApproveRequest,
    CorrectionCheck,
    CorrectionVerdict,
    EventDelivery,
    PendingApproval,
    RejectRequest,
    StreamEvent,
)
from durable_agent.workflows.record import Recorder
from durable_agent.workflows.refusals import Refusal, applied, decision_refused, not_allowed
from durable_agent.workflows.sub_agents import SubAgents

# Decisions under the approval policy: a correction is checked by the tool's policy before it is approved;
# typed approvers (`user:`/`role:`), four-eyes; decision tokens bound to the run, the exact arguments and a
# one-use nonce; sub-agent reports only from the child this prompt started; run-scoped idempotency keys.
SECURE_DECISIONS_PATCH = "secure-decisions"
# A decision goes on its call's record entry (and the stream, the memo, the parent's report) when it arrives, not
# when the wait for it resumes: mid-batch, and while an approval-requested hook still runs.
DECISIONS_ON_ARRIVAL_PATCH = "decisions-on-arrival"
CORRECTION_CHECK_TIMEOUT = timedelta(seconds=30)
CORRECTION_CHECK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
EVENT_RETRY = RetryPolicy(maximum_attempts=3)

DecisionT = TypeVar("DecisionT", ApproveRequest, RejectRequest)


@dataclass
class WaitingCall:
    """A call waiting for a decision, with what its approval requires (approvers, schema, decision key)."""

    entry: ToolOutput
    requirement: ApprovalRequirement
    plugin: str | None = None  # where the tool's policy runs again on a correction


@dataclass(frozen=True)
class Decider:
    """Who a decision comes from, as checked: the person and their (verified) roles, the approver entry that
    allowed them, and the nonce of their token (accepted once)."""

    who: Identity
    via: str | None = None
    nonce: str | None = None


def refusal_text(decision: Decision) -> str:
    """What the model reads for a call that was not approved."""
    if decision.decision == "expired":
        return "The call was not run: approval expired before anyone decided."
    if decision.decision == "superseded":
        return "The call was not run: the user sent a new message instead of deciding."
    by = f" by {decision.by}" if decision.by else ""
    reason = f": {decision.reason}" if decision.reason else ""
    return f"The call was rejected{by}{reason}"


class ApprovalDesk:
    """`steered`: a user message arrived (waiting calls are superseded); `spawn` runs work in the background."""

    def __init__(self, record: Recorder, children: SubAgents, *, steered: Callable[[], bool],
                 spawn: Callable[[Awaitable[None]], None]) -> None:
        self._record = record
        self._host = record.host
        self._children = children
        self._steered = steered
        self._spawn = spawn
        self.waiting: dict[str, WaitingCall] = {}  # calls waiting for a decision, in record order
        self.decisions: dict[str, Decision] = {}
        self._used_nonces: set[str] = set()  # decision tokens' nonces, each accepted once
        self._secure = False
        self.event_hooks = False  # the worker's plugins hear of approval requests (set by each model round)

    @property
    def secure(self) -> bool:
        """Whether this run decides under the approval policy (SECURE_DECISIONS_PATCH)."""
        return self._secure

    @secure.setter
    def secure(self, value: bool) -> None:
        self._secure = self._children.secure = value

    # --- waiting calls -----------------------------------------------------------------------------------

    def request(self, entry: ToolOutput, approval: ApprovalRequirement, plugin: str | None = None, *,
                publish: bool = True) -> None:
        """Make the call `pending` in place (`publish`: and say so in the memo now, not after its batch)."""
        now = self._host.now()
        expires_in = approval.expires_after
        entry.result = ToolPending(reason=approval.reason, requested_at=now,
                                   expires_at=now + expires_in if expires_in else None,
                                   approvers=approval.approvers)
        self._record.touch(entry)
        self.waiting[entry.id] = WaitingCall(entry, approval, plugin)
        self._host.metrics.approval_requested(entry.tool)
        if self._record.prompt.state != "waiting_for_approval":
            self._record.set_state("waiting_for_approval")
        self.show_waiting()
        self._host.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=self._record.index(entry),
                                       output=entry))
        if publish:
            self.publish_pending()

    async def request_and_wait(self, entry: ToolOutput, approval: ApprovalRequirement,
                               plugin: str | None = None) -> Decision:
        """One call asks and waits alone (runs without PARALLEL_CALLS_PATCH)."""
        self.request(entry, approval, plugin)
        await self.announce(entry, approval)
        return await self.wait(entry, approval)

    async def announce(self, entry: ToolOutput, approval: ApprovalRequirement) -> None:
        """The plugins' event hooks hear of the request (an activity), when the worker has any."""
        if not self.event_hooks:
            return
        prompt = self._record.prompt
        event = PromptEvent(kind=EventKind.APPROVAL_REQUESTED, prompt_id=prompt.id, user_id=prompt.user_id,
                            conversation_id=prompt.conversation_id, tool_call_id=entry.id, tool=entry.tool,
                            input=entry.input, reason=approval.reason)
        try:
            await workflow.execute_activity(
                EMIT_EVENT_ACTIVITY, EventDelivery(event=event), start_to_close_timeout=timedelta(seconds=30),
                retry_policy=EVENT_RETRY, summary=f"event {event.kind}",
            )
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            workflow.logger.warning("event %s not delivered: %s", event.kind, failure_reason(exc))

    async def wait(self, entry: ToolOutput, approval: ApprovalRequirement) -> Decision:
        """The call's decision: taken, expired, or superseded by a user message."""
        requested_at = entry.result.requested_at if isinstance(entry.result, ToolPending) else self._host.now()
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
            return decision

    async def _decision_for(self, entry: ToolOutput, approval: ApprovalRequirement) -> Decision:
        expires_in = timedelta(seconds=approval.expires_after_seconds) if approval.expires_after_seconds else None
        try:
            await workflow.wait_condition(lambda: entry.id in self.decisions or self._steered(),
                                          timeout=expires_in, timeout_summary=f"approval expiry {entry.tool}")
            decision = self.decisions.get(entry.id) or Decision(
                decision="superseded", at=self._host.now(), reason="the user sent a new message")
        except TimeoutError:
            decision = Decision(decision="expired", at=self._host.now(), reason="approval expired")
        if entry.id not in self.waiting:  # settled when it arrived (DECISIONS_ON_ARRIVAL_PATCH)
            return self.decisions[entry.id]
        self.settle(entry, decision)
        await self._children.report_to_parent()
        return decision

    def settle(self, entry: ToolOutput, decision: Decision) -> None:
        """The call is decided: on its record entry, no longer waiting, and said so."""
        self.decisions[entry.id] = decision
        entry.decision = decision
        self.waiting.pop(entry.id, None)
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
            self._record.prompt, [w.entry for w in waiting], signed=any(w.requirement.decision_key for w in waiting)))

    def listed(self) -> list[PendingApproval]:
        """Every call waiting for a decision: this prompt's own, then its sub-agents'."""
        return [self._pending(waiting) for waiting in self.waiting.values()] + self._children.pending_rows()

    def _pending(self, waiting: WaitingCall) -> PendingApproval:
        entry, requirement = waiting.entry, waiting.requirement
        assert isinstance(entry.result, ToolPending)
        return PendingApproval(tool_call_id=entry.id, tool=entry.tool, input=entry.input, reason=entry.result.reason,
                               requested_at=entry.result.requested_at, expires_at=entry.result.expires_at,
                               approvers=entry.result.approvers, input_schema=requirement.input_schema,
                               signed_decisions=bool(requirement.decision_key), four_eyes=requirement.four_eyes,
                               run_id=self._host.run_id)

    def publish_pending(self) -> None:
        self._record.publish_pending(bool(self.waiting) or self._children.waiting(), self.listed)

    async def resolved(self, tool_call_id: str) -> ToolOutput:
        """The call once it ran; or, in a batch whose other calls still wait, once this one is decided."""
        entry = self._record.tool_call(tool_call_id)
        if entry is None:
            raise Refusal("unknown-tool-call", f"no tool call {tool_call_id!r}").error()
        await workflow.wait_condition(lambda: entry.finished_at is not None or (
            entry.id not in self.waiting and bool(self.waiting)))
        return entry

    # --- the handlers' entry points --------------------------------------------------------------------

    def approve_signal(self, request: ApproveRequest) -> Refusal | None:
        problem = self.problem("approve", request) or self.correction_problem(request)
        if problem is None:
            if self._children.call(request.tool_call_id) is not None:
                self._children.forward("approve", request)
            elif self._policy_checks(request):
                self._spawn(self._approve_when_checked(request))
            else:
                self._accept_approval(request)
        return problem

    def reject_signal(self, request: RejectRequest) -> Refusal | None:
        problem = self.problem("reject", request)
        if problem is None and self._children.call(request.tool_call_id) is not None:
            self._children.forward("reject", request)
            return None
        if problem is None:
            self._accept_rejection(request)
        return problem

    def checked_request(self, payloads: tuple[object, ...], model: type[DecisionT]) -> DecisionT:
        """An update's decoded payload, or the reason it cannot be decided, as a refusal."""
        request, undecodable = decode_payloads(payloads, model)
        if request is None:
            raise Refusal("invalid-request", undecodable or "no decision in the update").error()
        kind: DecisionKind = "approve" if isinstance(request, ApproveRequest) else "reject"
        refusal = self.problem(kind, request)
        if refusal is None and isinstance(request, ApproveRequest):
            refusal = self.correction_problem(request)
        if refusal is not None:
            raise refusal.error()
        return request

    async def approve_call(self, payloads: tuple[object, ...]) -> ToolOutput:
        request = applied(lambda: self.checked_request(payloads, ApproveRequest))
        if self._children.call(request.tool_call_id) is not None:
            return await self._children.forwarded("approve", request)
        decider = None
        if self._policy_checks(request):
            checked = await self._checked_correction(request)
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

    # --- checks ------------------------------------------------------------------------------------------

    def problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest) -> Refusal | None:
        """Why a decision cannot be accepted now, or None when it can."""
        tool_call_id, by = request.tool_call_id, request.by
        prompt = self._record.prompt
        if (child := self._children.call(tool_call_id)) is not None:
            return self._forward_problem(kind, request, child[1])
        if tool_call_id in self.decisions:
            return Refusal("already-decided",
                           f"tool call {tool_call_id!r} was already decided ({self.decisions[tool_call_id].decision})")
        if not self.waiting or prompt.state != "waiting_for_approval":
            known = self._record.tool_call(tool_call_id) is not None
            what = "has no pending approval for" if known else "has no tool call"
            return Refusal("not-pending" if known else "unknown-tool-call",
                           f"prompt {prompt.id} ({prompt.state}) {what} {tool_call_id!r}")
        waiting = self.waiting.get(tool_call_id)
        if waiting is None:
            pending = ", ".join(repr(i) for i in self.waiting)
            are = "call is" if len(self.waiting) == 1 else "calls are"
            return Refusal("unknown-tool-call", f"unknown tool call {tool_call_id!r}; the pending {are} {pending}")
        decider = self._decider(kind, request, waiting)
        if isinstance(decider, Refusal):
            return decider
        if not self._secure and not may_decide(waiting.requirement.approvers, by, sorted(decider.who.roles)):
            return not_allowed(by, tool_call_id, waiting.requirement.approvers)
        return None

    def _decider(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                 waiting: WaitingCall) -> Decider | Refusal:
        """Who decides, as far as this prompt can tell: with a decision key, the signed token's principal and
        roles (bound to this run, the exact arguments and a one-use nonce); without, the request's word. Under
        the approval policy (SECURE_DECISIONS_PATCH) they must be allowed by the call's approvers (and the
        four-eyes rule)."""
        tool_call_id, by = request.tool_call_id, request.by
        requirement = waiting.requirement
        roles: list[str] = list(request.roles) if self._secure else []
        nonce = None
        if requirement.decision_key:
            corrected = request.input if isinstance(request, ApproveRequest) else None
            arguments = merge_patch(waiting.entry.input, corrected) if corrected is not None else waiting.entry.input
            # The signature check imports (e.g. cryptography's exception types) from native code: those
            # imports must reach the real modules, not sandbox copies. Pure computation, deterministic.
            with workflow.unsafe.imports_passed_through():
                verified = verify_decision(
                    request.token, public_key_pem=requirement.decision_key, prompt_id=self._host.workflow_id,
                    tool_call_id=tool_call_id, decision=kind, by=by, corrected_input=corrected,
                    now=self._host.now(), run_id=self._host.run_id, arguments=arguments,
                    used_nonces=self._used_nonces, strict=self._secure)
            if not isinstance(verified, DecisionClaims):
                return decision_refused(tool_call_id, verified)
            roles, nonce = verified.roles, verified.nonce
        who = Identity.of(identity.person_id(by) if self._secure else by, roles)
        if not self._secure:
            return Decider(who, nonce=nonce)
        problem = self._approver_problem(kind, by, roles, requirement.approvers, requirement.four_eyes)
        if problem is not None:
            return decision_refused(tool_call_id, problem)
        return Decider(who, identity.grant(who, requirement.approvers), nonce)

    def _approver_problem(self, kind: DecisionKind, by: str | None, roles: Sequence[str], approvers: list[str] | None,
                          four_eyes: bool) -> str | None:
        """Why `by` (holding `roles`) may not take this decision on a call naming `approvers` (agent/identity.py)."""
        return identity.may_decide(Identity.of(by, roles), approvers, owner=self._record.prompt.user_id,
                                   four_eyes=four_eyes, approving=kind == "approve")

    def _forward_problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                         pending: PendingApproval) -> Refusal | None:
        """Why a decision on a sub-agent's call is not forwarded. The sub-agent's prompt checks the decision
        (and its token) itself when it reaches it; the checks this prompt can make come first."""
        tool_call_id, by = request.tool_call_id, request.by
        if not self._secure:
            if not may_decide(pending.approvers, by, []) and not pending.signed_decisions:
                return not_allowed(by, tool_call_id, pending.approvers)
            return None
        if pending.signed_decisions:
            if not request.token:
                return decision_refused(tool_call_id, "a signed decision token is required for this call "
                                                      "(decide through the API)")
            return None
        problem = self._approver_problem(kind, by, request.roles, pending.approvers, pending.four_eyes)
        return decision_refused(tool_call_id, problem) if problem else None

    def correction_problem(self, request: ApproveRequest) -> Refusal | None:
        """Why the approver's corrected fields, merged into the input, do not fit the tool, or None."""
        waiting = self.waiting.get(request.tool_call_id)
        if request.input is None or waiting is None:
            return None
        entry = waiting.entry
        problem = schema_problem(merge_patch(entry.input, request.input), waiting.requirement.input_schema)
        return Refusal("invalid-arguments", f"invalid correction for {entry.tool}: {problem}") if problem else None

    # --- taking a decision -------------------------------------------------------------------------------

    def _accept_approval(self, request: ApproveRequest, decider: Decider | None = None) -> None:
        waiting = self.waiting[request.tool_call_id]
        decider = self._taken(decider or self._checked_decider("approve", request, waiting))
        entry = waiting.entry
        original = None
        if request.input is not None:  # JSON merge patch (RFC 7396): only the corrected fields change
            original, entry.input = entry.input, merge_patch(entry.input, request.input)
        self.decisions[request.tool_call_id] = Decision(
            decision="approved", by=self._recorded_by(request, decider), via=decider.via, at=self._host.now(),
            original_input=original)
        self._arrived(request.tool_call_id)

    def _accept_rejection(self, request: RejectRequest) -> None:
        decider = self._taken(self._checked_decider("reject", request, self.waiting[request.tool_call_id]))
        self.decisions[request.tool_call_id] = Decision(
            decision="rejected", by=self._recorded_by(request, decider), via=decider.via, at=self._host.now(),
            reason=request.reason)
        self._arrived(request.tool_call_id)

    def _arrived(self, tool_call_id: str) -> None:
        """A decision was taken: on its entry now, and the parent told (else when the wait for it resumes)."""
        if self._record.has(DECISIONS_ON_ARRIVAL_PATCH):
            self.settle(self.waiting[tool_call_id].entry, self.decisions[tool_call_id])
            self._spawn(self._children.report_to_parent())

    def _checked_decider(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                         waiting: WaitingCall) -> Decider:
        """The decider of a decision being taken (checked just before)."""
        decider = self._decider(kind, request, waiting)
        if isinstance(decider, Refusal):
            raise ValueError(decider.message)
        return decider

    def _taken(self, decider: Decider) -> Decider:
        """A decision is taken: its token's nonce is used up."""
        if decider.nonce is not None and self._secure:
            self._used_nonces.add(decider.nonce)
        return decider

    def _recorded_by(self, request: ApproveRequest | RejectRequest, decider: Decider) -> str | None:
        return decider.who.id if self._secure else request.by

    # --- corrections under the approval policy ---------------------------------------------------------

    def _policy_checks(self, request: ApproveRequest) -> bool:
        """Whether an approval's correction goes to the tool's policy before it is taken (this prompt's own
        call; a sub-agent's prompt checks its own)."""
        waiting = self.waiting.get(request.tool_call_id)
        return (self._secure and request.input is not None and waiting is not None
                and waiting.entry.tool != MORE_BUDGET_TOOL)  # a budget request has no policy: its schema decides

    async def _checked_correction(self, request: ApproveRequest) -> Decider | Refusal:
        """Run the tool's approval policy on the corrected arguments (an activity: the policy is worker code)
        and check the decider against what they need: who may approve them, or that nobody may. On a
        refusal the call stays pending; the refusal is recorded in the audit."""
        waiting = self.waiting[request.tool_call_id]
        entry = waiting.entry
        merged = merge_patch(entry.input, request.input)
        try:
            verdict = await workflow.execute_activity(
                CHECK_CORRECTION_ACTIVITY, CorrectionCheck(tool=entry.tool, plugin=waiting.plugin, input=merged),
                result_type=CorrectionVerdict, start_to_close_timeout=CORRECTION_CHECK_TIMEOUT,
                retry_policy=CORRECTION_CHECK_RETRY, summary=f"check correction {entry.tool}")
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            verdict = CorrectionVerdict(problem=f"the approval policy could not be run: {failure_reason(exc)}")
        return self._correction_decider(request, waiting, verdict)

    def _correction_decider(self, request: ApproveRequest, waiting: WaitingCall,
                            verdict: CorrectionVerdict) -> Decider | Refusal:
        """Who approves a correction, given what the tool's policy says of it; a refusal goes to the audit."""
        entry = waiting.entry
        refusal = self.problem("approve", request)  # decided, expired or steered meanwhile?
        if refusal is None and verdict.problem is not None:
            refusal = Refusal("not-allowed", f"correction of {entry.tool} {entry.id!r} refused: {verdict.problem}")
        decider = None if refusal is not None else self._decider("approve", request, waiting)
        if isinstance(decider, Decider) and verdict.requirement is not None:
            needed = verdict.requirement
            problem = correction_refusal(decider.who, needed.approvers, needs_approval=True,
                                         owner=self._record.prompt.user_id,
                                         four_eyes=needed.four_eyes or waiting.requirement.four_eyes)
            if problem is not None:
                who = decider.who.id or "an anonymous caller"
                refusal = Refusal("not-allowed", f"{who} may not approve this correction of {entry.tool} "
                                                 f"{entry.id!r}: {problem}")
            elif needed.approvers:
                decider = Decider(decider.who, identity.grant(decider.who, needed.approvers), decider.nonce)
        if refusal is None and isinstance(decider, Refusal):
            refusal = decider
        if refusal is not None:
            record_ignored(self._record.prompt.audit, "correction", refusal.message)
            return refusal
        assert decider is not None
        return decider

    async def _approve_when_checked(self, request: ApproveRequest) -> None:
        """A signal's approval with a correction: taken once the policy agrees (else audited, still pending)."""
        checked = await self._checked_correction(request)
        if isinstance(checked, Decider):
            self._accept_approval(request, checked)
        else:
            self._children.report_refusal(request.tool_call_id, checked.message)
