"""The Python client: start prompts, read them, wait for them, decide approvals, cancel.

A thin layer over the Temporal client: everything here can also be done with any Temporal SDK or the
`temporal` CLI by workflow type `PromptWorkflow` and the signal/query/update names it uses.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import JsonValue
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    ScheduleHandle,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import Priority, SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.errors import REFUSAL_KINDS, DecisionRefused, PromptFailedError, RefusalKind
from durable_agent.agent.models import TERMINAL_STATES, Conversation, ModelTier, Prompt, PromptOutput, ToolOutput
from durable_agent.agent.period_budgets import BudgetLimit, LedgerView
from durable_agent.client._live import poller_for
from durable_agent.client.budgets import BudgetRow, applying_budgets, list_budgets, set_budget, show_budget
from durable_agent.client.pending import QUERY_SECONDS, PendingList, pending_list
from durable_agent.client.priority import prompt_priority
from durable_agent.client.stuck import TaskProblem, task_problem, workflows_with_task_problems
from durable_agent.workers.plugin import connect
from durable_agent.workers.settings import Settings
from durable_agent.workflows import names
from durable_agent.workflows.details import prompt_static_details, prompt_summary
from durable_agent.workflows.names import (
    CONVERSATION_ID,
    CONVERSATION_WORKFLOW,
    DELTAS_TOPIC,
    EVENTS_TOPIC,
    PROGRESS_TOPIC,
    PROMPT_STATE,
    PROMPT_WORKFLOW,
    USER_ID,
)
from durable_agent.workflows.protocol import (
    ApproveRequest,
    ConversationRequest,
    PendingApproval,
    PromptRequest,
    RejectRequest,
    SendRequest,
    SteerRequest,
    StreamEvent,
    TextDelta,
    ToolProgress,
)
from durable_agent.workflows.telemetry import span_kind, tracer
from durable_agent.workflows.versions import CURRENT_VERSION

LiveItem = StreamEvent | TextDelta | ToolProgress


def new_prompt_id() -> str:
    return f"prompt-{uuid.uuid4().hex[:16]}"


@dataclass(frozen=True)
class PromptSummary:
    """A prompt as the visibility store lists it (search attributes), without querying the workflow."""

    prompt_id: str
    user_id: str | None
    conversation_id: str | None
    state: str | None
    status: str
    started_at: datetime | None


@dataclass(frozen=True)
class WaitingPrompt:
    prompt_id: str
    user_id: str | None
    conversation_id: str | None


ResultT = TypeVar("ResultT")


class _Handle(Generic[ResultT]):
    """A workflow of ours: its Temporal handle and the client it was made with."""

    def __init__(self, handle: WorkflowHandle[Any, ResultT], client: Client) -> None:
        self._handle = handle
        self._client = client

    @property
    def id(self) -> str:
        return self._handle.id


def _record_of(failure: WorkflowFailureError) -> Prompt | None:
    """The record a failed prompt's workflow failure carries (patch failure-carries-record), else None."""
    cause = failure.cause
    if not isinstance(cause, ApplicationError) or not cause.details:
        return None
    try:
        return Prompt.model_validate(cause.details[0])
    except ValueError:
        return None


class PromptHandle(_Handle[Prompt]):
    """One prompt (= one `PromptWorkflow` execution, workflow id = prompt id)."""

    @property
    def workflow(self) -> WorkflowHandle[Any, Prompt]:
        return self._handle

    def other(self, prompt_id: str) -> PromptHandle:
        """Another prompt through the same client (a sub-agent's, named by `PendingApproval.path`)."""
        return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client)

    async def get(self) -> Prompt:
        """The full record as it is now (a query: writes nothing to history)."""
        return await self._handle.query(names.GET_PROMPT_QUERY, result_type=Prompt)

    async def result(self, *, raise_on_failure: bool = False) -> Prompt:
        """Wait until the prompt finishes; a failed or cancelled prompt returns its record too. A failed prompt's
        record comes with its workflow's failure, so no worker has to replay the closed workflow (a cancelled
        one, or one that failed before version 3, is queried). `raise_on_failure`: a failed prompt raises
        `PromptFailedError` carrying the record (`.prompt`) instead."""
        try:
            return await self._handle.result()
        except WorkflowFailureError as exc:
            prompt = _record_of(exc) or await self.get()
        if raise_on_failure and prompt.state == "failed":
            raise PromptFailedError(prompt.error or "prompt failed", prompt=prompt)
        return prompt

    async def wait_until(self, *states: str, poll_interval: float = 0.05) -> Prompt:
        """Poll until the prompt reaches one of `states` (or finishes)."""
        while True:
            prompt = await self.get()
            if prompt.state in states or prompt.state in TERMINAL_STATES:
                return prompt
            await asyncio.sleep(poll_interval)

    async def pending_approvals(self) -> list[PendingApproval]:
        """The calls waiting for a decision (a query: it needs the prompt's worker; see AgentClient.pending)."""
        return await self._handle.query(names.PENDING_APPROVALS_QUERY, result_type=list[PendingApproval])

    async def approve(self, tool_call_id: str, *, by: str | None = None,
                      input: dict[str, JsonValue] | None = None, wait: bool = False,
                      token: str | None = None, roles: Sequence[str] = ()) -> ToolOutput | None:
        """Approve a pending call. With `wait=True` an update is used: a bad request raises at once with
        the reason, and the call's resolved output is returned. `token`: a signed decision token, needed
        when the worker has a decision key (the HTTP API signs one for its authenticated principal).
        `roles`: the decider's roles, for calls whose approvers name roles (trusted only without keys)."""
        request = ApproveRequest(tool_call_id=tool_call_id, by=by, input=input, token=token, roles=list(roles))
        return await self._decide(names.APPROVE_SIGNAL, names.APPROVE_CALL_UPDATE, request, wait=wait)

    async def reject(self, tool_call_id: str, *, by: str | None = None, reason: str | None = None,
                     wait: bool = False, token: str | None = None, roles: Sequence[str] = ()) -> ToolOutput | None:
        request = RejectRequest(tool_call_id=tool_call_id, by=by, reason=reason, token=token, roles=list(roles))
        return await self._decide(names.REJECT_SIGNAL, names.REJECT_CALL_UPDATE, request, wait=wait)

    async def approve_all(self, *, by: str | None = None, wait: bool = False) -> list[ToolOutput | None]:
        """Approve every call pending now, in record order (one decision each)."""
        return [await self.approve(p.tool_call_id, by=by, wait=wait) for p in await self.pending_approvals()]

    async def reject_all(self, *, by: str | None = None, reason: str | None = None,
                         wait: bool = False) -> list[ToolOutput | None]:
        """Reject every call pending now, in record order (one decision each)."""
        return [await self.reject(p.tool_call_id, by=by, reason=reason, wait=wait)
                for p in await self.pending_approvals()]

    async def _decide(self, signal: str, update: str, request: ApproveRequest | RejectRequest, *,
                      wait: bool) -> ToolOutput | None:
        try:
            if wait:
                return await self._handle.execute_update(update, request, result_type=ToolOutput)
            await self._handle.signal(signal, request)
            return None
        except WorkflowUpdateFailedError as exc:
            raise _refused(exc.cause) from exc
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise DecisionRefused(f"prompt {self.id}: {exc.message}", await self._missing_kind()) from exc
            raise

    async def _missing_kind(self) -> RefusalKind:
        """Why the server found no running prompt to decide on: it finished, or it never existed."""
        try:
            await self._handle.describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return "unknown-prompt"
            raise
        return "prompt-finished"

    async def cancel(self) -> None:
        await self._handle.cancel()

    async def task_problem(self) -> TaskProblem | None:
        """Why this prompt's workflow task keeps failing (e.g. a payload missing from storage), or None."""
        return await task_problem(self._client, self.id)

    async def steer(self, message: str) -> None:
        """Inject a user message: delivered after the tool call in flight; the rest of the batch is skipped."""
        await self._handle.signal(names.STEER_SIGNAL, SteerRequest(message=message))

    async def events(self, from_offset: int = 0) -> AsyncIterator[tuple[int, StreamEvent]]:
        """Live events `(sequence number, event)` from `from_offset` on, until the prompt finishes.

        Durable and offset-addressed: attach late, or resume after a disconnect from the last sequence
        number + 1, without missing or repeating an event. Read with queries: watching writes nothing to
        the prompt's history, and every watcher of a prompt in this process shares one poller.
        """
        converter = self._client.data_converter.payload_converter
        async for offset, _, payload in poller_for(self._client, self.id).subscribe(from_offset, [EVENTS_TOPIC]):
            assert offset is not None and isinstance(payload, Payload)
            yield offset, converter.from_payload(payload, StreamEvent)

    async def live(self, from_offset: int = 0) -> AsyncIterator[tuple[int | None, LiveItem]]:
        """Like `events`, interleaved with the model's text as it streams (when the worker streams) and tool
        progress. Those two come from heartbeats, not from the event stream: their offset is None, and each
        carries the latest state (a `TextDelta` holds the round's text from its `offset` on)."""
        converter = self._client.data_converter.payload_converter
        topics = [EVENTS_TOPIC, DELTAS_TOPIC, PROGRESS_TOPIC]
        async for offset, topic, item in poller_for(self._client, self.id).subscribe(from_offset, topics):
            if isinstance(item, TextDelta | ToolProgress):
                yield offset, item
            elif topic == DELTAS_TOPIC:  # streamed text published to the stream by older workers
                yield offset, converter.from_payload(item, TextDelta)
            else:
                yield offset, converter.from_payload(item, StreamEvent)

    async def follow(self, poll_interval: float = 0.1) -> AsyncIterator[tuple[int, PromptOutput, Prompt]]:
        """Yield `(index, entry, prompt)` for every new or changed output entry until the prompt finishes."""
        seen: list[str] = []
        while True:
            prompt = await self.get()
            for index, entry in enumerate(prompt.output):
                encoded = entry.model_dump_json()
                if index >= len(seen):
                    seen.append(encoded)
                elif seen[index] == encoded:
                    continue
                else:
                    seen[index] = encoded
                yield index, entry, prompt
            if prompt.state in TERMINAL_STATES:
                return
            await asyncio.sleep(poll_interval)


class ConversationHandle(_Handle[Conversation]):
    """One conversation (= one `ConversationWorkflow`, workflow id = conversation id)."""

    async def send(self, text: str, *, user_id: str | None = None) -> PromptHandle:
        """Queue a user input; returns the handle of the prompt it becomes (it may wait its turn)."""
        budgets = await applying_budgets(self._client, user_id, self.id)  # client/budgets.py
        prompt_id = await self._handle.execute_update(
            names.SEND_INPUT_UPDATE, SendRequest(input=text, user_id=user_id, budgets=budgets), result_type=str)
        return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client)

    async def get(self) -> Conversation:
        return await self._handle.query(names.GET_CONVERSATION_QUERY, result_type=Conversation)

    async def prompt_started(self, prompt_id: str, timeout: float = 30.0) -> PromptHandle:
        """Wait until the conversation has started `prompt_id` (queued prompts start later)."""
        async with asyncio.timeout(timeout):
            while True:
                conversation = await self.get()
                if prompt_id == conversation.running_prompt_id or prompt_id in conversation.prompt_ids:
                    return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client)
                await asyncio.sleep(0.05)

    async def close(self) -> Conversation:
        """Finish after the queued prompts; returns the final conversation."""
        await self._handle.signal(names.CLOSE_SIGNAL)
        return await self._handle.result()


class AgentClient:
    def __init__(self, client: Client, settings: Settings | None = None) -> None:
        self.client = client
        self.settings = settings or Settings.from_env()

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> AgentClient:
        settings = settings or Settings.from_env()
        return cls(await connect(settings), settings)

    def _run_options(self, model: ModelTier) -> dict[str, Any]:
        """What every prompt or conversation this client starts carries besides the caller's options: where
        its model calls run, and the workflow version (this code's behaviour, without patch markers)."""
        return {"model_task_queue": self.settings.model_queue_for(model), "workflow_version": CURRENT_VERSION,
                "model_routing": self.settings.model_routing(model)}

    async def read_file(self, content_ref: str) -> bytes:
        """The content of a file a tool attached (`FileOutput.content_ref`), from the shared store."""
        return await self.settings.file_store().aget(content_ref)

    async def start(self, input: str | None, *, user_id: str = "anonymous", model: ModelTier = "normal",
                    prompt_id: str | None = None, conversation_id: str | None = None,
                    instructions: str | None = None, max_rounds: int | None = None,
                    history: list[Prompt] | None = None, priority: Priority | None = None,
                    **options: Any) -> PromptHandle:
        """Start a prompt. `options` are further `PromptRequest` fields (output_schema, output_retries,
        context_max_messages, context_max_tokens, plugin_state, visible). `priority`: Temporal task priority
        (client/priority.py); default: fairness by `user_id`, the server's default priority."""
        prompt_id = prompt_id or new_prompt_id()
        priority = priority or prompt_priority(user_id)
        if max_rounds is not None:
            options["max_rounds"] = max_rounds
        options = self._run_options(model) | options
        if "budgets" not in options:  # the period budgets the prompt is under (client/budgets.py)
            options["budgets"] = await applying_budgets(self.client, user_id, conversation_id)
        request = PromptRequest(prompt_id=prompt_id, user_id=user_id, model=model, input=input,
                                conversation_id=conversation_id, instructions=instructions,
                                history=history or [], **options)
        # The root of the prompt's trace (with tracing on): the workflow's spans are its children.
        with tracer().start_as_current_span(
                "dagent.prompt.start", kind=span_kind("CLIENT"), attributes={"dagent.prompt.id": prompt_id}):
            summary = prompt_summary(user_id, input)
            handle = await self.client.start_workflow(
                PROMPT_WORKFLOW, request, id=prompt_id, task_queue=self.settings.task_queue,
                static_summary=summary, static_details=prompt_static_details(user_id, input),
                memo={"summary": summary},  # listings (dagent ls) show it; summaries are not listed
                # listed as running before the workflow's first task
                search_attributes=TypedSearchAttributes([
                    SearchAttributePair(PROMPT_STATE, "running"), SearchAttributePair(USER_ID, user_id),
                    *([SearchAttributePair(CONVERSATION_ID, conversation_id)] if conversation_id else [])]),
                result_type=Prompt,
                # With a worker for the queue in this process (on this client), its first workflow task comes
                # back in the start reply; otherwise the SDK leaves the request out. Not with worker versioning:
                # an eager start skips the deployment's routing and pins the prompt to this process's build.
                request_eager_start=not self.settings.deployment_name,
                priority=priority,  # its model calls, tools and sub-agents inherit it
            )
        return PromptHandle(handle, self.client)

    async def run(self, input: str | None, **options: object) -> Prompt:
        handle = await self.start(input, **options)  # type: ignore[arg-type]
        return await handle.result()

    async def start_conversation(self, *, user_id: str = "anonymous", conversation_id: str | None = None,
                                 model: ModelTier = "normal", priority: Priority | None = None,
                                 **options: Any) -> ConversationHandle:
        """Start (or attach to, if it runs already) a conversation. `options`: further
        `ConversationRequest` fields (instructions, max_rounds, prompts_per_run, plugin_state). `priority`:
        as for `start`; the conversation's prompts inherit it."""
        conversation_id = conversation_id or f"conv-{uuid.uuid4().hex[:12]}"
        options = self._run_options(model) | options
        if "budgets" not in options:
            options["budgets"] = await applying_budgets(self.client, user_id, conversation_id)
        request = ConversationRequest(conversation_id=conversation_id, user_id=user_id, model=model, **options)
        handle = await self.client.start_workflow(
            CONVERSATION_WORKFLOW, request, id=conversation_id, task_queue=self.settings.task_queue,
            result_type=Conversation, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            static_summary=f"conversation of {user_id}",
            priority=priority or prompt_priority(user_id),
        )
        return ConversationHandle(handle, self.client)

    async def schedule(self, schedule_id: str, input: str | None, **options: Any) -> ScheduleHandle:
        """A recurring prompt on a Temporal Schedule: `cron=` or `every=`, `jitter=`, `time_zone=`, `overlap=`,
        `user_id=`... (client/schedules.py `create_schedule`). Each run is an ordinary prompt."""
        from durable_agent.client.schedules import create_schedule

        return await create_schedule(self, schedule_id, input, **options)

    def conversation(self, conversation_id: str) -> ConversationHandle:
        return ConversationHandle(self.client.get_workflow_handle(conversation_id, result_type=Conversation),
                                  self.client)

    def prompt(self, prompt_id: str) -> PromptHandle:
        return PromptHandle(self.client.get_workflow_handle(prompt_id, result_type=Prompt), self.client)

    async def set_budget(self, principal: str, limit: BudgetLimit | None, *, by: str | None = None) -> LedgerView:
        """Set (None: remove) the period budget of `user:<id>` or `conversation:<id>` (client/budgets.py)."""
        return await set_budget(self, principal, limit, by=by)

    async def budget(self, principal: str) -> LedgerView:
        """A principal's budget and this period's spend."""
        return await show_budget(self, principal)

    async def budgets(self) -> list[BudgetRow]:
        """Every principal with a budget."""
        return await list_budgets(self)

    async def stuck(self) -> list[TaskProblem]:
        """Running prompts and conversations whose workflow task keeps failing, with the reason."""
        return await workflows_with_task_problems(self.client, (PROMPT_WORKFLOW, CONVERSATION_WORKFLOW))

    async def list_prompts(self, *, user_id: str | None = None, conversation_id: str | None = None,
                           state: str | None = None, limit: int = 100) -> list[PromptSummary]:
        """Prompts by user, conversation and state (the search attributes), newest first."""
        query = prompt_query(user_id=user_id, conversation_id=conversation_id, state=state)
        found: list[PromptSummary] = []
        async for execution in self.client.list_workflows(query, limit=limit):
            attrs = execution.typed_search_attributes
            found.append(PromptSummary(
                prompt_id=execution.id, user_id=attrs.get(names.USER_ID),
                conversation_id=attrs.get(names.CONVERSATION_ID), state=attrs.get(names.PROMPT_STATE),
                status=execution.status.name.lower() if execution.status else "unknown",
                started_at=execution.start_time,
            ))
        return found

    async def pending(self, *, user_id: str | None = None, timeout: float = QUERY_SECONDS, limit: int | None = None,
                      cursor: str | None = None) -> PendingList:
        """Every call waiting for a decision (of `user_id`'s prompts), addressed from its top prompt, or with
        `limit` one page from `cursor` on (client/pending.py `pending_list`)."""
        return await pending_list(self, user_id, timeout=timeout, limit=limit, cursor=cursor)

    async def waiting_prompts(self, *, user_id: str | None = None) -> list[WaitingPrompt]:
        """Prompts waiting for approval, found through the `PromptState` search attribute."""
        query = prompt_query(user_id=user_id or None, state="waiting_for_approval", running=True)
        found: list[WaitingPrompt] = []
        async for execution in self.client.list_workflows(query):
            attrs = execution.typed_search_attributes
            found.append(WaitingPrompt(prompt_id=execution.id, user_id=attrs.get(names.USER_ID),
                                       conversation_id=attrs.get(names.CONVERSATION_ID)))
        return found


def prompt_query(*, user_id: str | None = None, conversation_id: str | None = None, state: str | None = None,
                 running: bool = False, task_queue: str | None = None) -> str:
    """The visibility query for prompts by user, conversation, state and task queue (values quoted),
    optionally only those whose workflow still runs."""
    query = f"WorkflowType = '{PROMPT_WORKFLOW}'"
    for key, value in ((names.USER_ID.name, user_id), (names.CONVERSATION_ID.name, conversation_id),
                       (names.PROMPT_STATE.name, state), ("TaskQueue", task_queue)):
        if value is not None:
            query += f" AND {key} = '{_quote(value)}'"
    return query + (" AND ExecutionStatus = 'Running'" if running else "")


def _quote(value: str) -> str:
    """A value inside a single-quoted visibility query literal."""
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _refused(cause: BaseException | None) -> DecisionRefused:
    """The prompt's refusal of an update, with its kind (the first detail of a `DecisionRefused` failure)."""
    message = getattr(cause, "message", None) or str(cause)
    if isinstance(cause, ApplicationError) and cause.type == names.DECISION_REFUSED_ERROR and cause.details:
        kind = cause.details[0]
        if kind in REFUSAL_KINDS:
            return DecisionRefused(message, kind)
    return DecisionRefused(message)
