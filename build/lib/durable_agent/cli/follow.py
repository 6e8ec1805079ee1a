"""Following a prompt live in the terminal: the timeline, a spinner with the current step and tool progress,
and an approval question that goes away by itself when someone else decides.

Colours and the spinner come from rich and degrade by themselves: no colour with NO_COLOR or on a dumb
terminal, no spinner when the output is not a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time

from rich.console import Console
from rich.status import Status
from rich.text import Text

from durable_agent.agent.models import Decision, PromptOutput, ToolOutput, ToolPending
from durable_agent.cli.render import describe_output
from durable_agent.client import DecisionRefused, PromptHandle
from durable_agent.workflows.protocol import StreamEvent, TextDelta, ToolProgress

STATE_STYLES = {"waiting_for_approval": "bold yellow", "failed": "bold red", "cancelled": "yellow",
                "completed": "bold green", "running": "cyan"}


def decision_words(decision: Decision) -> str:
    by = f" by {decision.by}" if decision.by else ""
    reason = f": {decision.reason}" if decision.reason and decision.decision != "approved" else ""
    return f"{decision.decision}{by} at {decision.at:%H:%M:%S}{reason}"


class _Stdin:
    """Lines from stdin read on the event loop, so a question can be abandoned while it waits."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.eof = False

    async def line(self) -> str | None:
        while b"\n" not in self.buffer and not self.eof:
            data = await self._read()
            self.eof = not data
            self.buffer.extend(data)
        if not self.buffer:
            return None
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line.decode(errors="replace")

    @staticmethod
    async def _read() -> bytes:
        loop = asyncio.get_running_loop()
        fd = sys.stdin.fileno()
        ready: asyncio.Future[None] = loop.create_future()
        try:
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        except (PermissionError, OSError):  # a regular file: always readable, cannot be watched
            return os.read(fd, 4096)
        try:
            await ready
        finally:
            loop.remove_reader(fd)
        return os.read(fd, 4096)


_STDIN = _Stdin()


async def read_line() -> str | None:
    """One line from stdin without blocking the event loop; None at the end of input."""
    return await _STDIN.line()


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
        self.held: tuple[int, ToolOutput] | None = None  # a call just added: printed once we know if it waits

    # --- spinner ----------------------------------------------------------------------------------

    def _status_text(self) -> str:
        elapsed = int(time.monotonic() - self.step_since)
        progress = f" · {self.progress}" if self.progress else ""
        return f"{self.step} ({elapsed}s){progress}"

    def set_step(self, step: str) -> None:
        if step != self.step:
            self.step, self.step_since, self.progress = step, time.monotonic(), ""
        self.refresh()

    def refresh(self) -> None:
        if self.status is not None:
            self.status.update(self._status_text())

    def start_spinner(self) -> None:
        if self.status is None and self.console.is_terminal and not self.console.is_dumb_terminal:
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

    # --- lines ------------------------------------------------------------------------------------

    def line(self, text: str | Text, style: str | None = None) -> None:
        self._end_stream()
        self.console.print(text if isinstance(text, Text) else Text(text, style=style or ""))

    def _end_stream(self) -> None:
        if self.streaming:
            self.console.print()
            self.streaming = False

    def entry(self, index: int, entry: PromptOutput) -> None:
        text = Text(f"[{index}] ", style="dim")
        rendered = describe_output(entry)
        if isinstance(entry, ToolOutput):
            result = entry.result
            style = ("red" if result is not None and result.type == "error" else
                     "yellow" if isinstance(result, ToolPending) else "")
            text.append(rendered, style=style)
        else:
            text.append(rendered)
        self.line(text)

    def flush_held(self) -> None:
        if self.held is not None:
            index, entry = self.held
            self.held = None
            self.entry(index, entry)

    def delta(self, delta: TextDelta) -> None:
        if delta.kind == "reasoning":
            self.progress = f"thinking: {delta.text[-60:]}"
            self.refresh()
            return
        if delta.round in self.finished_rounds:
            return
        fresh = delta.past(self.streamed.get(delta.round, 0))
        if not fresh:
            return
        self.flush_held()
        if self.status is not None:
            self.stop_spinner()  # streamed text and a redrawn spinner line do not mix
        if not self.streaming:
            self.console.print(Text("…       ", style="dim"), end="")
        self.console.print(fresh, end="", markup=False, highlight=False)
        self.streaming = True
        self.streamed[delta.round] = delta.end

    def tool_progress(self, progress: ToolProgress) -> None:
        fraction = f" {progress.fraction:.0%}" if progress.fraction is not None else ""
        self.progress = f"{progress.message}{fraction}"
        if self.status is None:
            self.flush_held()
            self.line(f"        … {progress.tool}: {progress.message}{fraction}", style="dim")
        self.refresh()

    def event(self, event: StreamEvent) -> None:
        if event.kind == "state_changed":
            self.flush_held()
            self.line(Text.assemble(("state   ", "dim"), (event.state or "", STATE_STYLES.get(event.state or "", ""))))
            if event.state == "running":
                self.set_step("thinking")
            return
        if event.output is None or event.index is None or event.kind == "approval_requested":
            return
        entry = event.output
        if self.held is not None and self.held[0] != event.index:
            self.flush_held()
        if isinstance(entry, ToolOutput):
            if entry.result is None and event.kind == "output_added":
                self.held = (event.index, entry)  # "→ running" only if it does not go on to wait
                self.set_step(f"running {entry.tool}")
                return
            self.held = None
            if entry.decision is not None and (entry.result is None or isinstance(entry.result, ToolPending)):
                self.set_step(f"running {entry.tool}" if entry.result is None else "thinking")
                self.line(Text.assemble((f"[{event.index}] ", "dim"), (f"{entry.tool} ", ""),
                                        (decision_words(entry.decision), "magenta")))
                return  # decided; the result follows
            if entry.result is None:
                self.set_step(f"running {entry.tool}")
                return
            if isinstance(entry.result, ToolPending):
                self.set_step(f"waiting for approval of {entry.tool}")
            else:
                self.set_step("thinking")
        elif entry.type == "text":
            self.finished_rounds.update(self.streamed)
        self.entry(event.index, entry)


class Approver:
    """Asks the person at the terminal about a pending call, unless someone else decides first."""

    def __init__(self, handle: PromptHandle, view: LiveView, approver: str) -> None:
        self.handle = handle
        self.view = view
        self.approver = approver
        self.asking: dict[str, asyncio.Task[None]] = {}
        self.answered_elsewhere: set[str] = set()
        self.answered_here: set[str] = set()

    def ask(self, entry: ToolOutput) -> None:
        if entry.id not in self.asking:
            self.asking[entry.id] = asyncio.create_task(self._ask(entry))

    async def _ask(self, entry: ToolOutput) -> None:
        self.view.stop_spinner()
        reason = entry.result.reason if isinstance(entry.result, ToolPending) else ""
        self.view.line(Text.assemble(("approval needed: ", "bold yellow"), f"{entry.tool} ",
                                     json.dumps(entry.input, ensure_ascii=False), (f" — {reason}", "yellow")))
        self.view.console.print(Text(f"Approve {entry.tool}? [y/N]: ", style="bold"), end="")
        answer = await read_line()
        approved = (answer or "").strip().lower() in ("y", "yes")
        self.answered_here.add(entry.id)
        self.view.start_spinner()
        try:
            if approved:
                await self.handle.approve(entry.id, by=self.approver, wait=True)
            else:
                await self.handle.reject(entry.id, by=self.approver, reason="rejected at the terminal", wait=True)
        except DecisionRefused as exc:
            self.view.line(f"your answer was not applied: {exc}", style="yellow")

    def decided(self, entry: ToolOutput) -> bool:
        """The call was decided. If we were still asking, say who decided instead of waiting for an answer
        (True: said so)."""
        task = self.asking.get(entry.id)
        if task is None or task.done() or entry.decision is None or entry.id in self.answered_elsewhere \
                or entry.id in self.answered_here:
            return False
        task.cancel()
        self.answered_elsewhere.add(entry.id)
        self.view.console.print()
        self.view.line(Text.assemble(("answered elsewhere: ", "bold magenta"),
                                     f"{entry.tool} {decision_words(entry.decision)} — no answer needed"))
        self.view.start_spinner()
        return True

    async def close(self) -> None:
        for task in self.asking.values():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def follow(handle: PromptHandle, console: Console, *, interactive: bool | None, approver: str,
                 from_offset: int = 0) -> str:
    """Print the prompt's events as they happen until it finishes. On an approval request: ask (interactive,
    and the question resolves itself if someone else decides), print how to decide and return
    "waiting_for_approval" (False), or just keep watching (None). Returns the last state seen."""
    view = LiveView(console)
    asker = Approver(handle, view, approver)
    state = "running"
    view.start_spinner()
    ticker = asyncio.create_task(view.tick())
    try:
        async for _, item in handle.live(from_offset):
            if isinstance(item, TextDelta):
                view.delta(item)
                continue
            if isinstance(item, ToolProgress):
                view.tool_progress(item)
                continue
            if item.kind == "state_changed" and item.state:
                state = item.state
            entry = item.output
            if isinstance(entry, ToolOutput) and item.kind == "output_updated" and entry.decision is not None \
                    and asker.decided(entry):
                view.set_step(f"running {entry.tool}")
                continue  # the "answered elsewhere" line said who decided
            view.event(item)
            if not isinstance(entry, ToolOutput) or item.kind != "approval_requested":
                continue
            if interactive:
                asker.ask(entry)
            elif interactive is False:
                view.stop_spinner()
                print_decision_commands(view, handle.id, entry.id)
                return "waiting_for_approval"
        view.flush_held()
        return state
    finally:
        ticker.cancel()
        await asker.close()
        view.stop_spinner()


def print_decision_commands(view: LiveView, prompt_id: str, call_id: str) -> None:
    view.line("The prompt is waiting for approval. Decide with one of:", style="yellow")
    view.line(f"  dagent approve {prompt_id} {call_id}")
    view.line(f"  dagent reject {prompt_id} {call_id} --reason 'not now'")
    view.line(f"  temporal workflow signal -w {prompt_id} --name approve "
              f"--input '{{\"tool_call_id\": \"{call_id}\"}}'")
