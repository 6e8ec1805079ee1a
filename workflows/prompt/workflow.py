"""PromptWorkflow: one prompt, run as rounds of model call + tool calls, pausing durably for approvals.

Data and control flow only. Plugin code, model calls and tools run in activities referenced by their
stable names, so this module imports no provider SDK and no plugin code. The workflow is the conductor: the
round loop and tool execution live here, and its collaborators hold no Temporal decorators (the handlers
delegate to them): the record (workflows/prompt/record.py), the approvals desk (approvals.py), sub-agents
(sub_agents.py), what each model round is sent (round_input.py) and the user's steering messages
(steering.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from operator import attrgetter
from typing import Literal, TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream

    from durable_agent.agent.errors import PromptFailedError
    from durable_agent.agent.models import (
        DataOutput,
        MessageOutput,
        ModelRound,
        Prompt,
        PromptState,
        TextOutput,
        ToolOutput,
    )
    from durable_agent.agent.stops import PromptStop, budget_stop, rounds_stop
    from durable_agent.workflows import details, names, telemetry
    from durable_agent.workflows.budget.gate import BudgetGate
    from durable_agent.workflows.budget.limits import budget_reached
    from durable_agent.workflows.failures import (
        WORKFLOW_FAILURE_TYPES,
        describe_exception,
        failure_reason,
        is_cancellation,
        is_workflow_bug,
    )
    from durable_agent.workflows.inputs import decode_input, decode_payloads, raw_payloads
    from durable_agent.workflows.names import EVENTS_TOPIC
    from durable_agent.workflows.prompt.approvals import ApprovalDesk, DecisionT, refusal_text
    from durable_agent.workflows.prompt.context import PromptContext
    from durable_agent.workflows.prompt.host import WorkflowHost
    from durable_agent.workflows.prompt.record import Recorder
    from durable_agent.workflows.prompt.refusals import Refusal
    from durable_agent.workflows.prompt.round_input import RoundInputs
    from durable_agent.workflows.prompt.steering import Steering
    from durable_agent.workflows.prompt.tool_runner import ToolRunner
    from durable_agent.workflows.prompt.tool_then_model import fusable
    from durable_agent.workflows.protocol import (
        ApproveRequest,
        CallNeedingApproval,
        ChildApprovals,
        FinalAnswer,
        InvalidCall,
        PendingApproval,
        PlannedCall,
        PromptRequest,
        ReadyCall,
        RejectRequest,
        RetryForSchema,
        RoundResult,
        RunTools,
        SteerRequest,
        StreamEvent,
        TranscriptPage,
        TranscriptPageRequest,
    )
    from durable_agent.workflows.stream_guard import guard_stream_poll, guard_stream_publish
    from durable_agent.workflows.transcript import build_page

# What a cancelled prompt's unfinished calls say: whether their side effect may have happened.
CANCELLED_WHILE_RUNNING = ("The prompt was cancelled before this call finished: it was stopped while running "
                           "(or before it started), so its side effect may have happened.")
CANCELLED_WHILE_WAITING = "The prompt was cancelled while this call waited for approval: it never ran."

ModelT = TypeVar("ModelT", SteerRequest, ApproveRequest, RejectRequest, ChildApprovals)
Call = tuple[ToolOutput, PlannedCall]


def _delegated_signal(name: str, model: type[ModelT],
                      accept: Callable[[PromptWorkflow], Callable[[ModelT], Refusal | str | None]],
                      description: str) -> object:
    """Signal `name`, decoded to `model` and handed to the room `accept` picks; what cannot be applied is
    recorded in the audit, never raised (`PromptWorkflow._take_signal`)."""

    @raw_payloads
    def handler(self, *payloads: object) -> None:  # unannotated, so Temporal does not count it as an argument
        self._take_signal(name, payloads, model, accept(self))

    return workflow.signal(name=name, description=description)(handler)


def _decision_update(name: str, request_type: type[DecisionT], description: str,
                     decide: Callable[[ApprovalDesk, tuple[object, ...]], Awaitable[ToolOutput]]) -> object:
    """Update `name`, which takes one decision at the desk (`decide`: its approve_call or reject_call), with a
    validator that runs the same checks first, so a refused decision never reaches history. Returns the call
    once it has run."""

    @raw_payloads
    async def handler(self, *payloads: object) -> ToolOutput:  # self unannotated: not counted as an argument
        return await decide(self._desk, payloads)

    @raw_payloads
    def validator(self, *payloads: object) -> None:
        self._desk.checked_request(payloads, request_type)

    update = workflow.update(name=name, description=description)(handler)
    update.validator(validator)
    return update


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
            parent_prompt_id=request.parent.prompt_id if request.parent is not None else None,
        )
        self._output_attempts = 0
        self._ahead: RoundResult | None = None  # the next model round, run after the last call in one activity
        self._stream = WorkflowStream()
        events = self._stream.topic(EVENTS_TOPIC, type=StreamEvent)
        self._record = Recorder(self._prompt, WorkflowHost(events.publish))  # workflows/prompt/record.py
        guard_stream_publish(partial(self._record.ignore, "stream_publish"))
        guard_stream_poll(self._stream)
        context = PromptContext(request, self._record)  # what every room shares (context.py)
        self._inputs = RoundInputs(context)
        self._steering = Steering(context)
        self._desk = ApprovalDesk(context, steered=self._steering.arrived)
        self._children = self._desk.children  # sub-agents: their waiting calls are listed at the desk
        self._tools = ToolRunner(context, self._children, steered=self._steering.arrived)
        self._budgets = BudgetGate(context, self._desk)

    # --- run --------------------------------------------------------------------------------------

    @property
    def routable_request(self) -> PromptRequest:
        """The request whose model calls a worker routes (workers/routing.py) before `run` starts."""
        return self._request

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Prompt:
        conversation_child = bool(self._request.conversation_id) and workflow.info().parent is not None
        with telemetry.prompt_span(self._prompt.id, conversation_child=conversation_child,
                                  conversation_id=self._request.conversation_id) as span:
            self._record.span = span
            self._prompt.trace_id = telemetry.trace_id_of(span)
            telemetry.log_step("prompt started", self._prompt.id, conversation_id=self._prompt.conversation_id)
            ending = await self._run_traced()
        if ending is not None:
            raise ending
        return self._prompt

    async def _run_traced(self) -> BaseException | None:
        """The prompt's life; returns the exception that ends the workflow, if any, so that the prompt span
        ends with the final state first."""
        if self._input_error:
            self._finish("failed", error=self._input_error)
            return ApplicationError(self._input_error, *self._record.failure_details(), type=names.INVALID_INPUT_ERROR,
                                    non_retryable=True)
        self._record.set_state("running")
        if workflow.memo_value("summary", None) is None:  # started without one (a raw client): listings show it
            workflow.upsert_memo({"summary": details.prompt_summary(self._prompt.user_id, self._prompt.input)})
        try:
            await self._run_rounds()
        except (ActivityError, ChildWorkflowError, PromptFailedError, asyncio.CancelledError) as exc:
            if is_cancellation(exc):
                self._record.interrupt(CANCELLED_WHILE_RUNNING, waiting=CANCELLED_WHILE_WAITING)
                self._finish("cancelled")
                return asyncio.CancelledError()
            self._record.interrupt("Not run: the prompt failed before this call finished.")
            self._finish("failed", error=failure_reason(exc))
        except Exception as exc:
            if not is_workflow_bug(exc):
                raise
            # A bug in this workflow's code: fail the prompt with the reason rather than retry the task forever.
            self._record.interrupt("The prompt failed before this call finished.")
            self._finish("failed", error=f"internal error: {describe_exception(exc)}")
        await self._desk.notices.flush()  # a decided call's messages updated in place (notifications.py)
        self._stream.detach_pollers()  # a poll waiting for an offset never reached must not hold the end
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._prompt.state == "failed" and self._request.fail_workflow_on_error:
            return ApplicationError(self._prompt.error or "prompt failed", *self._record.failure_details(),
                                    type=names.PROMPT_FAILED_ERROR, non_retryable=True)
        return None

    async def _run_rounds(self) -> None:
        for round_number in range(1, self._request.max_rounds + 1):
            if self._budgets.active and not await self._budgets.reserve(round_number):  # workflows/budget/gate.py
                self._stop_for_budget(self._budgets.stop_reason or "budget refused")
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
        self._stop(rounds_stop(self._prompt.rounds), source="limit")

    def _stop_for_budget(self, reason: str) -> None:
        """No further model call (workflows/budget/limits.py)."""
        self._prompt.budget_stop = reason
        self._prompt.force_completed = True
        self._stop(budget_stop(reason, self._prompt.budgets), source="budget")

    def _stop(self, stop: PromptStop, source: Literal["budget", "limit"]) -> None:
        """End `stopped`, its work not done, saying why and how to go on (agent/stops.py)."""
        self._record.append(MessageOutput(role="system", source=source, text=stop.words()))
        self._prompt.stop = stop
        self._finish("stopped")

    async def _round(self, round_number: int) -> bool:
        """One model call and the tool calls it asks for; True when the answer is final."""
        result, self._ahead = self._ahead, None
        if result is None:
            self._steering.deliver()
            result = await self._call_model(round_number)
        else:  # a message that arrived meanwhile outdates it (below) and goes to the round after
            self._took_round(round_number, result)
        if self._budgets.active:
            await self._budgets.settle(result)
        for reasoning in result.reasoning:
            self._record.append(reasoning)
        if result.text:
            self._record.append(TextOutput(text=result.text))
        if self._steering.arrived():  # a message from the user outdates this round's calls and answer
            self._steering.skip(result.next.calls if isinstance(result.next, RunTools) else [])
            return False
        match result.next:
            case FinalAnswer(data=data):
                if self._request.output_schema is not None:
                    self._record.append(DataOutput(data=data))
                return True
            case RetryForSchema(reason=reason):
                self._ask_again_for_schema(reason)
            case RunTools(calls=calls):
                if (call := fusable(calls, round_number, self._request, self._prompt.usage,
                                    period_budgets=self._budgets.active)) is not None:
                    self._ahead = await self._run_then_model(call, round_number + 1)
                else:
                    await self._process_calls(calls)
        return False

    async def _run_then_model(self, call: ReadyCall, next_round: int) -> RoundResult | None:
        """Run the call, then the next model round, in one activity; that round's result (None: not run)."""
        entry = self._record.open_call(call)
        then = self._inputs.ahead(next_round, workflow.info().run_id)
        result = await self._tools.invoke(entry, call, entry.input, then)
        if result is not None:
            self._inputs.sent(then)  # the worker holds what `then` carried, and the entry as it resolved it:
            self._inputs.changed.add(self._record.index(entry))  # the entry goes again, as recorded here
        return result

    def _ask_again_for_schema(self, reason: str) -> None:
        if self._output_attempts >= self._request.output_retries:
            raise PromptFailedError(f"the final answer did not match the output schema: {reason}")
        self._output_attempts += 1
        self._record.append(MessageOutput(role="system", source="output_validation", text=(
            f"Your final answer did not match the required output schema: {reason}. "
            "Answer again with only a JSON value that matches the schema.")))

    async def _call_model(self, round_number: int) -> RoundResult:
        failed = self._tools.failed_tools
        note = f" · after tool error: {', '.join(failed)}" if failed else ""
        result = await self._inputs.send(round_number, workflow.info().run_id, note=note,
                                         details=details.calling_model(self._prompt, round_number))
        self._took_round(round_number, result)
        return result

    def _took_round(self, round_number: int, result: RoundResult) -> None:
        """A model round's result into the record's accounts: the round, its usage, the plugins' state (and the
        tools that failed before it are no longer news)."""
        self._tools.failed_tools = []
        self._prompt.model_rounds.append(ModelRound(round=round_number, model=result.spec or result.model,
                                                    response_model=result.model, fallback=result.fallback,
                                                    settings=result.settings))
        self._prompt.usage = self._prompt.usage + result.usage
        self._prompt.plugin_state = dict(result.plugin_state)
        self._record.host.metrics.model_round(result.model or self._prompt.model, result.usage)
        self._desk.event_hooks = result.event_hooks

    async def _process_calls(self, calls: list[PlannedCall]) -> None:
        """One response's calls: all recorded at once in the model's order; those needing approval become
        pending together (one batch, decided independently); calls before the first of them run side by side
        meanwhile; once the last decision is in, the approved ones run side by side, then the calls after."""
        entries = [self._record.open_call(call) for call in calls]
        before: list[Call] = []
        batch: list[tuple[ToolOutput, CallNeedingApproval]] = []
        after: list[Call] = []
        for entry, call in zip(entries, calls, strict=True):
            match call:
                case InvalidCall(error=error):
                    self._record.end_call(entry, error, "invalid")
                case CallNeedingApproval():
                    batch.append((entry, call))
                case _:  # before or after the first call needing approval
                    (after if batch else before).append((entry, call))
        for entry, waiting in batch:
            self._desk.request(entry, waiting, publish=False)
        self._desk.publish_pending()  # the batch's calls in one memo update
        outcomes, _ = await asyncio.gather(self._tools.run_side_by_side(before), self._decide_batch(batch))
        self._tools.fail_in_order(before, outcomes)
        approved: list[Call] = []
        for entry, call in batch:
            decision = self._desk.decisions[entry.id]
            entry.decision = decision
            if decision.decision == "approved":
                approved.append((entry, call))
            else:
                self._record.end_call(entry, refusal_text(decision), decision.decision)
        await self._tools.run(approved)
        await self._tools.run(after)

    async def _decide_batch(self, batch: list[tuple[ToolOutput, CallNeedingApproval]]) -> None:
        if not batch:
            return
        await asyncio.gather(*(self._desk.announce(entry, call.approval) for entry, call in batch))
        await self._children.report_to_parent()
        await asyncio.gather(*(self._desk.wait(entry, call.approval) for entry, call in batch))

    # --- the workflow's own helpers ---------------------------------------------------------------------

    def _finish(self, state: PromptState, error: str | None = None) -> None:
        self._prompt.finished_at = workflow.now()
        self._prompt.error = error
        self._desk.waiting.clear()
        self._record.set_state(state)
        self._desk.publish_pending()
        self._record.finished(state)

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
            self._record.ignore(kind, problem)
            if isinstance(request, ApproveRequest | RejectRequest):
                self._children.report_refusal(request.tool_call_id, problem)

    # --- signals, updates and queries: each delegates -----------------------------------------------------

    steer = _delegated_signal(
        names.STEER_SIGNAL, SteerRequest, attrgetter("_steering.accept"),
        description="Send the prompt a new user message: it is delivered after the tool call in flight and the rest "
        'of the model\'s planned calls are skipped. Payload: {"message": "…"}')
    child_approvals = _delegated_signal(
        names.CHILD_APPROVALS_SIGNAL, ChildApprovals, attrgetter("_children.accept_report"),
        description="A sub-agent's prompt reports the approvals it waits for; they are listed (and decided) here.")
    approve = _delegated_signal(
        names.APPROVE_SIGNAL, ApproveRequest, attrgetter("_desk.approve_signal"),
        description="Approve the pending tool call (no reply; a wrong call id is ignored and recorded "
        "in the audit). Prefer the approve_call update. "
        'Payload: {"tool_call_id": "…", "by": "you", "roles": ["finance", …your roles, when the call\'s approvers '
        'name a role], "input": {…corrected args, optional}}')
    reject = _delegated_signal(
        names.REJECT_SIGNAL, RejectRequest, attrgetter("_desk.reject_signal"),
        description="Reject the pending tool call; the model sees the reason (no reply; prefer the "
        'reject_call update). Payload: {"tool_call_id": "…", "by": "you", "roles": [optional], "reason": "…"}')

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, payloads: Sequence[RawValue]) -> None:
        self._record.ignore("unknown_signal", f"this workflow has no signal named {name!r}")

    approve_call = _decision_update(
        names.APPROVE_CALL_UPDATE, ApproveRequest, decide=ApprovalDesk.approve_call,
        description="Approve the pending tool call, checked first: a wrong call id or approver is "
        "refused with the reason. Returns the call once it has run. "
        'Payload: {"tool_call_id": "…", "by": "you", "roles": ["finance"], "input": {…corrected args}}; '
        '"roles": the roles you act in, needed when the call\'s approvers name a role (role:finance), '
        '"input" optional.')
    reject_call = _decision_update(
        names.REJECT_CALL_UPDATE, RejectRequest, decide=ApprovalDesk.reject_call,
        description="Reject the pending tool call, checked first; the model sees the reason. "
        'Payload: {"tool_call_id": "…", "by": "you", "roles": ["finance"], "reason": "…"}; "roles": the roles '
        "you act in, needed when the call's approvers name a role (role:finance).")

    @workflow.query(name=names.GET_PROMPT_QUERY,
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
        return self._desk.listed()
