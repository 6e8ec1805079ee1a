"""ConversationWorkflow: one per conversation. Runs each input as a child PromptWorkflow with the full
history, queues inputs that arrive meanwhile, fires triggers as system-initiated prompts, and continues as
new before its history grows large — carrying history, plugin state and queued inputs across.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from agent.models import Conversation, Prompt, Usage
    from agent.triggers import Trigger, next_due, read_triggers, schedule_requested, write_triggers
    from workflows import names, telemetry
    from workflows.inputs import decode_input
    from workflows.names import CONVERSATION_ID, USER_ID
    from workflows.protocol import ConversationRequest, PromptRequest, QueuedInput, SendRequest


@workflow.defn(name=names.CONVERSATION_WORKFLOW)
class ConversationWorkflow:
    @workflow.init
    def __init__(self, request: RawValue) -> None:
        self._request, self._input_error = decode_input(request, ConversationRequest)
        request = self._request
        self._id = request.conversation_id or workflow.info().workflow_id
        self._history: list[Prompt] = list(request.history)
        self._plugin_state = dict(request.plugin_state)
        self._queue: list[QueuedInput] = list(request.queued)
        self._next_sequence = request.next_sequence
        self._running: str | None = None
        self._closing = request.closing
        self._prompts_this_run = 0

    @workflow.run
    async def run(self, request: RawValue) -> Conversation:
        if self._input_error:
            raise ApplicationError(self._input_error, type=names.INVALID_INPUT_ERROR, non_retryable=True)
        workflow.upsert_search_attributes(
            [CONVERSATION_ID.value_set(self._id), USER_ID.value_set(self._request.user_id)])
        while True:
            due = next_due(read_triggers(self._plugin_state))
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

    @workflow.signal(name=names.SEND_SIGNAL)
    def send(self, request: SendRequest) -> None:
        if self._closing:
            workflow.logger.warning("conversation %s is closing; input dropped: %d chars", self._id,
                                    len(request.input))
            return
        self._enqueue(request.input, user_id=request.user_id)

    @workflow.update(name=names.SEND_INPUT_UPDATE)
    def send_input(self, request: SendRequest) -> str:
        """Queue an input and return the id its prompt will have (it runs when earlier ones finish)."""
        return self._enqueue(request.input, user_id=request.user_id).prompt_id

    @send_input.validator
    def _validate_send_input(self, request: SendRequest) -> None:
        if self._closing:
            raise ValueError(f"conversation {self._id} is closing and takes no more input")

    @workflow.signal(name=names.CLOSE_SIGNAL)
    def close(self) -> None:
        """Finish after the running and queued prompts; triggers not yet fired are dropped."""
        self._closing = True

    @workflow.query(name=names.GET_CONVERSATION_QUERY)
    def get_conversation(self) -> Conversation:
        return self._snapshot()

    # --- running prompts ----------------------------------------------------------------------------

    def _enqueue(self, text: str | None, *, user_id: str | None = None, instructions: str | None = None) -> QueuedInput:
        item = QueuedInput(prompt_id=f"{self._id}-{self._next_sequence:04d}", input=text, user_id=user_id,
                           instructions=instructions)
        self._next_sequence += 1
        self._queue.append(item)
        return item

    async def _run_prompt(self, item: QueuedInput) -> None:
        request = self._request
        instructions = "\n\n".join(p for p in [request.instructions or "", item.instructions or ""] if p) or None
        try:
            # The child prompt starts a trace of its own, linked to this span (one trace per prompt).
            with telemetry.span(telemetry.CONVERSATION_TURN_SPAN, **{"dagent.conversation.id": self._id,
                                                                     "dagent.prompt.id": item.prompt_id}):
                child = await workflow.start_child_workflow(
                    names.PROMPT_WORKFLOW,
                    PromptRequest(prompt_id=item.prompt_id, user_id=item.user_id or request.user_id,
                                  conversation_id=self._id, model=request.model, input=item.input,
                                  model_settings=request.model_settings,
                                  instructions=instructions, history=self._history,
                                  plugin_state=self._plugin_state,
                                  max_rounds=request.max_rounds, fail_workflow_on_error=False),
                    id=item.prompt_id, static_summary=f"prompt {item.prompt_id}", result_type=Prompt,
                )
            self._running = item.prompt_id
            prompt = await child
        except ChildWorkflowError as exc:
            prompt = Prompt(id=item.prompt_id, user_id=item.user_id or request.user_id, conversation_id=self._id,
                            input=item.input, state="cancelled" if "cancel" in str(exc.cause).lower() else "failed",
                            error=str(exc.cause or exc))
        self._running = None
        self._prompts_this_run += 1
        self._history.append(prompt)
        if prompt.state != "failed" or prompt.plugin_state:
            self._plugin_state = dict(prompt.plugin_state)
        self._schedule_triggers()

    # --- triggers -----------------------------------------------------------------------------------

    def _schedule_triggers(self) -> None:
        triggers = read_triggers(self._plugin_state)
        if any(t.status == "requested" for t in triggers):
            write_triggers(self._plugin_state, schedule_requested(triggers, workflow.now()))

    def _fire(self, trigger: Trigger) -> None:
        updated = [t.model_copy(update={"status": "fired"}) if t.id == trigger.id else t
                   for t in read_triggers(self._plugin_state)]
        write_triggers(self._plugin_state, updated)
        self._enqueue(None, instructions=f"A scheduled trigger ({trigger.id}) fired. Its message: {trigger.message}")

    # --- continue-as-new ----------------------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        return (workflow.info().is_continue_as_new_suggested()
                or self._prompts_this_run >= self._request.prompts_per_run)

    def _carry_over(self) -> ConversationRequest:
        return self._request.model_copy(update={
            "conversation_id": self._id, "history": self._history, "plugin_state": self._plugin_state,
            "queued": self._queue, "next_sequence": self._next_sequence, "runs": self._request.runs + 1,
            "closing": self._closing,
        })  # a model, not a RawValue: the next run's decode_input accepts both

    def _snapshot(self) -> Conversation:
        usage = Usage()
        for prompt in self._history:
            usage = usage + prompt.usage
        return Conversation(
            id=self._id, user_id=self._request.user_id, prompt_ids=[p.id for p in self._history],
            plugin_state=self._plugin_state, running_prompt_id=self._running,
            queued=[q.input or "(trigger)" for q in self._queue], usage=usage, runs=self._request.runs,
        )
