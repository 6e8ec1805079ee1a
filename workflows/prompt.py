"""PromptWorkflow: one prompt, run as rounds of model call + tool calls, pausing durably for approvals.

Data and control flow only. Plugin code, model calls and tools run in activities referenced by their
stable names, so this module imports no provider SDK and no plugin code.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream

    from agent.errors import PromptFailedError
    from agent.events import EventKind, PromptEvent
    from agent.models import (
        TERMINAL_STATES,
        AuditEntry,
        DataOutput,
        Decision,
        MessageOutput,
        ModelRound,
        Prompt,
        PromptOutput,
        PromptState,
        TextOutput,
        ToolError,
        ToolOutput,
        ToolPending,
        ToolSuccess,
    )
    from workflows import names
    from workflows.decision_tokens import DecisionClaims, DecisionKind, may_decide, verify_decision
    from workflows.inputs import decode_input
    from workflows.names import EMIT_EVENT_ACTIVITY, EVENTS_TOPIC, INVOKE_TOOL_ACTIVITY, MODEL_ROUND_ACTIVITY
    from workflows.protocol import (
        ApprovalRequirement,
        ApproveRequest,
        CallNeedingApproval,
        EventDelivery,
        FinalAnswer,
        InvalidCall,
        OutputChange,
        PendingApproval,
        PlannedCall,
        PromptRequest,
        RejectRequest,
        RetryForSchema,
        RoundInput,
        RoundResult,
        RunnableCall,
        RunTools,
        SteerRequest,
        StreamEvent,
        ToolInvocation,
        ToolInvocationResult,
        TranscriptPage,
        TranscriptPageRequest,
    )
    from workflows.search_attributes import prompt_search_attributes
    from workflows.transcript import build_page

MODEL_TIMEOUT = timedelta(minutes=5)
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=30)  # a model call on a dead worker is retried after this
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=60),
    maximum_attempts=8, non_retryable_error_types=[
        names.FATAL_MODEL_ERROR, names.PLUGIN_PREPARE_ERROR, names.INVALID_OUTPUT_SCHEMA_ERROR],
)
EVENT_RETRY = RetryPolicy(maximum_attempts=3)
INFRASTRUCTURE_ATTEMPTS = 5  # extra tool attempts for worker crashes/timeouts, beyond the tool's own
SKIPPED_BY_STEER = "Skipped: the user sent a new message before this call ran."


def _is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError | CancelledError) or (
        isinstance(exc, ActivityError) and isinstance(exc.cause, CancelledError))


def _fallback_target(exc: ActivityError) -> tuple[int, str] | None:
    """(position, spec) of the next model when the round failed over to a fallback, else None."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type != names.MODEL_FALLBACK_ERROR:
        return None
    details = list(cause.details)
    if len(details) < 2 or not isinstance(details[0], int):
        return None
    return details[0], str(details[1])


def _failure_reason(exc: BaseException) -> str:
    cause = exc.cause if isinstance(exc, ActivityError) and exc.cause is not None else exc
    return getattr(cause, "message", None) or str(cause) or type(cause).__name__


@workflow.defn(name=names.PROMPT_WORKFLOW)
class PromptWorkflow:
    @workflow.init
    def __init__(self, request: RawValue) -> None:
        self._request, self._input_error = decode_input(request, PromptRequest)
        request = self._request
        self._prompt = Prompt(
            id=request.prompt_id or workflow.info().workflow_id, user_id=request.user_id,
            conversation_id=request.conversation_id, model=request.model, visible=request.visible,
            model_settings=request.model_settings,
            input=request.input, created_at=workflow.now(), plugin_state=dict(request.plugin_state),
        )
        self._decisions: dict[str, Decision] = {}
        self._requirements: dict[str, ApprovalRequirement] = {}
        self._waiting: ToolOutput | None = None
        self._event_hooks = False
        self._steers: list[str] = []
        self._output_attempts = 0
        self._changed: set[int] = set()  # output indices added or changed since the last model round
        self._stream = WorkflowStream()
        self._events = self._stream.topic(EVENTS_TOPIC, type=StreamEvent)

    # --- run --------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, request: RawValue) -> Prompt:
        if self._input_error:
            self._finish("failed", error=self._input_error)
            raise ApplicationError(self._input_error, type=names.INVALID_INPUT_ERROR, non_retryable=True)
        self._set_state("running")
        try:
            await self._run_rounds()
        except (ActivityError, PromptFailedError, asyncio.CancelledError) as exc:
            if _is_cancellation(exc):
                self._interrupt("The prompt was cancelled before this call finished.")
                self._finish("cancelled")
                raise asyncio.CancelledError from None
            self._finish("failed", error=_failure_reason(exc))
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._prompt.state == "failed" and self._request.fail_workflow_on_error:
            raise ApplicationError(self._prompt.error or "prompt failed", type=names.PROMPT_FAILED_ERROR,
                                   non_retryable=True)
        return self._prompt

    async def _run_rounds(self) -> None:
        for round_number in range(1, self._request.max_rounds + 1):
            self._prompt.rounds = round_number
            self._deliver_steers()
            result = await self._call_model(round_number)
            for reasoning in result.reasoning:
                self._append(reasoning)
            if result.text:
                self._append(TextOutput(text=result.text))
            if self._steers:  # a message from the user outdates this round's calls and answer
                self._skip(result.calls)
                continue
            match result.next_step():
                case FinalAnswer(data=data):
                    if self._request.output_schema is not None:
                        self._append(DataOutput(data=data))
                    self._finish("completed")
                    return
                case RetryForSchema(reason=reason):
                    self._ask_again_for_schema(reason)
                case RunTools(calls=calls):
                    await self._run_calls(calls)
        self._prompt.force_completed = True
        self._finish("completed")

    def _ask_again_for_schema(self, reason: str) -> None:
        if self._output_attempts >= self._request.output_retries:
            raise PromptFailedError(f"the final answer did not match the output schema: {reason}")
        self._output_attempts += 1
        self._append(MessageOutput(role="system", source="output_validation", text=(
            f"Your final answer did not match the required output schema: {reason}. "
            "Answer again with only a JSON value that matches the schema.")))

    async def _run_calls(self, calls: list[PlannedCall]) -> None:
        for index, call in enumerate(calls):
            if self._steers:
                self._skip(calls[index:])
                return
            await self._process_call(call)

    async def _call_model(self, round_number: int) -> RoundResult:
        request = self._request
        changes = [OutputChange(index=i, output=self._prompt.output[i]) for i in sorted(self._changed)]
        self._changed.clear()
        round_input = RoundInput(
            prompt=self._prompt.model_copy(update={"output": []}), instructions=request.instructions,
            round=round_number, output_schema=request.output_schema, changes=changes,
            output_count=len(self._prompt.output), history_count=len(request.history), run_id=workflow.info().run_id,
            context_max_messages=request.context_max_messages, context_max_tokens=request.context_max_tokens)
        next_model = ""
        while True:
            try:
                result = await workflow.execute_activity(
                    MODEL_ROUND_ACTIVITY, round_input,
                    result_type=RoundResult, start_to_close_timeout=MODEL_TIMEOUT,
                    heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT, retry_policy=MODEL_RETRY,
                    summary=self._model_summary(round_number, round_input.fallback, next_model),
                )
                break
            except ActivityError as exc:
                # Only a worker configured with a fallback chain raises this, so histories without it replay.
                target = _fallback_target(exc)
                if target is None or target[0] <= round_input.fallback:
                    raise
                position, next_model = target
                round_input = round_input.model_copy(update={"fallback": position})
        self._prompt.model_rounds.append(ModelRound(round=round_number, model=result.spec or result.model,
                                                    response_model=result.model, fallback=result.fallback,
                                                    settings=result.settings))
        self._prompt.usage = self._prompt.usage + result.usage
        self._prompt.plugin_state = dict(result.plugin_state)
        self._event_hooks = result.event_hooks
        return result

    def _model_summary(self, round_number: int, fallback: int = 0, model: str = "") -> str:
        summary = f"model {self._prompt.model} round {round_number}"
        details = [f"fallback {fallback}: {model}"] if fallback else []
        if self._prompt.model_settings and (settings := self._prompt.model_settings.summary()):
            details.append(settings)
        return f"{summary} ({'; '.join(details)})" if details else summary

    async def _process_call(self, call: PlannedCall) -> None:
        entry = ToolOutput(id=self._unique_call_id(call.id), tool=call.tool, input=call.input,
                           started_at=workflow.now())
        self._append(entry)
        match call:
            case InvalidCall(error=error):
                self._resolve(entry, ToolError(error=error))
                return
            case CallNeedingApproval(approval=approval):
                decision = await self._await_decision(entry, approval)
                entry.decision = decision
                if decision.decision != "approved":
                    self._resolve(entry, ToolError(error=self._refusal_text(decision)))
                    return
        await self._invoke(entry, call, entry.input)  # the approver may have corrected the input

    async def _invoke(self, entry: ToolOutput, call: RunnableCall, arguments: object) -> None:
        entry.started_at = workflow.now()
        plugin_state = self._prompt.plugin_state.get(call.plugin) if call.plugin else None
        invocation = ToolInvocation(
            prompt_id=self._prompt.id, user_id=self._prompt.user_id, conversation_id=self._prompt.conversation_id,
            workflow_id=workflow.info().workflow_id, call=call.model_copy(update={"id": entry.id}),
            input=arguments, plugin_state=plugin_state)
        retry = RetryPolicy(initial_interval=timedelta(seconds=1),
                            maximum_attempts=call.max_attempts + INFRASTRUCTURE_ATTEMPTS)
        timeout = call.timeout
        try:
            if call.local:
                outcome = await workflow.execute_local_activity(
                    INVOKE_TOOL_ACTIVITY, invocation, result_type=ToolInvocationResult,
                    start_to_close_timeout=timeout, retry_policy=retry, summary=f"tool {call.tool}")
            else:
                outcome = await workflow.execute_activity(
                    INVOKE_TOOL_ACTIVITY, invocation, result_type=ToolInvocationResult,
                    start_to_close_timeout=timeout, heartbeat_timeout=call.heartbeat_timeout,
                    retry_policy=retry,
                    summary=f"tool {call.tool}")
        except ActivityError as exc:
            if _is_cancellation(exc):
                raise
            outcome = ToolInvocationResult(result=ToolError(error=f"Tool call failed: {_failure_reason(exc)}"))
        self._resolve(entry, outcome.result)
        for side_output in outcome.side_outputs:
            self._append(side_output)
        if outcome.state_changed and call.plugin:
            self._prompt.plugin_state[call.plugin] = outcome.plugin_state
        if isinstance(outcome.result, ToolError) and call.failure_mode == "fail":
            raise PromptFailedError(f"tool '{call.tool}' failed: {outcome.result.error}")

    # --- steering -----------------------------------------------------------------------------------

    @workflow.signal(name=names.STEER_SIGNAL)
    def steer(self, request: SteerRequest) -> None:
        if self._prompt.state in TERMINAL_STATES:
            self._ignore("steer", f"prompt {self._prompt.id} is already {self._prompt.state}")
            return
        self._steers.append(request.message)

    def _deliver_steers(self) -> None:
        for message in self._steers:
            self._append(MessageOutput(role="user", source="steer", text=message))
        self._steers.clear()

    def _skip(self, calls: list[PlannedCall]) -> None:
        for call in calls:
            entry = ToolOutput(id=self._unique_call_id(call.id), tool=call.tool, input=call.input,
                               started_at=workflow.now())
            self._append(entry)
            self._resolve(entry, ToolError(error=SKIPPED_BY_STEER))

    # --- approvals --------------------------------------------------------------------------------

    async def _await_decision(self, entry: ToolOutput, approval: ApprovalRequirement) -> Decision:
        now = workflow.now()
        expires_in = approval.expires_after
        entry.result = ToolPending(reason=approval.reason, requested_at=now,
                                   expires_at=now + expires_in if expires_in else None,
                                   approvers=approval.approvers)
        self._touch(entry)
        self._requirements[entry.id] = approval
        self._waiting = entry
        self._set_state("waiting_for_approval")
        self._events.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=self._index(entry), output=entry))
        await self._emit(PromptEvent(kind=EventKind.APPROVAL_REQUESTED, prompt_id=self._prompt.id,
                                     user_id=self._prompt.user_id, conversation_id=self._prompt.conversation_id,
                                     tool_call_id=entry.id, tool=entry.tool, input=entry.input,
                                     reason=approval.reason))
        try:
            await workflow.wait_condition(lambda: entry.id in self._decisions or bool(self._steers),
                                          timeout=expires_in, timeout_summary=f"approval expiry {entry.tool}")
            decision = self._decisions.get(entry.id) or Decision(
                decision="superseded", at=workflow.now(), reason="the user sent a new message")
        except TimeoutError:
            decision = Decision(decision="expired", at=workflow.now(), reason="approval expired")
        self._decisions[entry.id] = decision
        self._waiting = None
        self._set_state("running")
        return decision

    @staticmethod
    def _refusal_text(decision: Decision) -> str:
        if decision.decision == "expired":
            return "The call was not run: approval expired before anyone decided."
        if decision.decision == "superseded":
            return "The call was not run: the user sent a new message instead of deciding."
        by = f" by {decision.by}" if decision.by else ""
        reason = f": {decision.reason}" if decision.reason else ""
        return f"The call was rejected{by}{reason}"

    def _decision_problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest) -> str | None:
        """Why a decision cannot be accepted now, or None when it can."""
        tool_call_id, by = request.tool_call_id, request.by
        if tool_call_id in self._decisions:
            return f"tool call {tool_call_id!r} was already decided ({self._decisions[tool_call_id].decision})"
        waiting = self._waiting
        if waiting is None or self._prompt.state != "waiting_for_approval":
            known = self._prompt.tool_call(tool_call_id) is not None
            what = "has no pending approval for" if known else "has no tool call"
            return f"prompt {self._prompt.id} ({self._prompt.state}) {what} {tool_call_id!r}"
        if waiting.id != tool_call_id:
            return f"unknown tool call {tool_call_id!r}; the pending call is {waiting.id!r}"
        assert isinstance(waiting.result, ToolPending)
        allowed = waiting.result.approvers
        requirement = self._requirements.get(tool_call_id)
        roles: list[str] = []
        if requirement is not None and requirement.decision_key:
            # The signature check imports (e.g. cryptography's exception types) from native code: those
            # imports must reach the real modules, not sandbox copies. Pure computation, deterministic.
            with workflow.unsafe.imports_passed_through():
                verified = verify_decision(
                    request.token, public_key_pem=requirement.decision_key, prompt_id=workflow.info().workflow_id,
                    tool_call_id=tool_call_id, decision=kind, by=by,
                    corrected_input=request.input if isinstance(request, ApproveRequest) else None,
                    now=workflow.now())
            if not isinstance(verified, DecisionClaims):
                return f"decision on {tool_call_id!r} refused: {verified}"
            roles = verified.roles
        if not may_decide(allowed, by, roles):
            return f"{by or 'an anonymous caller'} may not decide {tool_call_id!r}; " \
                   f"approvers: {', '.join(allowed or [])}"
        return None

    def _accept_approval(self, request: ApproveRequest) -> None:
        waiting = self._waiting
        assert waiting is not None
        original = None
        if request.input is not None:
            original, waiting.input = waiting.input, request.input
        self._decisions[request.tool_call_id] = Decision(
            decision="approved", by=request.by, at=workflow.now(), original_input=original)

    def _accept_rejection(self, request: RejectRequest) -> None:
        self._decisions[request.tool_call_id] = Decision(
            decision="rejected", by=request.by, at=workflow.now(), reason=request.reason)

    def _ignore(self, kind: str, problem: str) -> None:
        workflow.logger.warning("ignored %s signal: %s", kind, problem)
        self._prompt.audit.append(AuditEntry(at=workflow.now(), kind=f"ignored_{kind}", detail=problem))

    @workflow.signal(name=names.APPROVE_SIGNAL)
    def approve(self, request: ApproveRequest) -> None:
        problem = self._decision_problem("approve", request)
        if problem:
            self._ignore("approve", problem)
        else:
            self._accept_approval(request)

    @workflow.signal(name=names.REJECT_SIGNAL)
    def reject(self, request: RejectRequest) -> None:
        problem = self._decision_problem("reject", request)
        if problem:
            self._ignore("reject", problem)
        else:
            self._accept_rejection(request)

    @workflow.update(name=names.APPROVE_CALL_UPDATE)
    async def approve_call(self, request: ApproveRequest) -> ToolOutput:
        # Two updates delivered in one activation both pass their validators before either handler runs:
        # checking again here makes exactly one of them win.
        if problem := self._decision_problem("approve", request):
            raise ApplicationError(problem, type="DecisionRefused")
        self._accept_approval(request)
        return await self._resolved(request.tool_call_id)

    @approve_call.validator
    def _validate_approve_call(self, request: ApproveRequest) -> None:
        if problem := self._decision_problem("approve", request):
            raise ValueError(problem)

    @workflow.update(name=names.REJECT_CALL_UPDATE)
    async def reject_call(self, request: RejectRequest) -> ToolOutput:
        if problem := self._decision_problem("reject", request):
            raise ApplicationError(problem, type="DecisionRefused")
        self._accept_rejection(request)
        return await self._resolved(request.tool_call_id)

    @reject_call.validator
    def _validate_reject_call(self, request: RejectRequest) -> None:
        if problem := self._decision_problem("reject", request):
            raise ValueError(problem)

    async def _resolved(self, tool_call_id: str) -> ToolOutput:
        entry = self._prompt.tool_call(tool_call_id)
        assert entry is not None
        await workflow.wait_condition(lambda: entry.finished_at is not None)
        return entry

    # --- queries ----------------------------------------------------------------------------------

    @workflow.query(name=names.GET_PROMPT_QUERY)
    def get_prompt(self) -> Prompt:
        return self._prompt

    @workflow.query(name=names.TRANSCRIPT_QUERY)
    def transcript(self, request: TranscriptPageRequest) -> TranscriptPage:
        """History and outputs, paged: how a worker without a cached copy reads the model's context."""
        return build_page(self._request.history, self._prompt.output, request.start, request.max_bytes)

    @workflow.query(name=names.PENDING_APPROVALS_QUERY)
    def pending_approvals(self) -> list[PendingApproval]:
        entry = self._waiting
        if entry is None or not isinstance(entry.result, ToolPending):
            return []
        pending = entry.result
        requirement = self._requirements.get(entry.id)
        return [PendingApproval(tool_call_id=entry.id, tool=entry.tool, input=entry.input, reason=pending.reason,
                                requested_at=pending.requested_at, expires_at=pending.expires_at,
                                approvers=pending.approvers,
                                input_schema=requirement.input_schema if requirement else None,
                                signed_decisions=bool(requirement and requirement.decision_key))]

    # --- recording ----------------------------------------------------------------------------------

    def _append(self, entry: PromptOutput) -> None:
        self._prompt.output.append(entry)
        self._changed.add(len(self._prompt.output) - 1)
        self._events.publish(StreamEvent(kind=EventKind.OUTPUT_ADDED, index=len(self._prompt.output) - 1, output=entry))

    def _index(self, entry: PromptOutput) -> int:
        return next(i for i, e in enumerate(self._prompt.output) if e is entry)

    def _touch(self, entry: PromptOutput) -> None:
        index = self._index(entry)
        self._changed.add(index)
        self._events.publish(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=index, output=entry))

    def _resolve(self, entry: ToolOutput, result: ToolSuccess | ToolError) -> None:
        entry.result, entry.finished_at = result, workflow.now()
        self._touch(entry)

    def _interrupt(self, reason: str) -> None:
        for entry in self._prompt.output:
            if isinstance(entry, ToolOutput) and (entry.result is None or isinstance(entry.result, ToolPending)):
                self._resolve(entry, ToolError(error=reason))
        self._waiting = None

    def _unique_call_id(self, call_id: str) -> str:
        candidate, n = call_id or "call", 1
        while self._prompt.tool_call(candidate) is not None:
            n += 1
            candidate = f"{call_id}-{n}"
        return candidate

    def _set_state(self, state: PromptState) -> None:
        self._prompt.state = state
        workflow.upsert_search_attributes(prompt_search_attributes(self._prompt))
        self._events.publish(StreamEvent(kind=EventKind.STATE_CHANGED, state=state))

    def _finish(self, state: PromptState, error: str | None = None) -> None:
        self._prompt.finished_at = workflow.now()
        self._prompt.error = error
        self._waiting = None
        self._set_state(state)

    async def _emit(self, event: PromptEvent) -> None:
        if not self._event_hooks:
            return
        try:
            await workflow.execute_activity(
                EMIT_EVENT_ACTIVITY, EventDelivery(event=event), start_to_close_timeout=timedelta(seconds=30),
                retry_policy=EVENT_RETRY, summary=f"event {event.kind}",
            )
        except ActivityError as exc:
            if _is_cancellation(exc):
                raise
            workflow.logger.warning("event %s not delivered: %s", event.kind, _failure_reason(exc))
