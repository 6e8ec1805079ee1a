"""Approval questions at the terminal, one at a time.

The calls waiting for a decision (`LiveView.waiting`, fed by the prompt's events) are asked about in record
order, one question on screen at a time, each naming the call's index, tool, arguments and reason and how
many more wait. The answer is sent for exactly the call asked (an update, so a refusal is said at once).
When someone else decides the call on screen, the question goes away saying who decided and how; what was
typed for it is discarded, so it never answers the next question nor reaches the shell. A sub-agent's call
(`<call>/<its call>`) is decided in the sub-agent's prompt, so its question reads that prompt while it is
on screen and goes away the same way as soon as the decision is there. The answer line is the program's
(cli/follow.py `owned_answer_line`): a line printed while the person types asks the question again with what
was typed, so the answer applied is the one on screen.
"""

from __future__ import annotations

import asyncio
import contextlib

from rich.text import Text

from durable_agent.agent.models import ApprovalRequest, ToolOutput
from durable_agent.agent.period_budgets import MORE_BUDGET_TOOL
from durable_agent.agent.stops import people_words
from durable_agent.cli import api_decisions
from durable_agent.cli.answer_line import discard_typed_ahead, read_answer
from durable_agent.cli.follow import LiveView
from durable_agent.cli.hints import refused_roles
from durable_agent.cli.render import decision_words, short
from durable_agent.client import DecisionRefused, PromptHandle
from durable_agent.workflows.protocol import StreamEvent

REJECTED_AT_THE_TERMINAL = "rejected at the terminal"
DECIDED_ALREADY = frozenset({"already-decided", "not-pending", "prompt-finished", "unknown-tool-call"})
OTHERS_ARGS_CHARS = 60
SUB_AGENT_POLL_SECONDS = 0.5  # how often a question about a sub-agent's call reads the sub-agent's record


def _listed(calls: list[tuple[int, ToolOutput]]) -> str:
    return ", ".join(f"{f'[{i}] ' if '/' not in call.id else ''}{call.tool} {short(call.input, OTHERS_ARGS_CHARS)}"
                     + (f" ({call.id})" if "/" in call.id else "") for i, call in calls)


class Asker:
    """Asks the person at the terminal about each waiting call in turn, unless someone else decides first."""

    def __init__(self, handle: PromptHandle, view: LiveView, approver: str) -> None:
        self.handle = handle
        self.view = view
        self.approver = approver
        self.asked: set[str] = set()  # asked already (answered, withdrawn or refused): never asked again
        self.current: str | None = None  # the call whose question is on screen
        self.reading: asyncio.Task[str | None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.answering: set[str] = set()  # answered here (sent, or being sent)
        self.said: set[str] = set()  # ... whose decision line is printed: from its event or the update's answer
        self._sub_agents: dict[tuple[str, ...], PromptHandle] = {}  # a sub-agent call's path -> its prompt

    def ask_waiting(self) -> None:
        """Start asking if a call waits that was not asked about yet (after each batch of events)."""
        if (self.task is None or self.task.done()) and self._next() is not None:
            self.task = asyncio.create_task(self._run())

    def _next(self) -> tuple[int, ToolOutput] | None:
        unasked = [item for call_id, item in self.view.waiting.items() if call_id not in self.asked]
        for index, entry in sorted(unasked, key=lambda item: item[0]):
            if entry.tool == MORE_BUDGET_TOOL:  # never asked here: see _not_for_you
                self._not_for_you(index, entry)
        unasked = [item for item in unasked if item[1].id not in self.asked]
        return min(unasked, key=lambda item: item[0]) if unasked else None

    def _not_for_you(self, index: int, entry: ToolOutput) -> None:
        """A request for more budget is never asked at the terminal: the person there is the prompt's own user,
        whom the four-eyes rule never lets grant their own budget. Say whom the prompt waits for instead."""
        self.asked.add(entry.id)
        self.view.not_yours.add(entry.id)
        pending = entry.result
        approvers = list(pending.approvers or ()) if isinstance(pending, ApprovalRequest) else []
        reason = pending.reason if isinstance(pending, ApprovalRequest) else ""
        self.view.line(Text.assemble(
            ("budget spent: ", "bold yellow"), (f"[{index}] ", "dim"), f"{reason}. ",
            ("waiting for ", "yellow"), (people_words(approvers) or "an approver", "bold"),
            (" to grant more (nobody grants their own budget); they decide with ", "yellow"),
            f"`dagent approve {self.handle.id} {entry.id}` or in the inbox"))

    async def _run(self) -> None:
        while (following := self._next()) is not None:
            index, entry = following
            self.asked.add(entry.id)
            answer = await self._question(index, entry)
            if answer is not None:
                await self._send(index, entry, approved=answer)
        self._nothing_left_to_ask()

    def _nothing_left_to_ask(self) -> None:
        """Every waiting call was asked, and some still wait because the answer given here was not applied:
        say who the prompt waits for and how to leave, so the terminal does not follow for ever in silence."""
        left = [(i, entry) for call_id, (i, entry) in sorted(self.view.waiting.items(), key=lambda item: item[1][0])
                if call_id in self.view.not_yours]
        if not left:
            return
        who = sorted({a for _, entry in left if isinstance(entry.result, ApprovalRequest)
                      for a in entry.result.approvers or ()})
        approvers = f" (approvers: {', '.join(who)})" if who else ""
        self.view.line(Text.assemble(
            ("nothing left to ask you: ", "bold yellow"), _listed(left),
            f" {'waits' if len(left) == 1 else 'wait'} for someone who may decide{approvers}; "
            f"Ctrl-C leaves the prompt waiting (`dagent watch {self.handle.id}` follows it again)"))
        self.view.refresh()

    async def _question(self, index: int, entry: ToolOutput) -> bool | None:
        """True/False: the answer; None: the question was withdrawn (decided elsewhere)."""
        view = self.view
        view.stop_spinner()
        discard_typed_ahead()  # keys typed before the question was on screen are not its answer
        reason = entry.result.reason if isinstance(entry.result, ApprovalRequest) else ""
        parent = entry.id.split("/", 1)[0] if "/" in entry.id else None
        asker = (f" (asked by the {view.tools.get(parent, 'sub-agent')} sub-agent of [{index}], call {entry.id})"
                 if parent else "")
        view.line(Text.assemble(("approval needed: ", "bold yellow"), ("" if parent else f"[{index}] ", "dim"),
                                f"{entry.tool} ", short(entry.input), (f" — {reason}", "yellow"), (asker, "dim")))
        others = view.others_waiting(entry.id)
        after = [(i, other) for i, other in others if other.id not in self.asked]  # asked next, in this order
        also = [(i, other) for i, other in others if other.id in self.asked]  # asked already, answer not applied
        if after:
            view.line(Text.assemble((f"  {len(after)} more waiting after this one: ", "yellow"),
                                    (_listed(after), "dim")))
        if also:
            view.line(Text.assemble(("  also waiting, for someone who may decide: ", "yellow"),
                                    (_listed(also), "dim")))
        view.question = f"Approve {entry.tool}? [y/N]: "
        view.console.print(Text(view.question, style="bold"), end="")
        self.current = entry.id
        self.reading = asyncio.create_task(read_answer(view.console.file))
        # A sub-agent's call is decided in the sub-agent's prompt: its decision is not an event of this one
        # (this prompt hears only when the call ends), so the question watches that prompt while it is asked.
        watching = asyncio.create_task(self._watch_sub_agent(entry.id)) if "/" in entry.id else None
        try:
            await asyncio.wait({self.reading})
        finally:
            view.question = None
            self.current = None
            if watching is not None:
                watching.cancel()
        if self.reading.cancelled():
            discard_typed_ahead()  # a half-typed answer to the withdrawn question
            view.start_spinner()
            return None
        answer = self.reading.result()
        return (answer or "").strip().lower() in ("y", "yes")

    async def _send(self, index: int, entry: ToolOutput, *, approved: bool) -> None:
        """Decide the call asked; say so at once (before the next question), from the update's answer."""
        self.view.start_spinner()
        self.answering.add(entry.id)
        try:
            if approved:  # through the HTTP API when DAGENT_API_URL/DAGENT_API_KEY say so (signed decisions)
                decided = await api_decisions.approve(self.handle, entry.id, by=self.approver, warn=self._warn)
            else:
                decided = await api_decisions.reject(self.handle, entry.id, by=self.approver,
                                                     reason=REJECTED_AT_THE_TERMINAL, warn=self._warn)
        except (DecisionRefused, ValueError) as exc:  # ValueError: DAGENT_API_URL without DAGENT_API_KEY, or so
            roles = refused_roles(str(exc))
            as_role = "".join(f" --role {role}" for role in roles[:1])
            hint = (f"; if you hold the {roles[0]} role: `dagent approve {self.handle.id} {entry.id} "
                    f"--by {self.approver}{as_role}`") if roles else ""
            self.view.line(f"your answer was not applied: {exc}{hint}", style="yellow")
            if getattr(exc, "kind", None) not in DECIDED_ALREADY:  # else its decision event follows
                self.view.not_yours.add(entry.id)
            self.view.refresh()  # the spinner says the call still waits (and for whom)
            return
        self.view.done_waiting(entry.id)
        if decided is not None and decided.decision is not None and entry.id not in self.said:
            self.said.add(entry.id)
            self.view.decided_line(index, decided)

    def _warn(self, text: str) -> None:
        self.view.line(f"warning: {text}", style="yellow")

    def event(self, event: StreamEvent) -> bool:
        """The call on screen was decided by someone else: withdraw the question, saying who decided and how
        (True: said so; the event needs no other line)."""
        entry = event.output
        if event.kind != "output_updated" or not isinstance(entry, ToolOutput) or entry.decision is None:
            return False
        if entry.id in self.answering and (entry.result is None or isinstance(entry.result, ApprovalRequest)):
            if entry.id in self.said:
                return True  # the decision taken here: said already
            self.said.add(entry.id)
            return False
        return self._withdraw(entry)

    def _withdraw(self, entry: ToolOutput) -> bool:
        """`entry` (decided) is the call on screen: take the question away, saying who decided and how."""
        if entry.decision is None or entry.id != self.current or self.reading is None or self.reading.done():
            return False
        self.current = None  # withdrawn now: later events of the same batch are not about the question
        self.view.done_waiting(entry.id)
        self.view.question = None
        self.view.console.print()  # end the question's line
        self.view.line(Text.assemble(("answered elsewhere: ", "bold magenta"),
                                     f"{entry.tool} {decision_words(entry.decision, entry.input)} — no answer needed"))
        self.reading.cancel()
        return True

    async def _watch_sub_agent(self, call_id: str) -> None:
        """While the question about a sub-agent's call (`<call>/<its call>`) is on screen, read the prompt that
        waits for it (queries: nothing is written) until someone decides it there or through this prompt —
        perhaps before the question was even asked."""
        while self.current == call_id:
            found = await self._sub_agent_call(call_id)
            if found is not None and found.decision is not None:
                if call_id not in self.answering:
                    self._withdraw(found.model_copy(update={"id": call_id}))
                return
            await asyncio.sleep(SUB_AGENT_POLL_SECONDS)

    async def before_event(self, event: StreamEvent) -> None:
        """The sub-agent call whose own call is on screen has ended: one last read of the sub-agent's record
        first, so a decision taken there is said as such (answered elsewhere) before the call's result prints,
        not left for the question to vanish as "no longer waits"."""
        entry, current = event.output, self.current
        if current is None or not isinstance(entry, ToolOutput) or not current.startswith(f"{entry.id}/") \
                or entry.result is None or isinstance(entry.result, ApprovalRequest) or current in self.answering:
            return
        found = await self._sub_agent_call(current)
        if found is not None and found.decision is not None and self.current == current:
            self._withdraw(found.model_copy(update={"id": current}))

    async def _sub_agent_call(self, call_id: str) -> ToolOutput | None:
        """A sub-agent's call (`<call>/<its call>`) as the sub-agent's record has it; None when unreadable now."""
        *path, own_id = call_id.split("/")
        try:
            waiting = self._sub_agents.get(tuple(path)) or await self._sub_agent_prompt(path)
            if waiting is not None:  # found once: later reads are one query each
                self._sub_agents[tuple(path)] = waiting
            return (await waiting.get()).tool_call(own_id) if waiting is not None else None
        except Exception:  # a moment without a worker: ask again
            return None

    async def _sub_agent_prompt(self, path: list[str]) -> PromptHandle | None:
        """The prompt of the sub-agent that `path` (this prompt's call, its sub-agent's call, ...) leads to."""
        handle = self.handle
        for call in path:
            entry = (await handle.get()).tool_call(call)
            if entry is None or entry.child_prompt_id is None:
                return None
            handle = handle.other(entry.child_prompt_id)
        return handle

    def gone(self) -> None:
        """The call on screen no longer waits (its sub-agent's call ended, say): take the question away."""
        if self.current is not None and self.current not in self.view.waiting \
                and self.reading is not None and not self.reading.done():
            self.current = None
            self.view.question = None
            self.view.console.print()  # end the question's line
            self.view.line("no answer needed: the call no longer waits", style="magenta")
            self.reading.cancel()

    async def close(self) -> None:
        if self.current is not None and self.reading is not None and not self.reading.done():
            self.view.console.print()  # end the question's line: what follows is not its answer
        for task in (self.reading, self.task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
