"""PromptWorkflow: one prompt, run as rounds of model call + tool calls, pausing durably for approvals.

Data and control flow only. Plugin code, model calls and tools run in activities referenced by their
stable names, so this module imports no provider SDK and no plugin code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream

    from durable_agent.agent import identity
    from durable_agent.agent.errors import PromptFailedError, RefusalKind
    from durable_agent.agent.events import EventKind, PromptEvent
    from durable_agent.agent.identity import Identity
    from durable_agent.agent.models import (
        TERMINAL_STATES,
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
    from durable_agent.agent.period_budgets import (
        MORE_BUDGET_TOOL,
        BudgetRefusal,
        BudgetRound,
        BudgetRoundResult,
        BudgetSettlement,
        BudgetStanding,
        Grant,
    )
    from durable_agent.workflows import details, names, telemetry, versions
    from durable_agent.workflows.audit import record_ignored
    from durable_agent.workflows.budgets import budget_reached
    from durable_agent.workflows.corrections import correction_refusal, merge_patch, schema_problem
    from durable_agent.workflows.decision_tokens import DecisionClaims, DecisionKind, may_decide, verify_decision
    from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES, describe_exception, is_workflow_bug
    from durable_agent.workflows.history_store import store_history
    from durable_agent.workflows.inputs import decode_input, decode_payloads, raw_payloads
    from durable_agent.workflows.legacy import LegacyToolInvocation, upsert_every_search_attribute
    from durable_agent.workflows.names import (
        BUDGET_RESERVE_ACTIVITY,
        BUDGET_SETTLE_ACTIVITY,
        CHECK_CORRECTION_ACTIVITY,
        EMIT_EVENT_ACTIVITY,
        EVENTS_TOPIC,
        INVOKE_TOOL_ACTIVITY,
        MODEL_ROUND_ACTIVITY,
    )
    from durable_agent.workflows.pending_memo import PENDING_MEMO_KEY, pending_memo
    from durable_agent.workflows.protocol import (
        ApprovalRequirement,
        ApproveRequest,
        CallNeedingApproval,
        ChildApprovals,
        CorrectionCheck,
        CorrectionVerdict,
        EventDelivery,
        FinalAnswer,
        HistoryRef,
        InvalidCall,
        OutputChange,
        ParentLink,
        PendingApproval,
        PlannedCall,
        PromptRequest,
        RejectRequest,
        RetryForSchema,
        RoundInput,
        RoundResult,
        RunTools,
        SteerRequest,
        StreamEvent,
        ToolInvocation,
        ToolInvocationResult,
        TranscriptPage,
        TranscriptPageRequest,
    )
    from durable_agent.workflows.search_attributes import changed_search_attributes
    from durable_agent.workflows.stream_guard import guard_stream_poll, guard_stream_publish
    from durable_agent.workflows.transcript import build_page, change_for

# What a cancelled prompt's unfinished calls say: whether their side effect may have happened.
CANCELLED_WHILE_RUNNING = ("The prompt was cancelled before this call finished: it was stopped while running "
                           "(or before it started), so its side effect may have happened.")
CANCELLED_WHILE_WAITING = "The prompt was cancelled while this call waited for approval: it never ran."
MODEL_TIMEOUT = timedelta(minutes=5)
# A model call on a dead worker is retried after this (the activity heartbeats every 0.5 s from its start; the
# timeout is not part of replay, so changing it needs no patch).
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(seconds=60),
    maximum_attempts=8, non_retryable_error_types=[
        names.FATAL_MODEL_ERROR, names.PLUGIN_PREPARE_ERROR, names.INVALID_OUTPUT_SCHEMA_ERROR],
)
EVENT_RETRY = RetryPolicy(maximum_attempts=3)
PARALLEL_CALLS_PATCH = "parallel-tool-calls"  # calls of one response side by side; approvals as one batch
ROUND_REFS_PATCH = "round-input-by-reference"  # large tool outputs and a conversation's history by reference
HISTORY_STORE_PATCH = "given-history-stored"  # history given by value goes to the store once, then by reference
# Less per round: the tool activity's input without derivable fields, and search attributes upserted only
# when a value changes. A prompt started with a version has them all without markers (workflows/versions.py).
LEAN_ROUNDS_PATCH = "lean-rounds"
# Decisions under the approval policy: a correction is checked by the tool's policy before it is approved;
# typed approvers (`user:`/`role:`), four-eyes; decision tokens bound to the run, the exact arguments and a
# one-use nonce; sub-agent reports only from the child this prompt started; run-scoped idempotency keys.
SECURE_DECISIONS_PATCH = "secure-decisions"
CORRECTION_CHECK_TIMEOUT = timedelta(seconds=30)
CHILD_VERDICT_TIMEOUT = timedelta(seconds=60)  # how long a forwarded decision's update waits for the sub-agent
CORRECTION_CHECK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# A finished call's side outputs (files, widgets) and state change enter the record when it finishes (after those
# of the calls before it), not once the rest of its group, or the approvals of its response's batch, are done.
FINISHED_CALL_OUTPUTS_PATCH = "finished-call-outputs"
# The waiting calls kept in the memo, for one visibility query to list them (workflows/pending_memo.py).
PENDING_MEMO_PATCH = "pending-memo"
# Period budgets: each round reserved from and settled with the principals' ledgers (agent/period_budgets.py).
PERIOD_BUDGETS_PATCH = "period-budgets"
BUDGET_TIMEOUT = timedelta(seconds=30)
BUDGET_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                           maximum_attempts=10)
INFRASTRUCTURE_ATTEMPTS = 5  # extra tool attempts for worker crashes/timeouts, beyond the tool's own
SKIPPED_BY_STEER = "Skipped: the user sent a new message before this call ran."


T = TypeVar("T")
ModelT = TypeVar("ModelT", SteerRequest, ApproveRequest, RejectRequest)
DecisionT = TypeVar("DecisionT", ApproveRequest, RejectRequest)


def _is_cancellation(exc: BaseException) -> bool:
    return isinstance(exc, asyncio.CancelledError | CancelledError) or (
        isinstance(exc, ActivityError | ChildWorkflowError) and isinstance(exc.cause, CancelledError))


def _fallback_target(exc: ActivityError) -> tuple[int, str] | None:
    """(position, spec) of the next model when the round failed over to a fallback, else None."""
    cause = exc.cause
    if not isinstance(cause, ApplicationError) or cause.type != names.MODEL_FALLBACK_ERROR:
        return None
    details = list(cause.details)
    if len(details) < 2 or not isinstance(details[0], int):
        return None
    return details[0], str(details[1])


def _transcript_missing(exc: ActivityError) -> bool:
    """The worker that ran the round lacked part of its input (no query fills the gap: the workflow resends)."""
    cause = exc.cause
    return isinstance(cause, ApplicationError) and cause.type == names.TRANSCRIPT_MISSING_ERROR


@dataclass(frozen=True)
class Refusal:
    """Why a decision cannot be taken: `kind` for programs (the client's `DecisionRefused.kind`), `message`
    for people (and the audit)."""

    kind: RefusalKind
    message: str

    def error(self) -> ApplicationError:
        """The update's failure: its type names the refusal, its first detail the kind."""
        return ApplicationError(self.message, self.kind, type=names.DECISION_REFUSED_ERROR, non_retryable=True)


def _decision_refused(tool_call_id: str, reason: str) -> Refusal:
    return Refusal("not-allowed", f"decision on {tool_call_id!r} refused: {reason}")


def _not_allowed(by: str | None, tool_call_id: str, approvers: list[str] | None) -> Refusal:
    return Refusal("not-allowed", f"{by or 'an anonymous caller'} may not decide {tool_call_id!r}; "
                                  f"approvers: {', '.join(approvers or [])}")


def _applied(step: Callable[[], T]) -> T:
    """Run an update handler's step; a refusal or a bug fails the update, never the workflow task."""
    try:
        return step()
    except ValueError as exc:
        raise Refusal("decision-refused", str(exc)).error() from exc
    except Exception as exc:
        if not is_workflow_bug(exc):
            raise
        raise ApplicationError(f"internal error: {describe_exception(exc)}", type="InternalError",
                               non_retryable=True) from exc


def _failure_reason(exc: BaseException) -> str:
    cause = exc.cause if isinstance(exc, ActivityError | ChildWorkflowError) and exc.cause is not None else exc
    return getattr(cause, "message", None) or str(cause) or type(cause).__name__


@dataclass
class _WaitingCall:
    """A call waiting for a decision, with what its approval requires (approvers, schema, decision key)."""

    entry: ToolOutput
    requirement: ApprovalRequirement
    plugin: str | None = None  # where the tool's policy runs again on a correction


@dataclass(frozen=True)
class _Decider:
    """Who a decision comes from, as checked: the person and their (verified) roles, the approver entry that
    allowed them, and the nonce of their token (accepted once)."""

    who: Identity
    via: str | None = None
    nonce: str | None = None


@dataclass
class _Child:
    """A sub-agent this prompt started: only its reports are taken."""

    workflow_id: str
    nonce: str
    run_id: str | None = None


@workflow.defn(name=names.PROMPT_WORKFLOW, failure_exception_types=WORKFLOW_FAILURE_TYPES)
class PromptWorkflow:
    @workflow.init
    @raw_payloads
    def __init__(self, *payloads: object) -> None:
        self._request, self._input_error = decode_input(payloads, PromptRequest)
        request = self._request
        self._prompt = Prompt(
            id=request.prompt_id or workflow.info().workflow_id, user_id=request.user_id,
            conversation_id=request.conversation_id, model=request.model, visible=request.visible,
            model_settings=request.model_settings,
            input=request.input, created_at=workflow.now(), plugin_state=dict(request.plugin_state),
        )
        self._decisions: dict[str, Decision] = {}
        self._waiting: dict[str, _WaitingCall] = {}  # calls waiting for a decision, in record order
        self._child_pending: dict[str, ChildApprovals] = {}  # by sub-agent call id: what its prompt waits for
        self._announced: set[str] = set()  # sub-agents' calls (`<call>/<its call>`) published as approval_requested
        self._background: set[asyncio.Task[None]] = set()
        # Whether this run decides under the approval policy (SECURE_DECISIONS_PATCH); an unversioned run
        # asks its patch marker when it starts (no call can be pending before then).
        version = request.workflow_version
        self._secure = version is not None and versions.has(SECURE_DECISIONS_PATCH, version)
        self._used_nonces: set[str] = set()  # decision tokens' nonces, each accepted once
        self._children: dict[str, _Child] = {}  # by sub-agent call id
        self._child_refusals: dict[str, str] = {}  # `<call>/<its call>` -> why its sub-agent refused a decision
        if request.parent is not None:
            self._prompt.parent_prompt_id = request.parent.prompt_id
        self._event_hooks = False
        self._steers: list[str] = []
        self._output_attempts = 0
        self._changed: set[int] = set()  # output indices added or changed since the last model round
        self._history_sent = False  # the request's by-value history went with a round input of this run
        self._history_stored: HistoryRef | None = None  # the request's history (both parts) in the store
        self._failed_tools: list[str] = []  # tools whose calls ended in an error since the last model round
        self._stream = WorkflowStream()
        self._events = self._stream.topic(EVENTS_TOPIC, type=StreamEvent)
        guard_stream_publish(lambda problem: self._ignore("stream_publish", problem))
        guard_stream_poll(self._stream)
        self._metrics = telemetry.WorkflowMetrics()
        self._span: telemetry.Span | None = None
        self._call_spans: dict[str, telemetry.Span] = {}  # open dagent.tool_call spans by call id
        self._pending_memo: dict[str, object] = {}  # the waiting calls as the memo last said (nothing yet)
        self._reservation: str | None = None  # this round's reservation with the budget ledgers, until settled
        self._grant: tuple[str, Grant] | None = None  # (principal, extra allowance) approved, for the next reserve

    # --- run --------------------------------------------------------------------------------------

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Prompt:
        conversation_child = bool(self._request.conversation_id) and workflow.info().parent is not None
        with telemetry.prompt_span(self._prompt.id, conversation_child=conversation_child) as span:
            self._span = span
            self._prompt.trace_id = telemetry.trace_id_of(span)
            ending = await self._run_traced()
        if ending is not None:
            raise ending
        return self._prompt

    async def _run_traced(self) -> BaseException | None:
        """The prompt's life; returns the exception that ends the workflow, if any, so that the prompt span
        ends with the final state first."""
        if self._input_error:
            self._finish("failed", error=self._input_error)
            return ApplicationError(self._input_error, type=names.INVALID_INPUT_ERROR, non_retryable=True)
        self._set_state("running")
        if self._request.workflow_version is None:
            self._secure = workflow.patched(SECURE_DECISIONS_PATCH)
        try:
            await self._run_rounds()
        except (ActivityError, ChildWorkflowError, PromptFailedError, asyncio.CancelledError) as exc:
            if _is_cancellation(exc):
                self._interrupt(CANCELLED_WHILE_RUNNING, waiting=CANCELLED_WHILE_WAITING)
                self._finish("cancelled")
                return asyncio.CancelledError()
            self._interrupt("Not run: the prompt failed before this call finished.")
            self._finish("failed", error=_failure_reason(exc))
        except Exception as exc:
            if not is_workflow_bug(exc):
                raise
            # A bug in this workflow's code: fail the prompt with the reason rather than retry the task forever.
            self._interrupt("The prompt failed before this call finished.")
            self._finish("failed", error=f"internal error: {describe_exception(exc)}")
        self._stream.detach_pollers()  # a poll waiting for an offset never reached must not hold the end
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._prompt.state == "failed" and self._request.fail_workflow_on_error:
            return ApplicationError(self._prompt.error or "prompt failed", type=names.PROMPT_FAILED_ERROR,
                                    non_retryable=True)
        return None

    async def _run_rounds(self) -> None:
        for round_number in range(1, self._request.max_rounds + 1):
            if self._ledgered() and not await self._reserve_round(round_number):
                return
            self._prompt.rounds = round_number
            with telemetry.span(telemetry.ROUND_SPAN, **{"dagent.prompt.id": self._prompt.id,
                                                         "dagent.round": round_number}):
                if await self._round(round_number):
                    self._finish("completed")
                    return
            if (reason := budget_reached(self._prompt.usage, self._request.budget)) is not None:
                self._stop_for_budget(reason)
                return
        self._prompt.force_completed = True
        self._finish("completed")

    def _stop_for_budget(self, reason: str) -> None:
        """No further model call: complete with why (workflows/budgets.py)."""
        self._append(MessageOutput(role="system", source="budget", text=f"Stopped: {reason}."))
        self._prompt.budget_stop = reason
        self._prompt.force_completed = True
        self._finish("completed")

    # --- period budgets (agent/period_budgets.py) ---------------------------------------------------

    def _ledgered(self) -> bool:
        """Whether this prompt's rounds go through its principals' budget ledgers (none named: no activity)."""
        return bool(self._request.budgets) and self._has(PERIOD_BUDGETS_PATCH)

    async def _reserve_round(self, round_number: int) -> bool:
        """Reserve the round with every ledger; False once a spent budget stopped the prompt. Under an `ask`
        budget the prompt first waits for an approver to grant more (a `dagent.more_budget` call)."""
        info = workflow.info()
        reservation = f"{info.workflow_id}/{info.run_id}/{round_number}"
        while True:
            principal, grant = self._grant or (None, None)
            try:
                verdict = await workflow.execute_activity(
                    BUDGET_RESERVE_ACTIVITY, BudgetRound(
                        principals=self._request.budgets, reservation_id=reservation, prompt_id=self._prompt.id,
                        grant=grant, grant_principal=principal),
                    result_type=BudgetRoundResult, start_to_close_timeout=BUDGET_TIMEOUT, retry_policy=BUDGET_RETRY,
                    summary=f"budget reserve round {round_number}")
            except ActivityError as exc:
                if _is_cancellation(exc):
                    raise
                self._stop_for_budget(f"the budget ledger could not be reached: {_failure_reason(exc)}")
                return False
            self._grant = None
            self._record_standings(verdict.standings)
            refusal = verdict.refusal
            if refusal is None:
                self._reservation = reservation
                return True
            if refusal.limit.on_exhausted != "ask" or not await self._ask_for_more(refusal, verdict.decision_key):
                self._stop_for_budget(refusal.reason)
                return False

    async def _settle_round(self, result: RoundResult) -> None:
        """The round's actual tokens and cost, to every ledger (its reservation is closed)."""
        reservation, self._reservation = self._reservation, None
        assert reservation is not None
        usage = result.usage
        try:
            standings = await workflow.execute_activity(
                BUDGET_SETTLE_ACTIVITY, BudgetSettlement(
                    principals=self._request.budgets, reservation_id=reservation,
                    tokens=usage.input_tokens + usage.output_tokens, cost=usage.cost or 0.0),
                result_type=list[BudgetStanding], start_to_close_timeout=BUDGET_TIMEOUT, retry_policy=BUDGET_RETRY,
                summary=f"budget settle round {self._prompt.rounds}")
        except ActivityError as exc:
            if _is_cancellation(exc):
                raise
            self._ignore("budget_settle", f"round {self._prompt.rounds} spend not recorded by the budget ledgers: "
                                          f"{_failure_reason(exc)}")
            return
        self._record_standings(standings)

    def _record_standings(self, standings: list[BudgetStanding]) -> None:
        """Spend against budget in the record, one entry per principal, as the ledgers last answered."""
        known = {standing.principal: standing for standing in self._prompt.budgets}
        known.update({standing.principal: standing for standing in standings})
        self._prompt.budgets = [known[p] for p in self._request.budgets if p in known]

    async def _ask_for_more(self, refusal: BudgetRefusal, decision_key: str | None) -> bool:
        """A pending `dagent.more_budget` call, decided like any call (inbox, `dagent approve`, HTTP) by the
        budget's approvers (four-eyes: never the prompt's own user); a correction of `asking` changes the
        amount. True once more was granted (for this period, by the ledger at the next reserve)."""
        limit, unit = refusal.limit, refusal.unit
        asking = limit.max_tokens if unit == "tokens" else limit.max_cost
        fixed = {"budget": refusal.principal, "period": limit.period, "unit": unit, "allowance": refusal.allowance,
                 "spent": refusal.spent}
        entry = ToolOutput(id=self._unique_call_id("more-budget"), tool=MORE_BUDGET_TOOL,
                           input={**fixed, "asking": asking}, started_at=workflow.now())
        self._append(entry)
        schema: dict[str, object] = {
            "type": "object", "required": ["asking"],
            "properties": {**{key: {"const": value} for key, value in fixed.items()},
                           "asking": {"type": "integer" if unit == "tokens" else "number", "exclusiveMinimum": 0}}}
        approval = ApprovalRequirement(
            reason=f"{refusal.reason}; approve to grant {asking:g} more {unit} this {limit.period}",
            approvers=limit.approvers, input_schema=schema, decision_key=decision_key,  # type: ignore[arg-type]
            four_eyes=True)
        decision = await self._await_decision(entry, approval)
        entry.decision = decision
        if decision.decision != "approved":
            self._resolve(entry, ToolError(error=self._refusal_text(decision)))
            return False
        amount = entry.input["asking"] if isinstance(entry.input, dict) else asking
        assert isinstance(amount, int | float)
        self._resolve(entry, ToolSuccess(output=f"granted {amount:g} more {unit} to {refusal.principal} "
                                                f"this {limit.period}"))
        info = workflow.info()
        self._grant = (refusal.principal, Grant(id=f"{info.workflow_id}/{info.run_id}/{entry.id}", unit=unit,
                                                amount=float(amount)))
        return True

    async def _round(self, round_number: int) -> bool:
        """One model call and the tool calls it asks for; True when the answer is final."""
        self._deliver_steers()
        result = await self._call_model(round_number)
        if self._reservation is not None:
            await self._settle_round(result)
        for reasoning in result.reasoning:
            self._append(reasoning)
        if result.text:
            self._append(TextOutput(text=result.text))
        if self._steers:  # a message from the user outdates this round's calls and answer
            self._skip(result.calls)
            return False
        match result.next_step():
            case FinalAnswer(data=data):
                if self._request.output_schema is not None:
                    self._append(DataOutput(data=data))
                return True
            case RetryForSchema(reason=reason):
                self._ask_again_for_schema(reason)
            case RunTools(calls=calls):
                await self._run_calls(calls)
        return False

    def _ask_again_for_schema(self, reason: str) -> None:
        if self._output_attempts >= self._request.output_retries:
            raise PromptFailedError(f"the final answer did not match the output schema: {reason}")
        self._output_attempts += 1
        self._append(MessageOutput(role="system", source="output_validation", text=(
            f"Your final answer did not match the required output schema: {reason}. "
            "Answer again with only a JSON value that matches the schema.")))

    async def _run_calls(self, calls: list[PlannedCall]) -> None:
        if self._has(PARALLEL_CALLS_PATCH):
            await self._process_calls(calls)
            return
        for index, call in enumerate(calls):
            if self._steers:
                self._skip(calls[index:])
                return
            await self._process_call(call)

    async def _call_model(self, round_number: int) -> RoundResult:
        request = self._request
        await self._store_given_history()
        round_input = self._round_input(round_number)
        next_model = ""
        queue = request.model_task_queue or None
        workflow.set_current_details(details.calling_model(self._prompt, round_number))
        after_errors = f" · after tool error: {', '.join(self._failed_tools)}" if self._failed_tools else ""
        self._failed_tools = []
        while True:
            try:
                result = await workflow.execute_activity(
                    MODEL_ROUND_ACTIVITY, round_input,
                    result_type=RoundResult, start_to_close_timeout=MODEL_TIMEOUT,
                    heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT, retry_policy=MODEL_RETRY,
                    task_queue=queue,
                    summary=self._model_summary(round_number, round_input.fallback, next_model) + after_errors,
                )
                break
            except ActivityError as exc:
                if _transcript_missing(exc) and round_input.changes is not None:
                    round_input = self._whole_round_input(round_input)  # that worker lacked part of it
                    continue
                # Only a worker configured with a fallback chain raises this, so histories without it replay.
                target = _fallback_target(exc)
                if target is None or target[0] <= round_input.fallback:
                    raise
                position, next_model = target
                round_input = round_input.model_copy(update={"fallback": position})
                if request.model_routing is not None:  # the next model's provider has its own rate limit
                    queue = request.model_routing.queue_for(next_model)
        self._prompt.model_rounds.append(ModelRound(round=round_number, model=result.spec or result.model,
                                                    response_model=result.model, fallback=result.fallback,
                                                    settings=result.settings))
        self._prompt.usage = self._prompt.usage + result.usage
        self._prompt.plugin_state = dict(result.plugin_state)
        self._metrics.model_round(result.model or self._prompt.model, result.usage)
        self._event_hooks = result.event_hooks
        return result

    def _round_input(self, round_number: int) -> RoundInput:
        """What changed since the last round; earlier outputs and prompts stay with the worker (its cache) or
        in the store (a conversation's history), referenced, never copied again."""
        request = self._request
        by_reference = self._has(ROUND_REFS_PATCH)
        # Tools run on this queue: with model calls on another queue, no tool output is ever cached where they run.
        outputs_by_reference = by_reference and not request.model_task_queue and not request.model_routing
        changes = [change_for(i, self._prompt.output[i]) if outputs_by_reference
                   else OutputChange(index=i, output=self._prompt.output[i]) for i in sorted(self._changed)]
        self._changed.clear()
        history = request.history if by_reference and not self._history_sent and not self._history_stored else []
        self._history_sent = self._history_sent or by_reference
        history_ref = self._history_stored or (request.history_ref if by_reference else None)
        return RoundInput(
            prompt=self._header(by_reference), instructions=request.instructions,
            round=round_number, output_schema=request.output_schema, changes=changes,
            output_count=len(self._prompt.output), history_count=self._history_count(), run_id=workflow.info().run_id,
            context_max_messages=request.context_max_messages, context_max_tokens=request.context_max_tokens,
            plugins=request.plugins, history=history, history_ref=history_ref)

    def _whole_round_input(self, partial: RoundInput) -> RoundInput:
        """The round's input with every output and earlier prompt by value (only a conversation's stored
        history stays referenced): for a worker that did not have the rest."""
        self._history_sent = True
        whole = self._header(self._has(ROUND_REFS_PATCH)).model_copy(update={"output": self._prompt.output})
        return partial.model_copy(update={"prompt": whole.model_copy(deep=True), "changes": None,
                                          "history": [] if self._history_stored else self._request.history,
                                          "history_ref": partial.history_ref})

    async def _store_given_history(self) -> None:
        """Earlier prompts given by value (by a caller, not by a conversation) go to the store before the first
        round, with the `store_history` local activity (its input is not written to history): no round input
        carries them again, and a worker without them loads them from the store."""
        request = self._request
        if self._history_stored is not None or not request.history or not self._has(HISTORY_STORE_PATCH):
            return
        self._history_stored = await store_history(request.history_ref, request.history,
                                                   f"store {len(request.history)} earlier prompt record(s)")

    def _header(self, lean: bool) -> Prompt:
        """The prompt without its outputs; lean: without the lists that grow every round (model rounds, audit),
        which the worker does not use, so a round's input does not grow with the rounds before it."""
        if not lean:
            return self._prompt.model_copy(update={"output": []})
        return self._prompt.model_copy(update={"output": [], "model_rounds": [], "audit": []})

    def _history_count(self) -> int:
        ref = self._request.history_ref
        return len(self._request.history) + (ref.count if ref else 0)

    def _model_summary(self, round_number: int, fallback: int = 0, model: str = "") -> str:
        summary = f"model {self._prompt.model} round {round_number}"
        details = [f"fallback {fallback}: {model}"] if fallback else []
        if self._prompt.model_settings and (settings := self._prompt.model_settings.summary()):
            details.append(settings)
        return f"{summary} ({'; '.join(details)})" if details else summary

    async def _process_call(self, call: PlannedCall) -> None:
        entry = self._record_call(call)
        match call:
            case InvalidCall(error=error):
                self._end_call(entry, error, "invalid")
                return
            case CallNeedingApproval(approval=approval):
                decision = await self._await_decision(entry, approval, call.plugin)
                entry.decision = decision
                if decision.decision != "approved":
                    self._end_call(entry, self._refusal_text(decision), decision.decision)
                    return
        await self._invoke(entry, call, entry.input)  # the approver may have corrected the input

    async def _process_calls(self, calls: list[PlannedCall]) -> None:
        """One response's calls: all recorded at once in the model's order; those needing approval become
        pending together (one batch, decided independently); calls before the first of them run side by side
        meanwhile; once the last decision is in, the approved ones run side by side, then the calls after."""
        entries = [self._record_call(call) for call in calls]
        first_approval = next((i for i, c in enumerate(calls) if c.error is None and c.approval is not None),
                              len(calls))
        before, batch, after = [], [], []
        for index, (entry, call) in enumerate(zip(entries, calls, strict=True)):
            if call.error is not None:
                self._end_call(entry, call.error, "invalid")
            elif call.approval is not None:
                batch.append((entry, call))
            else:
                (before if index < first_approval else after).append((entry, call))
        for entry, call in batch:
            assert call.approval is not None
            self._request_approval(entry, call.approval, call.plugin, publish=False)
        self._publish_pending()  # the batch's calls in one memo update
        on_finish = self._has(FINISHED_CALL_OUTPUTS_PATCH)  # else side outputs wait for the whole group
        outcomes, _ = await asyncio.gather(self._run_side_by_side(before, on_finish=on_finish),
                                           self._decide_batch(batch))
        self._apply_in_order(before, outcomes, recorded=on_finish)
        approved = []
        for entry, call in batch:
            decision = self._decisions[entry.id]
            entry.decision = decision
            if decision.decision == "approved":
                approved.append((entry, call))
            else:
                self._end_call(entry, self._refusal_text(decision), decision.decision)
        self._apply_in_order(approved, await self._run_side_by_side(approved, on_finish=on_finish),
                             recorded=on_finish)
        self._apply_in_order(after, await self._run_side_by_side(after, on_finish=on_finish), recorded=on_finish)

    def _record_call(self, call: PlannedCall) -> ToolOutput:
        """Record the call and open its `dagent.tool_call` span (closed with its outcome by `_close_call`)."""
        entry = ToolOutput(id=self._unique_call_id(call.id), tool=call.tool, input=call.input,
                           started_at=workflow.now())
        self._append(entry)
        self._call_spans[entry.id] = telemetry.start_span(
            telemetry.TOOL_SPAN, **{"dagent.tool.id": call.tool, "dagent.tool.call_id": entry.id,
                                    "dagent.prompt.id": self._prompt.id})
        return entry

    def _end_call(self, entry: ToolOutput, error: str, outcome: str) -> None:
        """A call that ends without running (or without finishing): its error result, span and count."""
        self._resolve(entry, ToolError(error=error))
        self._close_call(entry, outcome)

    def _close_call(self, entry: ToolOutput, outcome: str) -> None:
        self._metrics.tool_call(entry.tool, outcome)
        if (span := self._call_spans.pop(entry.id, None)) is not None:
            telemetry.end_span(span, outcome)

    async def _decide_batch(self, batch: list[tuple[ToolOutput, PlannedCall]]) -> None:
        if not batch:
            return
        await asyncio.gather(*(self._emit_approval_requested(entry, call.approval) for entry, call in batch
                               if call.approval is not None))
        await self._report_to_parent()
        await asyncio.gather(*(self._wait_for_decision(entry, call.approval) for entry, call in batch
                               if call.approval is not None))

    async def _run_side_by_side(self, calls: list[tuple[ToolOutput, PlannedCall]], *,
                                on_finish: bool = False) -> dict[str, ToolInvocationResult]:
        """Run calls concurrently (at most `max_parallel_tools` at once; a `sequential` call runs alone).
        Each entry gets its result in place as it finishes; a steer skips the calls not started yet.
        `on_finish`: side outputs and state changes enter the record as calls finish, in the model's order
        (a call's outputs wait for those of the calls before it that still run, never for anything else)."""
        limit = asyncio.Semaphore(self._request.max_parallel_tools or max(len(calls), 1))
        outcomes: dict[str, ToolInvocationResult] = {}
        ended: set[str] = set()
        recorded = 0  # calls[:recorded] have their side outputs in the record

        def record_finished() -> None:
            nonlocal recorded
            while recorded < len(calls) and calls[recorded][0].id in ended:
                entry, call = calls[recorded]
                if entry.id in outcomes:
                    self._record_outcome(call, outcomes[entry.id])
                recorded += 1

        async def run(entry: ToolOutput, call: PlannedCall) -> None:
            async with limit:
                if self._steers:
                    self._end_call(entry, SKIPPED_BY_STEER, "skipped")
                else:
                    outcomes[entry.id] = await self._execute(entry, call, entry.input)
            if on_finish:
                ended.add(entry.id)
                record_finished()

        index = 0
        while index < len(calls):
            end = index + 1
            if not calls[index][1].sequential:
                while end < len(calls) and not calls[end][1].sequential:
                    end += 1
            group = calls[index:end]
            await asyncio.gather(*(run(entry, call) for entry, call in group))
            if any(call.failure_mode == "fail" and isinstance(outcomes[entry.id].result, ToolError)
                   for entry, call in group if entry.id in outcomes):
                break  # the prompt fails: later calls are not started
            index = end
        return outcomes

    def _apply_in_order(self, calls: list[tuple[ToolOutput, PlannedCall]],
                        outcomes: dict[str, ToolInvocationResult], *, recorded: bool = False) -> None:
        """Side outputs, state changes and failures in the model's order, whatever order the calls finished in
        (`recorded`: side outputs and state changes are in already, as each call finished)."""
        for entry, call in calls:
            if entry.id in outcomes:
                if not recorded:
                    self._record_outcome(call, outcomes[entry.id])
                self._fail_if_fatal(call, outcomes[entry.id])

    async def _invoke(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> None:
        outcome = await self._execute(entry, call, arguments)
        self._apply(entry, call, outcome)

    async def _execute(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> ToolInvocationResult:
        """Run one call's activity; the entry gets its result in place as soon as it finishes."""
        with telemetry.within(self._call_spans.get(entry.id)):
            outcome = await self._execute_call(entry, call, arguments)
        self._close_call(entry, "success" if isinstance(outcome.result, ToolSuccess) else "error")
        return outcome

    async def _execute_call(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> ToolInvocationResult:
        entry.started_at = workflow.now()
        if call.agent is not None:
            outcome = await self._run_sub_agent(entry, call, arguments)
            self._resolve(entry, outcome.result)
            return outcome
        invocation = self._tool_invocation(entry, call, arguments)
        retry = RetryPolicy(initial_interval=timedelta(seconds=1),
                            maximum_attempts=call.max_attempts + INFRASTRUCTURE_ATTEMPTS)
        timeout = call.timeout
        workflow.set_current_details(details.running_tool(self._prompt.rounds, entry))
        summary = details.cut_at_word(f"tool {call.tool} {details.compact_args(arguments)}", 100)
        if entry.decision is not None:
            summary += f" · {details.decided(entry.decision)}"
        try:
            if call.local:
                outcome = await workflow.execute_local_activity(
                    INVOKE_TOOL_ACTIVITY, invocation, result_type=ToolInvocationResult,
                    start_to_close_timeout=timeout, retry_policy=retry, summary=summary)
            else:
                outcome = await workflow.execute_activity(
                    INVOKE_TOOL_ACTIVITY, invocation, result_type=ToolInvocationResult,
                    start_to_close_timeout=timeout, heartbeat_timeout=call.heartbeat_timeout,
                    retry_policy=retry,
                    summary=summary)
        except ActivityError as exc:
            if _is_cancellation(exc):
                raise
            outcome = ToolInvocationResult(result=ToolError(error=f"Tool call failed: {_failure_reason(exc)}"))
        self._resolve(entry, outcome.result)
        return outcome

    def _tool_invocation(self, entry: ToolOutput, call: PlannedCall,
                         arguments: object) -> ToolInvocation | LegacyToolInvocation:
        plugin_state = self._prompt.plugin_state.get(call.plugin) if call.plugin else None
        prompt = self._prompt
        if not self._has(LEAN_ROUNDS_PATCH):
            return LegacyToolInvocation(
                prompt_id=prompt.id, user_id=prompt.user_id, conversation_id=prompt.conversation_id,
                workflow_id=workflow.info().workflow_id, call=call.model_copy(update={"id": entry.id}),
                input=arguments, plugin_state=plugin_state)
        return ToolInvocation(
            id=entry.id, tool=call.tool, plugin=call.plugin, input=arguments, user_id=prompt.user_id,  # type: ignore[arg-type]
            conversation_id=prompt.conversation_id, plugin_state=plugin_state, max_attempts=call.max_attempts,
            prompt_id=None if prompt.id == workflow.info().workflow_id else prompt.id, run_scoped=self._secure)

    def _apply(self, entry: ToolOutput, call: PlannedCall, outcome: ToolInvocationResult) -> None:
        self._record_outcome(call, outcome)
        self._fail_if_fatal(call, outcome)

    def _record_outcome(self, call: PlannedCall, outcome: ToolInvocationResult) -> None:
        """A finished call's side outputs (right after what is recorded so far) and its plugin's new state."""
        if isinstance(outcome.result, ToolError):
            self._failed_tools.append(call.tool)
        for side_output in outcome.side_outputs:
            self._append(side_output)
        if outcome.state_changed and call.plugin:
            self._prompt.plugin_state[call.plugin] = outcome.plugin_state

    @staticmethod
    def _fail_if_fatal(call: PlannedCall, outcome: ToolInvocationResult) -> None:
        if isinstance(outcome.result, ToolError) and call.failure_mode == "fail":
            raise PromptFailedError(f"tool '{call.tool}' failed: {outcome.result.error}")

    # --- sub-agents ---------------------------------------------------------------------------------

    async def _run_sub_agent(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> ToolInvocationResult:
        """A sub-agent call: a child PromptWorkflow whose final answer (data, or else text) is the result."""
        agent = call.agent
        assert agent is not None
        info = workflow.info()
        child_id = f"{info.workflow_id}.{entry.id}"
        parent_path = [*self._request.parent.path, self._request.parent.prompt_id] if self._request.parent else []
        nonce = str(workflow.uuid4()) if self._secure else None  # its reports must carry it
        try:
            request = PromptRequest(
                prompt_id=child_id, user_id=self._prompt.user_id, model=agent.model,
                input=arguments.get("task") if isinstance(arguments, dict) else None,  # type: ignore[arg-type]
                instructions=agent.instructions, max_rounds=agent.max_rounds, output_schema=agent.output_schema,
                plugins=agent.plugins, fail_workflow_on_error=False,
                max_parallel_tools=self._request.max_parallel_tools, workflow_version=versions.CURRENT_VERSION,
                budgets=self._request.budgets if self._ledgered() else [],  # its rounds spend the same budgets
                **self._model_queues_for(agent.model),
                parent=ParentLink(workflow_id=info.workflow_id, prompt_id=self._prompt.id, tool_call_id=entry.id,
                                  path=parent_path, report_nonce=nonce))
        except ValueError as exc:
            return ToolInvocationResult(result=ToolError(error=f"Sub-agent '{call.tool}' cannot start: {exc}"))
        entry.child_prompt_id = child_id
        self._touch(entry)
        if nonce is not None:
            self._children[entry.id] = _Child(workflow_id=child_id, nonce=nonce)
        failed: str | None = None
        try:
            # start + await: the same commands as execute_child_workflow, and the child's run id in between
            handle = await workflow.start_child_workflow(
                names.PROMPT_WORKFLOW, request, id=child_id, result_type=Prompt,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL, static_summary=f"sub-agent {call.tool}")
            if nonce is not None:
                self._children[entry.id].run_id = handle.first_execution_run_id
            child = await handle
        except ChildWorkflowError as exc:
            if _is_cancellation(exc):
                raise
            failed = f"Sub-agent '{call.tool}' failed: {_failure_reason(exc)}"
        finally:
            reported = self._child_pending.pop(entry.id, None)
        if reported is not None:  # not in `finally`: an evicted workflow's coroutine is closed outside its loop
            self._publish_pending()
        if failed is not None:
            return ToolInvocationResult(result=ToolError(error=failed))
        self._prompt.usage = self._prompt.usage + child.usage
        if child.state != "completed":
            return ToolInvocationResult(result=ToolError(
                error=f"Sub-agent '{call.tool}' ended {child.state}: {child.error or 'no answer'}"))
        answer = next((o.data for o in reversed(child.output) if isinstance(o, DataOutput)), None)
        if answer is None:
            answer = next((o.text for o in reversed(child.output) if isinstance(o, TextOutput)), "")
        return ToolInvocationResult(result=ToolSuccess(output=answer))

    def _model_queues_for(self, tier: str) -> dict[str, object]:
        """Where a sub-agent's model calls run: on this prompt's model queues (and under their rate limits)
        when it uses the same tier; the workflow knows no other tier's queue, so then the workflow's queue."""
        request = self._request
        if tier != request.model:
            return {}
        return {"model_task_queue": request.model_task_queue, "model_routing": request.model_routing}

    @workflow.signal(name=names.CHILD_APPROVALS_SIGNAL)
    @raw_payloads
    def child_approvals(self, *payloads: object) -> None:
        """A sub-agent's prompt reports the approvals it waits for; they are listed (and decided) here too."""
        self._take_signal("child_approvals", payloads, ChildApprovals, self._accept_child_approvals)

    def _accept_child_approvals(self, report: ChildApprovals) -> str | None:
        entry = self._prompt.tool_call(report.tool_call_id)
        if entry is None or entry.child_prompt_id != report.child_workflow_id or entry.finished_at is not None:
            return f"no running sub-agent call {report.tool_call_id!r}"
        if self._secure and not self._from_own_child(report):
            return (f"report for sub-agent call {report.tool_call_id!r} refused: it does not come from the "
                    "sub-agent this prompt started (workflow id, run id or nonce differ)")
        for child_call, reason in report.refused.items():
            self._child_refusals[f"{report.tool_call_id}/{child_call}"] = reason
        self._child_pending[report.tool_call_id] = report
        self._publish_pending()
        for pending in report.pending:  # watchers of this prompt see the sub-agent's requests, once each
            call_id = f"{report.tool_call_id}/{pending.tool_call_id}"
            if call_id not in self._announced:
                self._announced.add(call_id)
                self._events.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=self._index(entry),
                                                 output=self._child_entry(call_id, pending)))
        self._in_background(self._report_to_parent())
        return None

    def _report_refusal(self, tool_call_id: str, problem: str) -> None:
        """A decision the parent forwarded was refused here: tell the parent, whose update waits for it."""
        link = self._request.parent
        own_call = self._prompt.tool_call(tool_call_id) is not None  # junk ids are only audited here
        if self._secure and own_call and link is not None and link.report_nonce is not None:
            self._in_background(self._report_to_parent({tool_call_id: problem}))

    async def _child_verdict(self, tool_call_id: str) -> None:
        """Wait until the sub-agent took the forwarded decision (it no longer lists the call) or refused it
        (raised here, with its reason); after CHILD_VERDICT_TIMEOUT, the call is returned as forwarded."""
        def settled() -> bool:
            return tool_call_id in self._child_refusals or self._child_call(tool_call_id) is None

        try:
            await workflow.wait_condition(settled, timeout=CHILD_VERDICT_TIMEOUT,
                                          timeout_summary="sub-agent decision verdict")
        except TimeoutError:
            return
        reason = self._child_refusals.pop(tool_call_id, None)
        if reason is not None:
            raise Refusal("not-allowed", reason).error()

    def _from_own_child(self, report: ChildApprovals) -> bool:
        """Whether a report names the child this prompt started for the call: its workflow id, the nonce this
        prompt gave it and (once its start is known) its run id."""
        child = self._children.get(report.tool_call_id)
        if child is None or report.child_workflow_id != child.workflow_id or report.nonce != child.nonce:
            return False
        return child.run_id is None or report.child_run_id == child.run_id

    def _in_background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _report_to_parent(self, refused: dict[str, str] | None = None) -> None:
        link = self._request.parent
        if link is None:
            return
        report = ChildApprovals(tool_call_id=link.tool_call_id, child_workflow_id=workflow.info().workflow_id,
                                pending=self.pending_approvals())
        if link.report_nonce is not None:  # a parent that checks where reports come from
            report = report.model_copy(update={"child_run_id": workflow.info().run_id, "nonce": link.report_nonce,
                                               "refused": refused or {}})
        try:
            await workflow.get_external_workflow_handle(link.workflow_id).signal(names.CHILD_APPROVALS_SIGNAL, report)
        except Exception as exc:  # the parent is gone: our own pending calls still work
            workflow.logger.warning("could not report approvals to the parent prompt: %s", exc)

    def _child_call(self, tool_call_id: str) -> tuple[ChildApprovals, PendingApproval] | None:
        """A pending call of a sub-agent, addressed as `<sub-agent call id>/<its call id>`."""
        parent_call, sep, child_call = tool_call_id.partition("/")
        report = self._child_pending.get(parent_call) if sep else None
        if report is None:
            return None
        found = next((p for p in report.pending if p.tool_call_id == child_call), None)
        return (report, found) if found is not None else None

    async def _forwarded(self, kind: str, request: ApproveRequest | RejectRequest) -> ToolOutput:
        """An update's decision on a sub-agent's call: forwarded, then (under the approval policy) the sub-agent's
        verdict awaited, so a refusal there fails this update too."""
        if self._secure:
            self._child_refusals.pop(request.tool_call_id, None)
        forwarded = self._forward_decision(kind, request)
        if self._secure:
            await self._child_verdict(request.tool_call_id)
        return forwarded

    def _forward_decision(self, kind: str, request: ApproveRequest | RejectRequest) -> ToolOutput:
        found = self._child_call(request.tool_call_id)
        assert found is not None
        report, pending = found
        child_request = request.model_copy(update={"tool_call_id": pending.tool_call_id})
        signal = names.APPROVE_SIGNAL if kind == "approve" else names.REJECT_SIGNAL
        self._in_background(workflow.get_external_workflow_handle(report.child_workflow_id).signal(
            signal, child_request))
        if not self._secure:
            report.pending = [p for p in report.pending if p is not pending]
            self._publish_pending()
        # Else the call stays listed until the sub-agent, which verifies the decision, reports it decided.
        decision = Decision(decision="approved" if kind == "approve" else "rejected", by=request.by,
                            at=workflow.now(), reason=getattr(request, "reason", None))
        return self._child_entry(request.tool_call_id, pending, decision)

    @staticmethod
    def _child_entry(call_id: str, pending: PendingApproval, decision: Decision | None = None) -> ToolOutput:
        """A sub-agent's pending call as this prompt shows it: addressed `<call>/<its call>`."""
        return ToolOutput(id=call_id, tool=pending.tool, input=pending.input, started_at=pending.requested_at,
                          result=ToolPending(reason=pending.reason, requested_at=pending.requested_at,
                                             expires_at=pending.expires_at, approvers=pending.approvers),
                          decision=decision)

    # --- steering -----------------------------------------------------------------------------------

    @workflow.signal(
        name=names.STEER_SIGNAL,
        description="Send the prompt a new user message: it is delivered after the tool call in flight "
        "and the rest of the model's planned calls are skipped. "
        'Payload: {"message": "…"}')
    @raw_payloads
    def steer(self, *payloads: object) -> None:
        self._take_signal("steer", payloads, SteerRequest, self._accept_steer)

    def _accept_steer(self, request: SteerRequest) -> str | None:
        if self._prompt.state in TERMINAL_STATES:
            return f"prompt {self._prompt.id} is already {self._prompt.state}"
        self._steers.append(request.message)
        return None

    def _deliver_steers(self) -> None:
        for message in self._steers:
            self._append(MessageOutput(role="user", source="steer", text=message))
        self._steers.clear()

    def _skip(self, calls: list[PlannedCall]) -> None:
        for call in calls:
            self._end_call(self._record_call(call), SKIPPED_BY_STEER, "skipped")

    # --- approvals --------------------------------------------------------------------------------

    async def _await_decision(self, entry: ToolOutput, approval: ApprovalRequirement,
                              plugin: str | None = None) -> Decision:
        self._request_approval(entry, approval, plugin)
        await self._emit_approval_requested(entry, approval)
        return await self._wait_for_decision(entry, approval)

    def _request_approval(self, entry: ToolOutput, approval: ApprovalRequirement, plugin: str | None = None, *,
                          publish: bool = True) -> None:
        """Make the call `pending` in place (`publish`: and say so in the memo now, not after its batch)."""
        now = workflow.now()
        expires_in = approval.expires_after
        entry.result = ToolPending(reason=approval.reason, requested_at=now,
                                   expires_at=now + expires_in if expires_in else None,
                                   approvers=approval.approvers)
        self._touch(entry)
        self._waiting[entry.id] = _WaitingCall(entry, approval, plugin)
        self._metrics.approval_requested(entry.tool)
        if self._prompt.state != "waiting_for_approval":
            self._set_state("waiting_for_approval")
        self._show_waiting()
        self._events.publish(StreamEvent(kind=EventKind.APPROVAL_REQUESTED, index=self._index(entry), output=entry))
        if publish:
            self._publish_pending()

    async def _emit_approval_requested(self, entry: ToolOutput, approval: ApprovalRequirement) -> None:
        await self._emit(PromptEvent(kind=EventKind.APPROVAL_REQUESTED, prompt_id=self._prompt.id,
                                     user_id=self._prompt.user_id, conversation_id=self._prompt.conversation_id,
                                     tool_call_id=entry.id, tool=entry.tool, input=entry.input,
                                     reason=approval.reason))

    async def _wait_for_decision(self, entry: ToolOutput, approval: ApprovalRequirement) -> Decision:
        requested_at = entry.result.requested_at if isinstance(entry.result, ToolPending) else workflow.now()
        with telemetry.span(telemetry.APPROVAL_SPAN, self._call_spans.get(entry.id),
                                  **{"dagent.tool.id": entry.tool, "dagent.tool.call_id": entry.id,
                                     "dagent.prompt.id": self._prompt.id}) as span:
            decision = await self._decision_for(entry, approval)
            waited = decision.at - requested_at
            span.set_attributes({"dagent.approval.decision": decision.decision,
                                 "dagent.approval.wait_seconds": waited.total_seconds()})
            if decision.by:
                span.set_attribute("dagent.approval.decided_by", decision.by)
            self._metrics.approval_decided(entry.tool, decision.decision, waited)
            return decision

    async def _decision_for(self, entry: ToolOutput, approval: ApprovalRequirement) -> Decision:
        expires_in = timedelta(seconds=approval.expires_after_seconds) if approval.expires_after_seconds else None
        try:
            await workflow.wait_condition(lambda: entry.id in self._decisions or bool(self._steers),
                                          timeout=expires_in, timeout_summary=f"approval expiry {entry.tool}")
            decision = self._decisions.get(entry.id) or Decision(
                decision="superseded", at=workflow.now(), reason="the user sent a new message")
        except TimeoutError:
            decision = Decision(decision="expired", at=workflow.now(), reason="approval expired")
        self._decisions[entry.id] = decision
        entry.decision = decision
        self._waiting.pop(entry.id, None)
        self._events.publish(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=self._index(entry), output=entry))
        if not self._waiting:
            self._set_state("running")
        else:
            self._show_waiting()  # the calls of the batch still waiting
        self._publish_pending()
        await self._report_to_parent()
        return decision

    def _show_waiting(self) -> None:
        """Current details (Temporal UI): every call waiting now, and how to decide in this deployment."""
        waiting = list(self._waiting.values())
        workflow.set_current_details(details.waiting_for_approval(
            self._prompt, [w.entry for w in waiting], signed=any(w.requirement.decision_key for w in waiting)))

    @staticmethod
    def _refusal_text(decision: Decision) -> str:
        if decision.decision == "expired":
            return "The call was not run: approval expired before anyone decided."
        if decision.decision == "superseded":
            return "The call was not run: the user sent a new message instead of deciding."
        by = f" by {decision.by}" if decision.by else ""
        reason = f": {decision.reason}" if decision.reason else ""
        return f"The call was rejected{by}{reason}"

    def _decision_problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest) -> Refusal | None:
        """Why a decision cannot be accepted now, or None when it can."""
        tool_call_id, by = request.tool_call_id, request.by
        if (child := self._child_call(tool_call_id)) is not None:
            return self._forward_problem(kind, request, child[1])
        if tool_call_id in self._decisions:
            return Refusal("already-decided",
                           f"tool call {tool_call_id!r} was already decided ({self._decisions[tool_call_id].decision})")
        if not self._waiting or self._prompt.state != "waiting_for_approval":
            known = self._prompt.tool_call(tool_call_id) is not None
            what = "has no pending approval for" if known else "has no tool call"
            return Refusal("not-pending" if known else "unknown-tool-call",
                           f"prompt {self._prompt.id} ({self._prompt.state}) {what} {tool_call_id!r}")
        waiting = self._waiting.get(tool_call_id)
        if waiting is None:
            pending = ", ".join(repr(i) for i in self._waiting)
            are = "call is" if len(self._waiting) == 1 else "calls are"
            return Refusal("unknown-tool-call", f"unknown tool call {tool_call_id!r}; the pending {are} {pending}")
        decider = self._decider(kind, request, waiting)
        if isinstance(decider, Refusal):
            return decider
        if not self._secure and not may_decide(waiting.requirement.approvers, by, sorted(decider.who.roles)):
            return _not_allowed(by, tool_call_id, waiting.requirement.approvers)
        return None

    def _decider(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                 waiting: _WaitingCall) -> _Decider | Refusal:
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
                    request.token, public_key_pem=requirement.decision_key, prompt_id=workflow.info().workflow_id,
                    tool_call_id=tool_call_id, decision=kind, by=by, corrected_input=corrected,
                    now=workflow.now(), run_id=workflow.info().run_id, arguments=arguments,
                    used_nonces=self._used_nonces, strict=self._secure)
            if not isinstance(verified, DecisionClaims):
                return _decision_refused(tool_call_id, verified)
            roles, nonce = verified.roles, verified.nonce
        who = Identity.of(identity.person_id(by) if self._secure else by, roles)
        if not self._secure:
            return _Decider(who, nonce=nonce)
        problem = self._approver_problem(kind, by, roles, requirement.approvers, requirement.four_eyes)
        if problem is not None:
            return _decision_refused(tool_call_id, problem)
        return _Decider(who, identity.grant(who, requirement.approvers), nonce)

    def _approver_problem(self, kind: DecisionKind, by: str | None, roles: Sequence[str], approvers: list[str] | None,
                          four_eyes: bool) -> str | None:
        """Why `by` (holding `roles`) may not take this decision on a call naming `approvers` (agent/identity.py)."""
        return identity.may_decide(Identity.of(by, roles), approvers, owner=self._prompt.user_id,
                                   four_eyes=four_eyes, approving=kind == "approve")

    def _forward_problem(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                         pending: PendingApproval) -> Refusal | None:
        """Why a decision on a sub-agent's call is not forwarded. The sub-agent's prompt checks the decision
        (and its token) itself when it reaches it; the checks this prompt can make come first."""
        tool_call_id, by = request.tool_call_id, request.by
        if not self._secure:
            if not may_decide(pending.approvers, by, []) and not pending.signed_decisions:
                return _not_allowed(by, tool_call_id, pending.approvers)
            return None
        if pending.signed_decisions:
            if not request.token:
                return _decision_refused(tool_call_id, "a signed decision token is required for this call "
                                                       "(decide through the API)")
            return None
        problem = self._approver_problem(kind, by, request.roles, pending.approvers, pending.four_eyes)
        return _decision_refused(tool_call_id, problem) if problem else None

    def _correction_problem(self, request: ApproveRequest) -> Refusal | None:
        """Why the approver's corrected fields, merged into the input, do not fit the tool, or None."""
        waiting = self._waiting.get(request.tool_call_id)
        if request.input is None or waiting is None:
            return None
        entry = waiting.entry
        problem = schema_problem(merge_patch(entry.input, request.input), waiting.requirement.input_schema)
        return Refusal("invalid-arguments", f"invalid correction for {entry.tool}: {problem}") if problem else None

    def _accept_approval(self, request: ApproveRequest, decider: _Decider | None = None) -> None:
        waiting = self._waiting[request.tool_call_id]
        decider = self._taken(decider or self._checked_decider("approve", request, waiting))
        entry = waiting.entry
        original = None
        if request.input is not None:  # JSON merge patch (RFC 7396): only the corrected fields change
            original, entry.input = entry.input, merge_patch(entry.input, request.input)
        self._decisions[request.tool_call_id] = Decision(
            decision="approved", by=self._recorded_by(request, decider), via=decider.via, at=workflow.now(),
            original_input=original)

    def _accept_rejection(self, request: RejectRequest) -> None:
        decider = self._taken(self._checked_decider("reject", request, self._waiting[request.tool_call_id]))
        self._decisions[request.tool_call_id] = Decision(
            decision="rejected", by=self._recorded_by(request, decider), via=decider.via, at=workflow.now(),
            reason=request.reason)

    def _checked_decider(self, kind: DecisionKind, request: ApproveRequest | RejectRequest,
                         waiting: _WaitingCall) -> _Decider:
        """The decider of a decision being taken (checked just before)."""
        decider = self._decider(kind, request, waiting)
        if isinstance(decider, Refusal):
            raise ValueError(decider.message)
        return decider

    def _taken(self, decider: _Decider) -> _Decider:
        """A decision is taken: its token's nonce is used up."""
        if decider.nonce is not None and self._secure:
            self._used_nonces.add(decider.nonce)
        return decider

    def _recorded_by(self, request: ApproveRequest | RejectRequest, decider: _Decider) -> str | None:
        return decider.who.id if self._secure else request.by

    # --- corrections under the approval policy --------------------------------------------------------

    def _policy_checks(self, request: ApproveRequest) -> bool:
        """Whether an approval's correction goes to the tool's policy before it is taken (this prompt's own
        call; a sub-agent's prompt checks its own)."""
        waiting = self._waiting.get(request.tool_call_id)
        return (self._secure and request.input is not None and waiting is not None
                and waiting.entry.tool != MORE_BUDGET_TOOL)  # a budget request has no policy: its schema decides

    async def _checked_correction(self, request: ApproveRequest) -> _Decider | Refusal:
        """Run the tool's approval policy on the corrected arguments (an activity: the policy is worker code)
        and check the decider against what they need: who may approve them, or that nobody may. On a
        refusal the call stays pending; the refusal is recorded in the audit."""
        waiting = self._waiting[request.tool_call_id]
        entry = waiting.entry
        merged = merge_patch(entry.input, request.input)
        try:
            verdict = await workflow.execute_activity(
                CHECK_CORRECTION_ACTIVITY, CorrectionCheck(tool=entry.tool, plugin=waiting.plugin, input=merged),
                result_type=CorrectionVerdict, start_to_close_timeout=CORRECTION_CHECK_TIMEOUT,
                retry_policy=CORRECTION_CHECK_RETRY, summary=f"check correction {entry.tool}")
        except ActivityError as exc:
            if _is_cancellation(exc):
                raise
            verdict = CorrectionVerdict(problem=f"the approval policy could not be run: {_failure_reason(exc)}")
        refusal = self._decision_problem("approve", request)  # decided, expired or steered meanwhile?
        if refusal is None and verdict.problem is not None:
            refusal = Refusal("not-allowed", f"correction of {entry.tool} {entry.id!r} refused: {verdict.problem}")
        decider = None if refusal is not None else self._decider("approve", request, waiting)
        if isinstance(decider, _Decider) and verdict.requirement is not None:
            needed = verdict.requirement
            problem = correction_refusal(decider.who, needed.approvers, needs_approval=True,
                                         owner=self._prompt.user_id,
                                         four_eyes=needed.four_eyes or waiting.requirement.four_eyes)
            if problem is not None:
                who = decider.who.id or "an anonymous caller"
                refusal = Refusal("not-allowed", f"{who} may not approve this correction of {entry.tool} "
                                                 f"{entry.id!r}: {problem}")
            elif needed.approvers:
                decider = _Decider(decider.who, identity.grant(decider.who, needed.approvers), decider.nonce)
        if refusal is None and isinstance(decider, Refusal):
            refusal = decider
        if refusal is not None:
            self._ignore("correction", refusal.message)
            return refusal
        assert decider is not None
        return decider

    async def _approve_when_checked(self, request: ApproveRequest) -> None:
        """A signal's approval with a correction: taken once the policy agrees (else audited, still pending)."""
        checked = await self._checked_correction(request)
        if isinstance(checked, _Decider):
            self._accept_approval(request, checked)
        else:
            self._report_refusal(request.tool_call_id, checked.message)

    def _ignore(self, kind: str, problem: str) -> None:
        record_ignored(self._prompt.audit, kind, problem)

    def _take_signal(self, kind: str, payloads: tuple[object, ...], model: type[ModelT],
                     accept: Callable[[ModelT], Refusal | str | None]) -> None:
        """Decode and apply a signal; whatever cannot be applied is recorded in the audit, never raised."""
        request, problem = decode_payloads(payloads, model)
        if request is not None:
            try:
                refused = accept(request)
                problem = refused.message if isinstance(refused, Refusal) else refused
            except Exception as exc:
                if not is_workflow_bug(exc):
                    raise
                problem = f"internal error: {describe_exception(exc)}"
        if problem:
            self._ignore(kind, problem)
            if isinstance(request, ApproveRequest | RejectRequest):
                self._report_refusal(request.tool_call_id, problem)

    def _decision(self, payloads: tuple[object, ...], model: type[DecisionT]) -> DecisionT:
        """An update's decoded payload, or the reason it cannot be decided, as a refusal."""
        request, undecodable = decode_payloads(payloads, model)
        if request is None:
            raise Refusal("invalid-request", undecodable or "no decision in the update").error()
        kind: DecisionKind = "approve" if isinstance(request, ApproveRequest) else "reject"
        refusal = self._decision_problem(kind, request)
        if refusal is None and isinstance(request, ApproveRequest):
            refusal = self._correction_problem(request)
        if refusal is not None:
            raise refusal.error()
        return request

    @workflow.signal(
        name=names.APPROVE_SIGNAL,
        description="Approve the pending tool call (no reply; a wrong call id is ignored and recorded "
        "in the audit). Prefer the approve_call update. "
        'Payload: {"tool_call_id": "…", "by": "you", "input": {…corrected args, optional}}')
    @raw_payloads
    def approve(self, *payloads: object) -> None:
        self._take_signal("approve", payloads, ApproveRequest, self._approve_if_possible)

    @workflow.signal(
        name=names.REJECT_SIGNAL,
        description="Reject the pending tool call; the model sees the reason (no reply; prefer the "
        'reject_call update). Payload: {"tool_call_id": "…", "by": "you", "reason": "…"}')
    @raw_payloads
    def reject(self, *payloads: object) -> None:
        self._take_signal("reject", payloads, RejectRequest, self._reject_if_possible)

    def _approve_if_possible(self, request: ApproveRequest) -> Refusal | None:
        problem = self._decision_problem("approve", request) or self._correction_problem(request)
        if problem is None:
            if self._child_call(request.tool_call_id) is not None:
                self._forward_decision("approve", request)
            elif self._policy_checks(request):
                self._in_background(self._approve_when_checked(request))
            else:
                self._accept_approval(request)
        return problem

    def _reject_if_possible(self, request: RejectRequest) -> Refusal | None:
        problem = self._decision_problem("reject", request)
        if problem is None and self._child_call(request.tool_call_id) is not None:
            self._forward_decision("reject", request)
            return None
        if problem is None:
            self._accept_rejection(request)
        return problem

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, payloads: Sequence[RawValue]) -> None:
        self._ignore("unknown_signal", f"this workflow has no signal named {name!r}")

    @workflow.update(
        name=names.APPROVE_CALL_UPDATE,
        description="Approve the pending tool call, checked first: a wrong call id or approver is "
        "refused with the reason. Returns the call once it has run. "
        'Payload: {"tool_call_id": "…", "by": "you", "input": {…corrected args, optional}}')
    @raw_payloads
    async def approve_call(self, *payloads: object) -> ToolOutput:
        request = _applied(lambda: self._decision(payloads, ApproveRequest))
        if self._child_call(request.tool_call_id) is not None:
            return await self._forwarded("approve", request)
        decider = None
        if self._policy_checks(request):
            checked = await self._checked_correction(request)
            if isinstance(checked, Refusal):
                raise checked.error()
            decider = checked
        _applied(lambda: self._accept_approval(request, decider))
        return await self._resolved(request.tool_call_id)

    @approve_call.validator
    @raw_payloads
    def _validate_approve_call(self, *payloads: object) -> None:
        self._decision(payloads, ApproveRequest)

    @workflow.update(
        name=names.REJECT_CALL_UPDATE,
        description="Reject the pending tool call, checked first; the model sees the reason. "
        'Payload: {"tool_call_id": "…", "by": "you", "reason": "…"}')
    @raw_payloads
    async def reject_call(self, *payloads: object) -> ToolOutput:
        request = _applied(lambda: self._decision(payloads, RejectRequest))
        if self._child_call(request.tool_call_id) is not None:
            return await self._forwarded("reject", request)
        _applied(lambda: self._accept_rejection(request))
        return await self._resolved(request.tool_call_id)

    @reject_call.validator
    @raw_payloads
    def _validate_reject_call(self, *payloads: object) -> None:
        self._decision(payloads, RejectRequest)

    async def _resolved(self, tool_call_id: str) -> ToolOutput:
        """The call once it ran; or, in a batch whose other calls still wait, once this one is decided."""
        entry = self._prompt.tool_call(tool_call_id)
        if entry is None:
            raise Refusal("unknown-tool-call", f"no tool call {tool_call_id!r}").error()
        await workflow.wait_condition(lambda: entry.finished_at is not None or (
            entry.id not in self._waiting and bool(self._waiting)))
        return entry

    # --- queries ----------------------------------------------------------------------------------

    @workflow.query(
        name=names.GET_PROMPT_QUERY,
        description="The whole prompt record: state, outputs, usage, decisions.")
    @raw_payloads
    def get_prompt(self, *payloads: object) -> Prompt:
        return self._prompt

    @workflow.query(
        name=names.TRANSCRIPT_QUERY,
        description="History and outputs, paged (for tools and debugging; workers never query it). "
        'Payload: {"start": 0, "max_bytes": 1000000}')
    @raw_payloads
    def transcript(self, *payloads: object) -> TranscriptPage:
        """History given by value and outputs, paged. Workers of an older version read the model's context
        this way; current ones get it by value or by reference in the round's input."""
        request, problem = decode_payloads(payloads, TranscriptPageRequest, optional=True)
        if request is None:
            raise ValueError(problem)
        return build_page(self._request.history, self._prompt.output, request.start, request.max_bytes)

    @workflow.query(
        name=names.PENDING_APPROVALS_QUERY,
        description="The tool call waiting for a decision (empty when none): call id, tool, "
        "arguments, reason, approvers.")
    @raw_payloads
    def pending_approvals(self, *payloads: object) -> list[PendingApproval]:
        own = [self._pending(waiting) for waiting in self._waiting.values()]
        return own + [
            pending.model_copy(update={"tool_call_id": f"{call_id}/{pending.tool_call_id}",
                                       "path": [report.child_workflow_id, *pending.path]})
            for call_id, report in sorted(self._child_pending.items(), key=lambda item: self._call_position(item[0]))
            for pending in report.pending]

    @staticmethod
    def _pending(waiting: _WaitingCall) -> PendingApproval:
        entry, requirement = waiting.entry, waiting.requirement
        assert isinstance(entry.result, ToolPending)
        return PendingApproval(tool_call_id=entry.id, tool=entry.tool, input=entry.input, reason=entry.result.reason,
                               requested_at=entry.result.requested_at, expires_at=entry.result.expires_at,
                               approvers=entry.result.approvers, input_schema=requirement.input_schema,
                               signed_decisions=bool(requirement.decision_key), four_eyes=requirement.four_eyes,
                               run_id=workflow.info().run_id)

    def _call_position(self, tool_call_id: str) -> int:
        positions = (i for i, e in enumerate(self._prompt.output) if isinstance(e, ToolOutput) and e.id == tool_call_id)
        return next(positions, len(self._prompt.output))

    # --- recording ----------------------------------------------------------------------------------

    def _append(self, entry: PromptOutput) -> None:
        self._prompt.output.append(entry)
        self._changed.add(len(self._prompt.output) - 1)
        self._events.publish(StreamEvent(kind=EventKind.OUTPUT_ADDED, index=len(self._prompt.output) - 1, output=entry))

    def _index(self, entry: PromptOutput) -> int:
        return next(i for i, e in enumerate(self._prompt.output) if e is entry)

    def _has(self, patch_id: str) -> bool:
        return versions.has(patch_id, self._request.workflow_version)

    def _touch(self, entry: PromptOutput) -> None:
        index = self._index(entry)
        self._changed.add(index)
        self._events.publish(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=index, output=entry))

    def _resolve(self, entry: ToolOutput, result: ToolSuccess | ToolError) -> None:
        entry.result, entry.finished_at = result, workflow.now()
        self._touch(entry)

    def _interrupt(self, reason: str, *, waiting: str | None = None) -> None:
        """End every unfinished call with `reason` (`waiting`: for a call still waiting for its approval)."""
        for entry in self._prompt.output:
            if isinstance(entry, ToolOutput) and isinstance(entry.result, ToolPending):
                self._end_call(entry, waiting or reason, "interrupted")
            elif isinstance(entry, ToolOutput) and entry.result is None:
                self._end_call(entry, reason, "interrupted")

    def _unique_call_id(self, call_id: str) -> str:
        candidate, n = call_id or "call", 1
        while self._prompt.tool_call(candidate) is not None:
            n += 1
            candidate = f"{call_id}-{n}"
        return candidate

    def _set_state(self, state: PromptState) -> None:
        self._prompt.state = state
        if self._has(LEAN_ROUNDS_PATCH):
            changed = changed_search_attributes(self._prompt, workflow.info().typed_search_attributes)
            if changed:
                workflow.upsert_search_attributes(changed)
        else:
            upsert_every_search_attribute(self._prompt)
        self._events.publish(StreamEvent(kind=EventKind.STATE_CHANGED, state=state))

    def _publish_pending(self) -> None:
        """Rewrite the memo's waiting calls when they changed (one `UpsertWorkflowProperties` event): what
        `AgentClient.pending` lists from visibility without asking the workflow."""
        if not self._pending_memo and not self._waiting and not any(r.pending for r in self._child_pending.values()):
            return  # nothing was said and nothing waits: no marker, no event
        if not self._has(PENDING_MEMO_PATCH):
            return
        memo = pending_memo(self.pending_approvals())
        if memo != self._pending_memo:
            self._pending_memo = memo
            workflow.upsert_memo({PENDING_MEMO_KEY: memo})

    def _finish(self, state: PromptState, error: str | None = None) -> None:
        self._prompt.finished_at = workflow.now()
        self._prompt.error = error
        self._waiting.clear()
        self._set_state(state)
        self._publish_pending()
        workflow.set_current_details(details.finished(self._prompt))
        self._metrics.prompt_finished(state)
        if self._span is not None:
            self._span.set_attributes({"dagent.prompt.state": state, "dagent.prompt.rounds": self._prompt.rounds})
            if state == "failed":
                telemetry.mark_error(self._span, error or "failed")

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
