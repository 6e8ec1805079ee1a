"""Unit tests of PromptWorkflow's rooms (workflows/prompt/: record, approvals, decision checks, sub-agents, round
inputs, tool runner, steering; workflows/budget/gate.py): plain objects on a plain host, no Temporal server, no
workflow. They run in seconds."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Generator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from durable_agent.agent.models import Prompt, Usage
from durable_agent.workflows.activity_refs import ActivityRef
from durable_agent.workflows.prompt.context import PromptContext
from durable_agent.workflows.prompt.record import Recorder
from durable_agent.workflows.protocol import PromptRequest, StreamEvent

WAIT_TURNS = 50  # event-loop turns a wait lets other tasks (a decision, a message) run before its timer fires


class CountingMetrics:
    """The agent's counters as calls recorded in a list (telemetry.WorkflowMetrics needs a workflow's meter)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def model_round(self, model: str, usage: Usage) -> None:
        self.calls.append(("model_round", (model,)))

    def tool_call(self, tool: str, outcome: str) -> None:
        self.calls.append(("tool_call", (tool, outcome)))

    def approval_requested(self, tool: str) -> None:
        self.calls.append(("approval_requested", (tool,)))

    def approval_decided(self, tool: str, decision: str, waited: timedelta) -> None:
        self.calls.append(("approval_decided", (tool, decision)))

    def prompt_finished(self, state: str) -> None:
        self.calls.append(("prompt_finished", (state,)))


class ChildDone:
    """A child prompt the plain host 'started': its run id, and its record when awaited."""

    def __init__(self, prompt: Prompt) -> None:
        self.first_execution_run_id: str | None = f"run-of-{prompt.id}"
        self._prompt = prompt

    def __await__(self) -> Generator[Any, Any, Prompt]:
        yield from asyncio.sleep(0).__await__()
        return self._prompt


class PlainHost:
    """A test double of the running workflow (workflows/prompt/host.py WorkflowHost): these are unit tests of the
    rooms' logic, with no workflow and no server; tests/temporal run the same rooms on the real host. A clock the
    test moves (a wait whose condition stays false for WAIT_TURNS turns of the event loop times out: the clock
    moves past its timeout), fixed ids, activities answered by the test's functions (`answers`, by activity name),
    child prompts by `child`, background work run as asyncio tasks (closed unrun outside an event loop), and the
    effects on Temporal kept in lists to assert on."""

    def __init__(self) -> None:
        self.clock = datetime(2026, 1, 1, tzinfo=UTC)
        self.workflow_id = "wf-1"
        self.run_id = "run-1"
        self.metrics = CountingMetrics()
        self.logger = logging.getLogger("tests.plain_host")
        self.events: list[StreamEvent] = []
        self.states: list[str] = []
        self.memos: list[dict[str, Any]] = []
        self.details: list[str] = []
        self.answers: dict[str, Callable[[Any], Any]] = {}  # activity name -> its result (or raises) for an input
        self.ran: list[tuple[str, Any, dict[str, Any]]] = []  # activities run: name, input, options
        self.timers: list[str | None] = []  # timers that fired (their summaries)
        self.signals: list[tuple[str, str, object]] = []  # workflow id, signal, argument
        self.child: Callable[[PromptRequest], Prompt] | None = None
        self.started: list[tuple[PromptRequest, str]] = []  # child prompts: request, workflow id
        self.background: list[asyncio.Task[None]] = []
        self.spawned = 0  # background work started (run, or closed outside an event loop)
        self._uuids = 0

    def now(self) -> datetime:
        return self.clock

    def random_id(self) -> str:
        self._uuids += 1
        return f"uuid-{self._uuids}"

    def publish(self, event: StreamEvent) -> None:
        self.events.append(event)

    def upsert_state(self, prompt: Prompt) -> None:
        self.states.append(prompt.state)

    def upsert_memo(self, memo: dict[str, Any]) -> None:
        self.memos.append(memo)

    def set_details(self, details: str) -> None:
        self.details.append(details)

    async def run_activity(self, activity: ActivityRef[Any, Any], arg: Any, **options: Any) -> Any:
        self.ran.append((activity.name, arg, options))
        result = self.answers[activity.name](arg)
        return await result if inspect.isawaitable(result) else result

    async def wait(self, condition: Callable[[], bool], timeout: timedelta | None = None,
                   summary: str | None = None) -> bool:
        for _ in range(WAIT_TURNS):
            if condition():
                return True
            await asyncio.sleep(0)
        if condition():
            return True
        assert timeout is not None, f"waits forever: nothing made its condition true ({summary})"
        await self.sleep(timeout, summary)
        return False

    async def sleep(self, duration: timedelta, summary: str | None) -> None:
        self.clock += duration
        self.timers.append(summary)

    async def start_child(self, request: PromptRequest, *, id: str, summary: str, memo: dict[str, Any]) -> ChildDone:
        assert self.child is not None, "this test starts no child prompt"
        self.started.append((request, id))
        return ChildDone(self.child(request))

    async def signal(self, workflow_id: str, signal: str, arg: object) -> None:
        self.signals.append((workflow_id, signal, arg))

    def spawn(self, work: Awaitable[None]) -> None:
        self.spawned += 1
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a synchronous test): background work is not run
            work.close()  # type: ignore[attr-defined]
            return
        self.background.append(loop.create_task(work))  # type: ignore[arg-type]

    async def settled(self) -> None:
        """The background work done (what it raised, raised here)."""
        while pending := [task for task in self.background if not task.done()]:
            await asyncio.gather(*pending)
        for task in self.background:
            task.result()


def context_of(host: PlainHost, request: PromptRequest | None = None, *, user_id: str = "owner") -> PromptContext:
    """A prompt `p1` of `user_id` running `request`, on `host`."""
    return PromptContext(request or PromptRequest(), Recorder(Prompt(id="p1", user_id=user_id), host))


def activity_failure(message: str, *details: object, type: str | None = None) -> ActivityError:
    """An activity's failure as a workflow sees it once its retries are spent: an `ActivityError` caused by the
    activity's own error."""
    error = ActivityError("Activity task failed", scheduled_event_id=5, started_event_id=6, identity="worker",
                          activity_type="dagent.x", activity_id="1", retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED)
    error.__cause__ = ApplicationError(message, *details, type=type)
    return error


def fails(error: BaseException) -> Callable[[Any], Any]:
    """An activity answer that raises `error`."""
    def answer(_: Any) -> Any:
        raise error
    return answer


@pytest.fixture
def host() -> PlainHost:
    return PlainHost()
