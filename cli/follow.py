"""Following a prompt live in the terminal: the timeline, a spinner that says what the prompt is doing or
waiting for, and approval questions asked one at a time (cli/questions.py) that go away by themselves when
someone else decides.

Events are read in the batches the prompt published them in (one workflow task's worth): a call recorded
and made pending in the same batch is printed once, as waiting, never first as running; and every call of a
batch of approvals is known before the first question is asked.

Colours and the spinner come from rich and degrade by themselves: no colour with NO_COLOR or on a dumb
terminal, no spinner when the output is not a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from rich.console import Console
from rich.status import Status
from rich.text import Text

from durable_agent.agent.models import ApprovalRequest, PromptOutput, ToolOutput
from durable_agent.cli.answer_line import discard_typed_ahead, owned_answer_line, questions_were_asked, typed_answer
from durable_agent.cli.render import decision_words, describe_output, state_words
from durable_agent.client import PromptHandle
from durable_agent.workflows.protocol import StreamEvent, TextDelta, ToolProgress

STATE_STYLES = {"waiting_for_approval": "bold yellow", "failed": "bold red", "cancelled": "yellow",
                "completed": "bold green", "stopped": "bold yellow", "running": "cyan"}


class LiveView:
    """Prints a prompt's events as a timeline and keeps a spinner with the current step below it."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.step = "starting"
        self.step_since = time.monotonic()
        self.progress = ""
        self.streamed: dict[int, int] = {}  # round -> characters of streamed text already printed
        self.streaming = False
        self.finished_rounds: set[int] = set()
        self.held: dict[int, ToolOutput] = {}  # calls just added: printed once we know they do not wait
        self.waiting: dict[str, tuple[int, ToolOutput]] = {}  # call id -> (index, entry): waiting for a decision
        self.waiting_since = time.monotonic()
        self.question: str | None = None  # the question on screen (lines printed meanwhile repeat it)
        self.not_yours: set[str] = set()  # calls whose answer here was not applied: someone else must decide
        self.tools: dict[str, str] = {}  # call id -> tool, of the calls printed (a sub-agent's question names it)

    def _status_text(self) -> str:
        if self.waiting:
            elapsed = int(time.monotonic() - self.waiting_since)
            running = self.step.removeprefix("running ")
            doing = f" · {self.step}" if self.step.startswith("running") and all(
                entry.tool != running for _, entry in self.waiting.values()) else ""
            return f"{self.waiting_words()} ({elapsed}s){doing}"
        elapsed = int(time.monotonic() - self.step_since)
        progress = f" · {self.progress}" if self.progress else ""
        return f"{self.step} ({elapsed}s){progress}"

    def waiting_words(self) -> str:
        """`waiting for approval of payment.send (approvers: finance)` / `waiting for 3 approvals: a, b, c`."""
        entries = [entry for _, entry in sorted(self.waiting.values(), key=lambda item: item[0])]
        if len(entries) == 1:
            pending = entries[0].result
            who = f" (approvers: {', '.join(pending.approvers)})" \
                if isinstance(pending, ApprovalRequest) and pending.approvers else ""
            return f"waiting for {'someone who may decide' if entries[0].id in self.not_yours else 'approval of'} " \
                   f"{entries[0].tool}{who}"
        return f"waiting for {len(entries)} approvals: {', '.join(entry.tool for entry in entries)}"

    def set_step(self, step: str) -> None:
        if step != self.step:
            self.step, self.step_since, self.progress = step, time.monotonic(), ""
        self.refresh()

    def refresh(self) -> None:
        if self.status is not None:
            self.status.update(self._status_text())

    def start_spinner(self) -> None:
        if self.status is None and self.question is None and self.console.is_terminal \
                and not self.console.is_dumb_terminal:
            self.status = self.console.status(self._status_text(), spinner="dots")
            self.status.start()

    def stop_spinner(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    async def tick(self) -> None:
        """Keep the elapsed seconds moving."""
        while True:
            await asyncio.sleep(1)
            self.refresh()

    def wait_for(self, index: int, entry: ToolOutput) -> None:
        if not self.waiting:
            self.waiting_since = time.monotonic()
        self.waiting[entry.id] = (index, entry)
        self.refresh()

    def done_waiting(self, call_id: str) -> None:
        """A call was decided (or ended); a sub-agent call that ended takes its own calls' questions along."""
        for waiting_id in [w for w in self.waiting if w == call_id or w.startswith(f"{call_id}/")]:
            del self.waiting[waiting_id]
        self.refresh()

    def others_waiting(self, call_id: str) -> list[tuple[int, ToolOutput]]:
        return sorted((item for waiting_id, item in self.waiting.items() if waiting_id != call_id),
                      key=lambda item: item[0])

    def line(self, text: str | Text, style: str | None = None) -> None:
        if self.streaming:  # end the streamed text's line
            self.console.print()
            self.streaming = False
        if self.question is not None:
            self.console.print()  # leave the question's line; it is asked again below
        self.console.print(text if isinstance(text, Text) else Text(text, style=style or ""))
        if self.question is not None:  # asked again with what was typed so far: the answer is what shows
            self.console.print(Text(self.question, style="bold"), Text(typed_answer()), sep="", end="")

    def entry(self, index: int, entry: PromptOutput) -> None:
        self.flush_held(before=index)
        style = ""
        if isinstance(entry, ToolOutput):
            self.tools[entry.id] = entry.tool
            result = entry.result
            style = ("red" if result is not None and result.type == "error" else
                     "yellow" if isinstance(result, ApprovalRequest) else "")
        self.line(Text(f"[{index}] ", style="dim").append(describe_output(entry), style=style))

    def flush_held(self, before: int | None = None) -> None:
        """Print the held calls as running (those recorded before `before`, or all)."""
        for index in sorted(self.held):
            if before is None or index < before:
                self.entry(index, self.held.pop(index))

    def delta(self, delta: TextDelta) -> None:
        if delta.kind == "reasoning":
            self.progress = f"thinking: {delta.text[-60:]}"
            self.refresh()
            return
        if delta.round in self.finished_rounds or self.question is not None:
            return  # the round's text follows as an entry anyway; a question on screen is not interrupted
        fresh = delta.past(self.streamed.get(delta.round, 0))
        if not fresh:
            return
        self.flush_held()
        self.stop_spinner()  # streamed text and a redrawn spinner line do not mix
        if not self.streaming:
            self.console.print(Text("…       ", style="dim"), end="")
        self.console.print(fresh, end="", markup=False, highlight=False)
        self.streaming = True
        self.streamed[delta.round] = delta.end

    def tool_progress(self, progress: ToolProgress) -> None:
        fraction = f" {progress.fraction:.0%}" if progress.fraction is not None else ""
        self.progress = f"{progress.message}{fraction}"
        if self.status is None and self.question is None:
            self.flush_held()
            self.line(f"        … {progress.tool}: {progress.message}{fraction}", style="dim")
        self.refresh()

    def decided_line(self, index: int, entry: ToolOutput) -> None:
        assert entry.decision is not None
        more = len(self.others_waiting(entry.id))
        self.line(Text.assemble((f"[{index}] ", "dim"), (f"{entry.tool} ", ""),
                                (decision_words(entry.decision, entry.input), "magenta"),
                                (f" · {more} more waiting" if more else "", "yellow")))

    def event(self, event: StreamEvent) -> None:
        if event.kind == "state_changed":
            style = STATE_STYLES.get(event.state or "", "")
            self.line(Text.assemble(("state   ", "dim"), (state_words(event.state), style)))
            if event.state == "running" and not self.step.startswith("running"):
                self.set_step("thinking")
            return
        entry = event.output
        if entry is None or event.index is None:
            return
        if event.kind == "approval_requested":
            if isinstance(entry, ToolOutput) and isinstance(entry.result, ApprovalRequest) and entry.decision is None:
                self.wait_for(event.index, entry)
            return
        if not isinstance(entry, ToolOutput):
            if entry.type == "text":
                self.finished_rounds.update(self.streamed)
            self.entry(event.index, entry)
            return
        self.held.pop(event.index, None)
        if entry.result is None and entry.decision is None:
            self.set_step(f"running {entry.tool}")
            if event.kind == "output_added":
                self.held[event.index] = entry  # "→ running" only if it does not go on to wait
            else:
                self.entry(event.index, entry)  # running for sure (a sub-agent's call, its prompt started)
            return
        if entry.decision is not None and (entry.result is None or isinstance(entry.result, ApprovalRequest)):
            self.done_waiting(entry.id)
            if entry.decision.decision == "approved":
                self.set_step(f"running {entry.tool}")
            self.decided_line(event.index, entry)
            return  # decided; the result follows
        if isinstance(entry.result, ApprovalRequest):
            self.wait_for(event.index, entry)
        else:
            self.done_waiting(entry.id)
            self.set_step("thinking")
        self.entry(event.index, entry)


_END = object()


async def _read_into(items: AsyncIterator[tuple[int | None, object]], queue: asyncio.Queue[object]) -> None:
    try:
        async for _, item in items:
            queue.put_nowait(item)
        queue.put_nowait(_END)
    except Exception as exc:
        queue.put_nowait(exc)


async def follow(handle: PromptHandle, console: Console, *, interactive: bool | None, approver: str,
                 from_offset: int = 0) -> str:
    """Print the prompt's events as they happen until it finishes. When calls wait for approval: ask about them
    one at a time (interactive; a question goes away when someone else decides it), print every waiting call
    and how to decide it and return "waiting_for_approval" (False), or just keep watching (None). Returns the
    last state seen."""
    from durable_agent.cli.questions import Asker

    view = LiveView(console)
    asker = Asker(handle, view, approver) if interactive else None
    state = "running"
    queue: asyncio.Queue[object] = asyncio.Queue()
    reader = asyncio.create_task(_read_into(handle.live(from_offset), queue))
    view.start_spinner()
    ticker = asyncio.create_task(view.tick())
    with owned_answer_line(console.file) if interactive else contextlib.nullcontext():
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty():  # the rest of what the prompt published with it
                    batch.append(queue.get_nowait())
                for item in batch:
                    if item is _END:
                        view.flush_held()
                        return state
                    if isinstance(item, BaseException):
                        raise item
                    if isinstance(item, TextDelta):
                        view.delta(item)
                    elif isinstance(item, ToolProgress):
                        view.tool_progress(item)
                    elif isinstance(item, StreamEvent):
                        if item.kind == "state_changed" and item.state:
                            state = item.state
                        if asker is not None:
                            await asker.before_event(item)
                        if asker is None or not asker.event(item):
                            view.event(item)
                view.flush_held()
                if interactive is False and view.waiting:
                    view.stop_spinner()
                    from durable_agent.cli.decision_hints import print_decision_commands

                    await print_decision_commands(view, handle)
                    return "waiting_for_approval"
                if asker is not None:
                    asker.gone()
                    asker.ask_waiting()
        finally:
            reader.cancel()
            ticker.cancel()
            if asker is not None:
                await asker.close()
            view.stop_spinner()
            if interactive:
                discard_typed_ahead()
                questions_were_asked()

