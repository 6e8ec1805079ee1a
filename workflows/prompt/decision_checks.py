"""Every check a decision (approve/reject) passes before the approvals desk takes it: is the call waiting, who
decides (the request's word, or a signed token bound to the run, the exact arguments and a one-use nonce), may
they (approvers, four-eyes), does a correction fit the tool's schema, and, under the approval policy, what the
tool's policy says of the corrected arguments. A decision on a sub-agent's call gets the checks this prompt can
make before it is forwarded (its own prompt checks the rest).

No Temporal decorators; the desk (workflows/prompt/approvals.py) asks these checks and takes what passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent import identity
from durable_agent.agent.identity import Identity
from durable_agent.agent.models import Decision
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL
from durable_agent.workflows.activity_refs import CHECK_CORRECTION
from durable_agent.workflows.corrections import correction_refusal, merge_patch, schema_problem
from durable_agent.workflows.decision_tokens import DecisionClaims, DecisionKind, verify_decision
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.host import native_imports
from durable_agent.workflows.prompt.refusals import Refusal, decision_refused
from durable_agent.workflows.prompt.sub_agents import SubAgents
from durable_agent.workflows.protocol import (
    ApproveRequest,
    CorrectionCheck,
    CorrectionVerdict,
    PendingApproval,
    RejectRequest,
)

CORRECTION_CHECK_TIMEOUT = timedelta(seconds=30)
CORRECTION_CHECK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


@dataclass(frozen=True)
class Decider:
    """Who a decision comes from, as checked: the person and their (verified) roles, the approver entry that
    allowed them, and the nonce of their token (accepted once)."""

    who: Identity
    via: str | None = None
    nonce: str | None = None


class DecisionChecks(Room):
    """The checks over the desk's `waiting` calls and `decisions` taken (the desk's own dicts, read here), under
    the approval policy (docs/approvals-policy.md)."""

    def __init__(self, context: PromptContext, children: SubAgents, waiting: dict[str, PendingApproval],
                 decisions: dict[str, Decision]) -> None:
        super().__init__(context)
        self._children = children
        self._waiting = waiting
        self._decisions = decisions
        self._used_nonces: set[str] = set()  # decision tokens' nonces, each accepted once

    def problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest) -> Refusal | None:
        """Why a decision cannot be accepted now, or None when it can."""
        tool_call_id = request.tool_call_id
        prompt = self._record.prompt
        if (child := self._children.call(tool_call_id)) is not None:
            return self._forward_problem(kind, request, child[1])
        if tool_call_id in self._decisions:
            return Refusal("already-decided",
                           f"tool call {tool_call_id!r} was already decided ({self._decisions[tool_call_id].decision})")
        if not self._waiting or prompt.state != "waiting_for_approval":
            known = self._record.tool_call(tool_call_id) is not None
            what = "has no pending approval for" if known else "has no tool call"
            return Refusal("not-pending" if known else "unknown-tool-call",
                           f"prompt {prompt.id} ({prompt.state}) {what} {tool_call_id!r}")
        waiting = self._waiting.get(tool_call_id)
        if waiting is None:
            pending = ", ".join(repr(i) for i in self._waiting)
            are = "call is" if len(self._waiting) == 1 else "calls are"
            return Refusal("unknown-tool-call", f"unknown tool call {tool_call_id!r}; the pending {are} {pending}")
        decider = self._decider(kind, request, waiting)
        return decider if isinstance(decider, Refusal) else None

    def _decider(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                 waiting: PendingApproval) -> Decider | Refusal:
        """Who decides, as far as this prompt can tell: with a decision key, the signed token's principal and
        roles (bound to this run, the exact arguments and a one-use nonce); without, the request's word. They
        must be allowed by the call's approvers (and the four-eyes rule)."""
        tool_call_id, by = request.tool_call_id, request.by
        roles: list[str] = list(request.roles)
        nonce = None
        if waiting.decision_key:
            corrected = request.input if isinstance(request, ApproveRequest) else None
            arguments = merge_patch(waiting.input, corrected) if corrected is not None else waiting.input
            # The signature check imports (e.g. cryptography's exception types) from native code: those
            # imports must reach the real modules, not sandbox copies. Pure computation, deterministic.
            with native_imports():
                verified = verify_decision(
                    request.token, public_key_pem=waiting.decision_key, prompt_id=self._host.workflow_id,
                    tool_call_id=tool_call_id, decision=kind, by=by, corrected_input=corrected,
                    now=self._host.now(), run_id=self._host.run_id, arguments=arguments,
                    used_nonces=self._used_nonces, tool=waiting.tool)
            if not isinstance(verified, DecisionClaims):
                return decision_refused(tool_call_id, verified)
            roles, nonce = verified.roles, verified.nonce
        who = Identity.of(identity.person_id(by), roles)
        problem = self._approver_problem(kind, by, roles, waiting.approvers, bool(waiting.four_eyes))
        if problem is not None:
            return decision_refused(tool_call_id, problem)
        return Decider(who, identity.grant(who, waiting.approvers), nonce)

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
        if pending.signed_decisions:
            if not request.token:
                return decision_refused(tool_call_id, "a signed decision token is required for this call "
                                                      "(decide through the API)")
            return None
        problem = self._approver_problem(kind, by, request.roles, pending.approvers, bool(pending.four_eyes))
        return decision_refused(tool_call_id, problem) if problem else None

    def correction_problem(self, request: ApproveRequest) -> Refusal | None:
        """Why the approver's corrected fields, merged into the input, do not fit the tool, or None."""
        waiting = self._waiting.get(request.tool_call_id)
        if request.input is None or waiting is None:
            return None
        problem = schema_problem(merge_patch(waiting.input, request.input), waiting.input_schema)
        return Refusal("invalid-arguments", f"invalid correction for {waiting.tool}: {problem}") if problem else None

    # --- a decision being taken ----------------------------------------------------------------------------

    def taken(self, kind: DecisionKind, request: ApproveRequest | RejectRequest, decider: Decider | None = None
              ) -> Decider:
        """The decider of a decision being taken (checked just before, or by the policy); its token's nonce is
        used up."""
        if decider is None:
            checked = self._decider(kind, request, self._waiting[request.tool_call_id])
            if isinstance(checked, Refusal):
                raise ValueError(checked.message)
            decider = checked
        if decider.nonce is not None:
            self._used_nonces.add(decider.nonce)
        return decider

    # --- corrections under the approval policy ---------------------------------------------------------

    def policy_checks(self, request: ApproveRequest) -> bool:
        """Whether an approval's correction goes to the tool's policy before it is taken (this prompt's own
        call; a sub-agent's prompt checks its own)."""
        waiting = self._waiting.get(request.tool_call_id)
        return (request.input is not None and waiting is not None
                and waiting.tool != MORE_BUDGET_TOOL)  # a budget request has no policy: its schema decides

    async def checked_correction(self, request: ApproveRequest) -> Decider | Refusal:
        """Run the tool's approval policy on the corrected arguments (an activity: the policy is worker code)
        and check the decider against what they need: who may approve them, or that nobody may. On a
        refusal the call stays pending; the refusal is recorded in the audit."""
        waiting = self._waiting[request.tool_call_id]
        merged = merge_patch(waiting.input, request.input)
        try:
            verdict = await self._host.run_activity(
                CHECK_CORRECTION, CorrectionCheck(tool=waiting.tool, plugin=waiting.plugin, input=merged),
                start_to_close_timeout=CORRECTION_CHECK_TIMEOUT, retry_policy=CORRECTION_CHECK_RETRY,
                summary=f"check correction {waiting.tool}")
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            verdict = CorrectionVerdict(problem=f"the approval policy could not be run: {failure_reason(exc)}")
        return self._correction_decider(request, waiting, verdict)

    def _correction_decider(self, request: ApproveRequest, waiting: PendingApproval,
                            verdict: CorrectionVerdict) -> Decider | Refusal:
        """Who approves a correction, given what the tool's policy says of it; a refusal goes to the audit."""
        decider = self._policy_decider(request, waiting, verdict)
        if isinstance(decider, Refusal):
            self._record.ignore("correction", decider.message)
        return decider

    def _policy_decider(self, request: ApproveRequest, waiting: PendingApproval,
                        verdict: CorrectionVerdict) -> Decider | Refusal:
        if (refusal := self.problem("approve", request)) is not None:  # decided, expired or steered meanwhile?
            return refusal
        if verdict.problem is not None:
            return Refusal("not-allowed", f"correction of {waiting.tool} {waiting.tool_call_id!r} refused: "
                                          f"{verdict.problem}")
        decider = self._decider("approve", request, waiting)
        if isinstance(decider, Refusal) or (needed := verdict.requirement) is None:
            return decider
        problem = correction_refusal(decider.who, needed.approvers, needs_approval=True,
                                     owner=self._record.prompt.user_id,
                                     four_eyes=bool(needed.four_eyes or waiting.four_eyes))
        if problem is not None:
            who = decider.who.id or "an anonymous caller"
            return Refusal("not-allowed", f"{who} may not approve this correction of {waiting.tool} "
                                          f"{waiting.tool_call_id!r}: {problem}")
        if needed.approvers:
            return Decider(decider.who, identity.grant(decider.who, needed.approvers), decider.nonce)
        return decider
