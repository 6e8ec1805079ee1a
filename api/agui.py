"""The AG-UI event protocol (`ag-ui-protocol` types) over a prompt's live events.

A run is one prompt. It streams text (deltas when the model streams), tool calls (start, args, end, result),
widgets and files (CUSTOM events), state snapshots, and ends with RUN_FINISHED: `success`, `cancelled`, or an
`interrupt` outcome naming the tool call that waits for approval. A front-end resumes with a new run whose
`resume` entries answer the interrupts (`resolved` with payload `{"approved": true, "input": {...}}` or
`{"approved": false, "reason": "..."}`; `cancelled` rejects), on the same thread.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from durable_agent.agent.models import ApprovalRequest, FileOutput, ToolError, ToolOutput, ToolSuccess, WidgetOutput
from durable_agent.agent.models import TextOutput as TextEntry
from durable_agent.client import PromptHandle
from durable_agent.workflows.protocol import StreamEvent, TextDelta

APPROVAL_REASON = "tool_approval"


class AguiTranslator:
    """Turns one prompt's stream into AG-UI events; keeps what it needs to stream text and skip repeats."""

    def __init__(self, prompt_id: str) -> None:
        self.prompt_id = prompt_id
        self.open_message: str | None = None
        self.streamed: dict[int, int] = {}  # round -> characters already sent
        self.messages = 0
        self.pending: list[Interrupt] = []

    def _new_message_id(self) -> str:
        self.messages += 1
        return f"{self.prompt_id}-m{self.messages}"

    def delta(self, delta: TextDelta) -> list[BaseEvent]:
        fresh = delta.past(self.streamed.get(delta.round, 0))
        if not fresh:
            return []
        events: list[BaseEvent] = []
        if self.open_message is None:
            self.open_message = self._new_message_id()
            events.append(TextMessageStartEvent(message_id=self.open_message, role="assistant"))
        self.streamed[delta.round] = delta.end
        events.append(TextMessageContentEvent(message_id=self.open_message, delta=fresh))
        return events

    def event(self, event: StreamEvent) -> list[BaseEvent]:
        entry = event.output
        if event.kind == "state_changed":
            return [StateSnapshotEvent(snapshot={"prompt_id": self.prompt_id, "state": event.state})]
        if isinstance(entry, TextEntry) and event.kind == "output_added":
            if self.open_message is not None:
                message_id, self.open_message = self.open_message, None
                return [TextMessageEndEvent(message_id=message_id)]
            message_id = self._new_message_id()
            return [TextMessageStartEvent(message_id=message_id, role="assistant"),
                    TextMessageContentEvent(message_id=message_id, delta=entry.text),
                    TextMessageEndEvent(message_id=message_id)]
        if isinstance(entry, ToolOutput):
            return self._tool(event.kind, entry)
        if isinstance(entry, WidgetOutput | FileOutput) and event.kind == "output_added":
            return [CustomEvent(name=entry.type, value=entry.model_dump(mode="json"))]
        return []

    def _tool(self, kind: str, entry: ToolOutput) -> list[BaseEvent]:
        events: list[BaseEvent] = []
        if kind == "output_added":
            events += [ToolCallStartEvent(tool_call_id=entry.id, tool_call_name=entry.tool),
                       ToolCallArgsEvent(tool_call_id=entry.id, delta=json.dumps(entry.input)),
                       ToolCallEndEvent(tool_call_id=entry.id)]
        if kind == "approval_requested" and isinstance(entry.result, ApprovalRequest):
            interrupt = Interrupt(id=entry.id, reason=APPROVAL_REASON, message=entry.result.reason,
                                  tool_call_id=entry.id,
                                  expires_at=entry.result.expires_at.isoformat() if entry.result.expires_at else None,
                                  metadata={"tool": entry.tool, "input": entry.input,
                                            "approvers": entry.result.approvers})
            self.pending.append(interrupt)
            events.append(CustomEvent(name="approval_requested", value=interrupt.model_dump(mode="json")))
        if kind == "output_updated" and isinstance(entry.result, ToolSuccess | ToolError):
            self.pending = [i for i in self.pending if i.id != entry.id]
            content = json.dumps(entry.result.output if isinstance(entry.result, ToolSuccess)
                                 else {"error": entry.result.error})
            events.append(ToolCallResultEvent(message_id=f"{entry.id}-result", tool_call_id=entry.id,
                                              content=content, role="tool"))
        return events


async def agui_run(handle: PromptHandle, *, thread_id: str, run_id: str,
                   skip_through_approval: str | None = None) -> AsyncIterator[BaseEvent]:
    """One AG-UI run over a prompt, from its first event (or, when resuming, from just after the approval
    request of `skip_through_approval`). Ends at the prompt's end or at the next approval request."""
    translator = AguiTranslator(handle.id)
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    skipping = skip_through_approval is not None
    async for _, item in handle.live(0):
        if skipping:
            if (isinstance(item, StreamEvent) and item.kind == "approval_requested" and item.output is not None
                    and isinstance(item.output, ToolOutput) and item.output.id == skip_through_approval):
                skipping = False
            continue
        for event in translator.delta(item) if isinstance(item, TextDelta) else translator.event(item):
            yield event
        if translator.pending:
            yield RunFinishedEvent(thread_id=thread_id, run_id=run_id,
                                   outcome=RunFinishedInterruptOutcome(interrupts=list(translator.pending)))
            return
    prompt = await handle.get()
    if prompt.state == "failed":
        yield RunErrorEvent(message=prompt.error or "the prompt failed", code="prompt_failed")
    elif prompt.state == "cancelled":
        yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=RunFinishedCancelledOutcome())
    elif prompt.state == "stopped":  # its work not done: not a success
        yield RunErrorEvent(message=prompt.stop.words() if prompt.stop else "the prompt stopped", code="prompt_stopped")
    else:
        text = "".join(e.text for e in prompt.output if isinstance(e, TextEntry))
        yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=text,
                               outcome=RunFinishedSuccessOutcome())
