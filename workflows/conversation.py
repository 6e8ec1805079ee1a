"""ConversationWorkflow: one per conversation. Runs each input as a child PromptWorkflow, queues inputs that
arrive meanwhile, fires triggers as system-initiated prompts, and continues as new before its history grows
large — carrying the history, plugin state and queued inputs across.

The history is held by reference: each finished prompt's record goes into a content-addressed chain of
links in the store (the `store_history` local activity: its input is not written to history), and each
child prompt and each next run receives one `HistoryRef`, so a turn costs the same at turn 500 as at turn 10.

Child prompt ids are `<conversation>-<NNNN>-<random>` (the suffix from `workflow.uuid4()`), so nobody can start a
workflow under a turn's id before the conversation does; should one be taken anyway (any workflow, running or
closed), the turn runs under a fresh id and the message is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, CancelledError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from durable_agent.agent.models import AuditEntry, Conversation, Prompt, ScheduledPrompt, Usage
    from durable_agent.agent.period_budgets import principals_for
    from durable_agent.workflows import names, telemetry
    from durable_agent.workflows.audit import MAX_AUDIT_ENTRIES, record_ignored
    from durable_agent.workflows.details import prompt_static_details, prompt_summary
    from durable_agent.workflows.failures import WORKFLOW_FAILURE_TYPES, describe_exception, is_workflow_bug
    from durable_agent.workflows.history_store import store_history
    from durable_agent.workflows.inputs import decode_input, decode_payloads, decoded, invalid_input, raw_payloads
    from durable_agent.workflows.names import CONVERSATION_ID, USER_ID
    from durable_agent.workflows.protocol import (
        ConversationRequest,
        HistoryRef,
        PromptRequest,
        QueuedInput,
        SendRequest,
    )
    from durable_agent.workflows.versioning import versions


TAKEN_ID_ATTEMPTS = 3  # fresh random ids tried for one turn before it is recorded as failed


@workflow.defn(name=names.CONVERSATION_WORKFLOW, failure_exception_types=WORKFLOW_FAILURE_TYPES)
class ConversationWorkflow:
    @workflow.init
    @raw_payloads
    def __init__(self, *payloads: object) -> None:
        request, self._input_error = decode_input(payloads, ConversationRequest)
        self._request = request
        self._id = request.conversation_id or workflow.info().workflow_id
        self._history: list[Prompt] = list(request.history)  # by value: not (yet) in the stored chain
        self._history_ref: HistoryRef | None = request.history_ref  # the stored chain: every earlier prompt
        self._stored_ids = list(request.prompt_ids)
        self._stored_usage = request.usage
        self._plugin_state = dict(request.plugin_state)
        self._queue: list[QueuedInput] = list(request.queued)
        self._scheduled: list[ScheduledPrompt] = list(request.scheduled)  # each with its fire_at
        self._next_sequence = request.next_sequence
        self._running: str | None = None
        self._starting: str | None = None  # popped from the queue, its child not started yet (queries only)
        self._closing = request.closing
        self._prompts_this_run = 0
        self._audit: list[AuditEntry] = []

    @workflow.run
    @raw_payloads
    async def run(self, *payloads: object) -> Conversation:
        if self._input_error:
            raise invalid_input(self._input_error)
        try:
            return await self._serve()
        except Exception as exc:
            if not is_workflow_bug(exc):
                raise
            raise ApplicationError(f"internal error: {describe_exception(exc)}", type="ConversationFailed",
                                   non_retryable=True) from exc

    async def _serve(self) -> Conversation:
        workflow.upsert_search_attributes(
            [CONVERSATION_ID.value_set(self._id), USER_ID.value_set(self._request.user_id)])
        while True:
            due = self._next_due()
            wait = max(due.fire_at - workflow.now(), timedelta(0)) if due and due.fire_at else None
            try:
                await workflow.wait_condition(lambda: bool(self._queue) or self._closing, timeout=wait,
                                              timeout_summary=f"trigger {due.id}" if due else None)
            except TimeoutError:
                assert due is not None
                self._fire(due)
            if self._queue:
                await self._run_prompt(self._queue.pop(0))
                if self._should_continue_as_new() and (self._queue or not self._closing):
                    await workflow.wait_condition(workflow.all_handlers_finished)
                    workflow.continue_as_new(self._carry_over())
            elif self._closing:
                break
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._snapshot()

    # --- inputs -------------------------------------------------------------------------------------

    @workflow.signal(name=names.SEND_SIGNAL,
                     description='Queue a user message as the next prompt. Payload: {"input": "…", "user_id": "…"}')
    @raw_payloads
    def send(self, *payloads: object) -> None:
        request, problem = decode_payloads(payloads, SendRequest)
        if request is not None and self._closing:
            problem = f"conversation {self._id} is closing; input dropped: {len(request.input)} chars"
        if problem or request is None:
            self._ignore("send", problem or "no input")
            return
        self._enqueue(request.input, user_id=request.user_id, budgets=request.budgets)

    @workflow.update(name=names.SEND_INPUT_UPDATE,
                     description="Queue a user message as the next prompt and return that prompt's id. "
                                 'Payload: {"input": "…", "user_id": "…"}')
    @raw_payloads
    def send_input(self, *payloads: object) -> str:
        """Queue an input and return the id its prompt will have (it runs when earlier ones finish)."""
        request = decoded(payloads, SendRequest)
        return self._enqueue(request.input, user_id=request.user_id, budgets=request.budgets).prompt_id

    @send_input.validator
    @raw_payloads
    def _validate_send_input(self, *payloads: object) -> None:
        decoded(payloads, SendRequest)
        if self._closing:
            raise ApplicationError(f"conversation {self._id} is closing and takes no more input",
                                   type="ConversationClosing", non_retryable=True)

    @workflow.signal(name=names.CLOSE_SIGNAL,
                     description="Finish the conversation after its running and queued prompts (no payload).")
    @raw_payloads
    def close(self, *payloads: object) -> None:
        """Finish after the running and queued prompts; triggers not yet fired are dropped. Takes no payload."""
        self._closing = True

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, payloads: Sequence[RawValue]) -> None:
        self._ignore("unknown_signal", f"this workflow has no signal named {name!r}")

    @workflow.query(name=names.GET_CONVERSATION_QUERY,
                    description="The conversation: its prompts, the running one, the queue, usage.")
    @raw_payloads
    def get_conversation(self, *payloads: object) -> Conversation:
        return self._snapshot()

    def _ignore(self, kind: str, problem: str) -> None:
        record_ignored(self._audit, kind, problem, who=f"conversation {self._id}")

    # --- running prompts ----------------------------------------------------------------------------

    def _enqueue(self, text: str | None, *, user_id: str | None = None, instructions: str | None = None,
                 budgets: list[str] | None = None) -> QueuedInput:
        item = QueuedInput(prompt_id=self._new_prompt_id(), input=text, user_id=user_id, instructions=instructions,
                           budgets=budgets)
        self._next_sequence += 1
        self._queue.append(item)
        return item

    def _new_prompt_id(self) -> str:
        """The id of the next turn: with a random suffix nobody can guess and start first."""
        return f"{self._id}-{self._next_sequence:04d}-{workflow.uuid4().hex[:12]}"

    async def _run_prompt(self, item: QueuedInput) -> None:
        request = self._request
        self._starting = item.prompt_id
        instructions = "\n\n".join(p for p in [request.instructions or "", item.instructions or ""] if p) or None
        await self._store_history()  # records carried by value from an earlier run
        try:
            try:
                child, item = await self._start_child(item, instructions)
            finally:
                self._starting = None
            self._running = item.prompt_id
            prompt = await child
        except ChildWorkflowError as exc:
            prompt = Prompt(id=item.prompt_id, user_id=item.user_id or request.user_id, conversation_id=self._id,
                            input=item.input, state="cancelled" if isinstance(exc.cause, CancelledError) else "failed",
                            error=str(exc.cause or exc))
        except WorkflowAlreadyStartedError as exc:  # every fresh id was taken too: the turn fails, the message stays
            prompt = Prompt(id=item.prompt_id, user_id=item.user_id or request.user_id, conversation_id=self._id,
                            input=item.input, state="failed", error=f"no free prompt id for this turn: {exc}")
        self._running = None
        self._prompts_this_run += 1
        self._history.append(prompt)
        if prompt.state != "failed" or prompt.plugin_state:
            self._plugin_state = dict(prompt.plugin_state)
        self._schedule(prompt)
        await self._store_history()

    async def _start_child(self, item: QueuedInput, instructions: str | None
                           ) -> tuple[workflow.ChildWorkflowHandle[Any, Prompt], QueuedInput]:
        """Start the turn's child prompt. An id someone else took (by an id leaked before the turn started) is
        replaced by a fresh one, at most TAKEN_ID_ATTEMPTS times."""
        request = self._request
        user_id = item.user_id or request.user_id
        summary = prompt_summary(user_id, item.input)
        for attempt in range(1, TAKEN_ID_ATTEMPTS + 1):
            try:
                # The child prompt starts a trace of its own, linked to this span (one trace per prompt).
                with telemetry.span(telemetry.CONVERSATION_TURN_SPAN, **{"dagent.conversation.id": self._id,
                                                                         "dagent.prompt.id": item.prompt_id}):
                    child = await workflow.start_child_workflow(
                        names.PROMPT_WORKFLOW,
                        PromptRequest(prompt_id=item.prompt_id, user_id=user_id,
                                      conversation_id=self._id, model=request.model, input=item.input,
                                      model_settings=request.model_settings,
                                      model_task_queue=request.model_task_queue, model_routing=request.model_routing,
                                      model_local=request.model_local, instructions=instructions, history=self._history,
                                      history_ref=self._history_ref, plugin_state=self._plugin_state,
                                      max_rounds=request.max_rounds, fail_workflow_on_error=False,
                                      workflow_version=versions.CURRENT_VERSION, budgets=self._budgets_for(item),
                                      conversation_schedule=self._scheduled),
                        id=item.prompt_id, result_type=Prompt,
                        static_summary=summary, static_details=prompt_static_details(user_id, item.input),
                        memo={"summary": summary},
                        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    )
                return child, item
            except WorkflowAlreadyStartedError:
                if attempt == TAKEN_ID_ATTEMPTS:
                    raise
                taken = item.prompt_id
                item = item.model_copy(update={"prompt_id": f"{taken.rsplit('-', 1)[0]}-{workflow.uuid4().hex[:12]}"})
                detail = f"prompt id {taken} was taken by another workflow; this turn runs as {item.prompt_id}"
                workflow.logger.warning("conversation %s: %s", self._id, detail)
                if len(self._audit) < MAX_AUDIT_ENTRIES:
                    self._audit.append(AuditEntry(at=workflow.now(), kind="prompt_id_taken", detail=detail))
        raise AssertionError("unreachable")

    def _budgets_for(self, item: QueuedInput) -> list[str]:
        """The turn's budget principals: the ones its send named, else the conversation's."""
        budgets = item.budgets if item.budgets is not None else self._request.budgets
        return list(budgets or [])

    async def _store_history(self) -> None:
        """Move the records held by value into the stored chain."""
        if not self._history:
            return
        self._history_ref = await store_history(self._history_ref, self._history,
                                                f"store {len(self._history)} prompt record(s)")
        self._stored_ids += [p.id for p in self._history]
        self._stored_usage = self._stored_usage + _usage(self._history)
        self._history = []

    # --- scheduled prompts --------------------------------------------------------------------------

    def _next_due(self) -> ScheduledPrompt | None:
        return min(self._scheduled, key=lambda s: s.fire_at or workflow.now(), default=None)

    def _schedule(self, prompt: Prompt) -> None:
        """Take the prompts `prompt`'s tools scheduled or cancelled; a delay counts from now (its end)."""
        for entry in prompt.scheduled:
            self._scheduled = [s for s in self._scheduled if s.id != entry.id]
            if not entry.cancel:
                fire_at = entry.at or workflow.now() + timedelta(seconds=entry.delay_seconds or 0)
                self._scheduled.append(entry.model_copy(update={"fire_at": fire_at}))

    def _fire(self, due: ScheduledPrompt) -> None:
        self._scheduled = [s for s in self._scheduled if s.id != due.id]
        # The principals now, not when the conversation started: a budget set since applies (the ledger says yes
        # when there is none).
        self._enqueue(None, instructions=f"A scheduled trigger ({due.id}) fired. Its message: {due.message}",
                      budgets=principals_for(self._request.user_id, self._id))

    # --- continue-as-new ----------------------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        return (workflow.info().is_continue_as_new_suggested()
                or self._prompts_this_run >= self._request.prompts_per_run)

    def _carry_over(self) -> ConversationRequest:
        return self._request.model_copy(update={
            "conversation_id": self._id, "history": self._history, "history_ref": self._history_ref,
            "prompt_ids": self._stored_ids, "usage": self._stored_usage, "plugin_state": self._plugin_state,
            "queued": self._queue, "next_sequence": self._next_sequence, "runs": self._request.runs + 1,
            "closing": self._closing, "workflow_version": versions.CURRENT_VERSION,
            "scheduled": self._scheduled,
        })  # a model, not a RawValue: the next run's decode_input accepts both

    def _snapshot(self) -> Conversation:
        usage = self._stored_usage + _usage(self._history)
        return Conversation(
            id=self._id, user_id=self._request.user_id, prompt_ids=self._stored_ids + [p.id for p in self._history],
            plugin_state=self._plugin_state, running_prompt_id=self._running,
            starting_prompt_id=self._starting, queued=[q.input or "(trigger)" for q in self._queue],
            usage=usage, runs=self._request.runs,
            scheduled=sorted(self._scheduled, key=lambda s: s.fire_at or workflow.now()),
            audit=list(self._audit),
        )


def _usage(prompts: Sequence[Prompt]) -> Usage:
    return sum((prompt.usage for prompt in prompts), Usage())
