"""The prompt's record as PromptWorkflow writes it: entries appended and updated in place, each change published
to the live stream, tool calls' spans and counters, the state in the search attributes and the waiting calls in
the memo.

A tool call's position comes from an id -> index map, not a scan of the record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_agent.agent.events import EventKind
from durable_agent.agent.models import (
    ApprovalRequest,
    Prompt,
    PromptOutput,
    PromptState,
    ToolError,
    ToolOutput,
    ToolSuccess,
)
from durable_agent.workflows import details, telemetry
from durable_agent.workflows.audit import record_ignored
from durable_agent.workflows.pending_memo import pending_memo
from durable_agent.workflows.prompt.host import Host
from durable_agent.workflows.protocol import PendingApproval, PlannedCall, StreamEvent

MAX_FAILURE_RECORD_CHARS = 256 * 1024  # a failure's details are not stored by reference: a larger record stays out


class Recorder:
    """Appends to and updates `prompt.output`; `changed` collects the indices a model round has not seen."""

    def __init__(self, prompt: Prompt, host: Host) -> None:
        self.prompt = prompt
        self.host = host
        self.changed: set[int] = set()  # output indices added or changed since the last model round
        self.span: telemetry.Span | None = None  # the prompt's span, once it runs
        self._positions: dict[str, int] = {}  # tool call id -> index in the record
        self._call_spans: dict[str, telemetry.Span] = {}  # open dagent.tool_call spans by call id
        self._pending_memo: dict[str, object] = {}  # the waiting calls as the memo last said (nothing yet)

    # --- entries -----------------------------------------------------------------------------------

    def append(self, entry: PromptOutput) -> None:
        output = self.prompt.output
        output.append(entry)
        index = len(output) - 1
        if isinstance(entry, ToolOutput):
            self._positions[entry.id] = index
        self.changed.add(index)
        self.host.publish(StreamEvent(kind=EventKind.OUTPUT_ADDED, index=index, output=entry))

    def index(self, entry: ToolOutput) -> int:
        return self._positions[entry.id]

    def tool_call(self, tool_call_id: str) -> ToolOutput | None:
        index = self._positions.get(tool_call_id)
        if index is None:
            return None
        entry = self.prompt.output[index]
        return entry if isinstance(entry, ToolOutput) else None

    def position(self, tool_call_id: str) -> int:
        """Where a call is in the record (after everything when there is no such call)."""
        return self._positions.get(tool_call_id, len(self.prompt.output))

    def touch(self, entry: ToolOutput) -> None:
        index = self.index(entry)
        self.changed.add(index)
        self.host.publish(StreamEvent(kind=EventKind.OUTPUT_UPDATED, index=index, output=entry))

    def resolve(self, entry: ToolOutput, result: ToolSuccess | ToolError) -> None:
        entry.result, entry.finished_at = result, self.host.now()
        self.touch(entry)

    # --- tool calls ----------------------------------------------------------------------------------

    def open_call(self, call: PlannedCall) -> ToolOutput:
        """Record the call and open its `dagent.tool_call` span (closed with its outcome by `close_call`)."""
        entry = ToolOutput(id=self._unique_call_id(call.id), tool=call.tool, input=call.input,
                           started_at=self.host.now())
        self.append(entry)
        self._call_spans[entry.id] = telemetry.start_span(
            telemetry.TOOL_SPAN, **{"dagent.tool.id": call.tool, "dagent.tool.call_id": entry.id,
                                    "dagent.prompt.id": self.prompt.id})
        return entry

    def call_span(self, tool_call_id: str) -> telemetry.Span | None:
        return self._call_spans.get(tool_call_id)

    def end_call(self, entry: ToolOutput, error: str, outcome: str) -> None:
        """A call that ends without running (or without finishing): its error result, span and count."""
        self.resolve(entry, ToolError(error=error))
        self.close_call(entry, outcome)

    def close_call(self, entry: ToolOutput, outcome: str) -> None:
        self.host.metrics.tool_call(entry.tool, outcome)
        if (span := self._call_spans.pop(entry.id, None)) is not None:
            telemetry.end_span(span, outcome)

    def interrupt(self, reason: str, *, waiting: str | None = None) -> None:
        """End every unfinished call with `reason` (`waiting`: for a call still waiting for its approval)."""
        for entry in self.prompt.output:
            if isinstance(entry, ToolOutput) and (entry.result is None or isinstance(entry.result, ApprovalRequest)):
                self.end_call(entry, reason if entry.result is None else waiting or reason, "interrupted")

    def _unique_call_id(self, call_id: str) -> str:
        candidate, n = call_id or "call", 1
        while candidate in self._positions:
            n += 1
            candidate = f"{call_id}-{n}"
        return candidate

    # --- state ---------------------------------------------------------------------------------------

    def set_state(self, state: PromptState) -> None:
        self.prompt.state = state
        self.host.upsert_state(self.prompt)
        self.host.publish(StreamEvent(kind=EventKind.STATE_CHANGED, state=state))

    def publish_pending(self, waiting: bool, listed: Callable[[], list[PendingApproval]]) -> None:
        """Rewrite the memo's waiting calls when they changed (one `UpsertWorkflowProperties` event): what
        `AgentClient.pending` lists from visibility without asking the workflow. `waiting`: any call waits."""
        if not self._pending_memo and not waiting:
            return  # nothing was said and nothing waits: no event
        memo: dict[str, Any] = pending_memo(listed())
        if memo != self._pending_memo:
            self._pending_memo = memo
            self.host.upsert_memo(memo)

    def ignore(self, kind: str, problem: str) -> None:
        """What could not be applied (a refused signal, a correction, a spend not recorded): in the audit and the
        log, never raised (workflows/audit.py)."""
        record_ignored(self.prompt.audit, kind, problem, at=self.host.now(), logger=self.host.logger)

    def failure_details(self) -> tuple[Prompt, ...]:
        """The details of the failure that ends a failed prompt's workflow: its record, unless it is too large
        (then a client queries it)."""
        if len(self.prompt.model_dump_json()) > MAX_FAILURE_RECORD_CHARS:
            return ()
        return (self.prompt,)

    def finished(self, state: PromptState) -> None:
        """The end, as the Temporal UI, the metrics and the prompt's span tell it."""
        self.host.set_details(details.finished(self.prompt))
        self.host.metrics.prompt_finished(state)
        telemetry.log_step("prompt finished", self.prompt.id, state=state, rounds=self.prompt.rounds)
        if self.span is not None:
            self.span.set_attributes({"dagent.prompt.state": state, "dagent.prompt.rounds": self.prompt.rounds})
            if state == "failed":
                telemetry.mark_failed(self.span, self.prompt.error or "failed")
