"""Handles of one prompt and one conversation: read, wait, decide, steer, cancel, follow (client/_client.py
makes them)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, Generic, TypeVar

from pydantic import JsonValue
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agent.errors import (
    REFUSAL_KINDS,
    DecisionRefused,
    PromptFailedError,
    PromptNotStartedError,
    RefusalKind,
)
from durable_agent.agent.models import TERMINAL_STATES, Conversation, Prompt, PromptOutput, ToolOutput
from durable_agent.client._live import poller_for
from durable_agent.client.budgets import applying_budgets
from durable_agent.client.stuck import TaskProblem, task_problem
from durable_agent.config.connection import described
from durable_agent.workflows import names
from durable_agent.workflows.protocol import (
    ApproveRequest,
    PendingApproval,
    RejectRequest,
    SendRequest,
    SteerRequest,
    StreamEvent,
    TextDelta,
    ToolProgress,
)

LiveItem = StreamEvent | TextDelta | ToolProgress
ResultT = TypeVar("ResultT")
MAX_START_POLL_INTERVAL = 2.0  # seconds between questions to a conversation while a queued prompt waits its turn


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
    """One prompt (= one `PromptWorkflow` execution, workflow id = prompt id). A handle `ConversationHandle.send`
    returned for a queued input knows its conversation: reading it waits for (or reports) its start."""

    def __init__(self, handle: WorkflowHandle[Any, Prompt], client: Client,
                 queued_in: ConversationHandle | None = None) -> None:
        super().__init__(handle, client)
        self._queued_in = queued_in

    async def _started(self, *, wait: bool) -> None:
        """For a queued input: return once its workflow exists (`wait`), or raise `PromptNotStartedError`."""
        conversation = self._queued_in
        if conversation is None:
            return
        if await described(self._handle) is None:  # else the server knows it: started (the conversation may be closed)
            if not wait:
                raise PromptNotStartedError(self.id, conversation.id)
            await conversation.prompt_started(self.id, timeout=None)
        self._queued_in = None

    @property
    def workflow(self) -> WorkflowHandle[Any, Prompt]:
        return self._handle

    def other(self, prompt_id: str) -> PromptHandle:
        """Another prompt through the same client (a sub-agent's, named by `PendingApproval.path`)."""
        return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client)

    async def get(self) -> Prompt:
        """The full record as it is now (a query: writes nothing to history). A queued input's prompt that has
        not started raises `PromptNotStartedError`."""
        await self._started(wait=False)
        return await self._handle.query(names.GET_PROMPT_QUERY, result_type=Prompt)

    async def result(self, *, raise_on_failure: bool = False) -> Prompt:
        """Wait until the prompt finishes; a failed or cancelled prompt returns its record too. A failed prompt's
        record comes with its workflow's failure, so no worker has to replay the closed workflow (a cancelled
        one, or one whose record is too large for the failure, is queried). `raise_on_failure`: a failed prompt raises
        `PromptFailedError` carrying the record (`.prompt`) instead. A queued input's prompt is waited for."""
        await self._started(wait=True)
        try:
            return await self._handle.result()
        except WorkflowFailureError as exc:
            prompt = _record_of(exc) or await self.get()
        if raise_on_failure and prompt.state == "failed":
            raise PromptFailedError(prompt.error or "prompt failed", prompt=prompt)
        return prompt

    async def wait_until(self, *states: str, poll_interval: float = 0.05) -> Prompt:
        """Poll until the prompt reaches one of `states` (or finishes); a queued input's prompt is waited for."""
        await self._started(wait=True)
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
            if exc.status == RPCStatusCode.NOT_FOUND:  # no running prompt: it finished, or it never existed
                kind: RefusalKind = "unknown-prompt" if await described(self._handle) is None else "prompt-finished"
                raise DecisionRefused(f"prompt {self.id}: {exc.message}", kind) from exc
            raise

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
        async for offset, _, payload in poller_for(self._client, self.id).subscribe(from_offset, [names.EVENTS_TOPIC]):
            assert offset is not None and isinstance(payload, Payload)
            yield offset, converter.from_payload(payload, StreamEvent)

    async def live(self, from_offset: int = 0) -> AsyncIterator[tuple[int | None, LiveItem]]:
        """Like `events`, interleaved with the model's text as it streams (when the worker streams) and tool
        progress. Those two come from heartbeats, not from the event stream: their offset is None, and each
        carries the latest state (a `TextDelta` holds the round's text from its `offset` on)."""
        converter = self._client.data_converter.payload_converter
        topics = [names.EVENTS_TOPIC, names.DELTAS_TOPIC, names.PROGRESS_TOPIC]
        async for offset, _topic, item in poller_for(self._client, self.id).subscribe(from_offset, topics):
            if isinstance(item, TextDelta | ToolProgress):
                yield offset, item
            else:
                yield offset, converter.from_payload(item, StreamEvent)

    async def follow(self, poll_interval: float = 0.1) -> AsyncIterator[tuple[int, PromptOutput, Prompt]]:
        """Yield `(index, entry, prompt)` for every new or changed output entry until the prompt finishes."""
        seen: dict[int, str] = {}
        while True:
            prompt = await self.get()
            for index, entry in enumerate(prompt.output):
                if seen.get(index) != (encoded := entry.model_dump_json()):
                    seen[index] = encoded
                    yield index, entry, prompt
            if prompt.state in TERMINAL_STATES:
                return
            await asyncio.sleep(poll_interval)


class ConversationHandle(_Handle[Conversation]):
    """One conversation (= one `ConversationWorkflow`, workflow id = conversation id)."""

    async def send(self, text: str, *, user_id: str | None = None) -> PromptHandle:
        """Queue a user input; returns the handle of the prompt it becomes. When the conversation was idle the
        prompt has started by then (its handle can be read at once); otherwise it waits its turn in the queue."""
        budgets = await applying_budgets(self._client, user_id, self.id)  # client/budgets.py
        prompt_id = await self._handle.execute_update(
            names.SEND_INPUT_UPDATE, SendRequest(input=text, user_id=user_id, budgets=budgets), result_type=str)
        started = await self._while_starting(prompt_id)
        return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client,
                            queued_in=None if started else self)

    async def _while_starting(self, prompt_id: str, timeout: float = 30.0) -> bool:
        """Wait while the conversation is starting `prompt_id` (taken from the queue, its workflow not there yet),
        so a handle returned by `send` never names a workflow the server does not know yet. The input is queued
        whatever happens here: a start slower than `timeout` returns the handle as it is. True: it has started.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    conversation = await self.get()
                    if conversation.starting_prompt_id != prompt_id:
                        return _has_started(conversation, prompt_id)
                    await asyncio.sleep(0.02)
        return False

    async def get(self) -> Conversation:
        return await self._handle.query(names.GET_CONVERSATION_QUERY, result_type=Conversation)

    async def prompt_started(self, prompt_id: str, timeout: float | None = 30.0) -> PromptHandle:
        """Wait until the conversation has started `prompt_id` (queued prompts start later); None: no limit.
        The conversation is asked every 50 ms at first, then less often, down to every 2 s (a turn may take days)."""
        interval = 0.05
        async with asyncio.timeout(timeout):
            while True:
                if _has_started(await self.get(), prompt_id):
                    return PromptHandle(self._client.get_workflow_handle(prompt_id, result_type=Prompt), self._client)
                await asyncio.sleep(interval)
                interval = min(interval * 1.25, MAX_START_POLL_INTERVAL)

    async def close(self) -> Conversation:
        """Finish after the queued prompts; returns the final conversation."""
        await self._handle.signal(names.CLOSE_SIGNAL)
        return await self._handle.result()



def _has_started(conversation: Conversation, prompt_id: str) -> bool:
    return prompt_id == conversation.running_prompt_id or prompt_id in conversation.prompt_ids


def _refused(cause: BaseException | None) -> DecisionRefused:
    """The prompt's refusal of an update, with its kind (the first detail of a `DecisionRefused` failure)."""
    message = getattr(cause, "message", None) or str(cause)
    if isinstance(cause, ApplicationError) and cause.type == names.DECISION_REFUSED_ERROR and cause.details:
        kind = cause.details[0]
        if kind in REFUSAL_KINDS:
            return DecisionRefused(message, kind)
    return DecisionRefused(message)
