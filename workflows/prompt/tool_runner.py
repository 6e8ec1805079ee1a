"""Tool execution: a response's calls run as activities (a sub-agent's as a child prompt), side by side within
the limits the calls set, each entry resolved in place as it finishes; side outputs and state changes enter the
record in the model's order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from itertools import groupby

from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from durable_agent.agent.errors import PromptFailedError
from durable_agent.agent.models import ScheduledPrompt, ToolError, ToolOutput, ToolSuccess
from durable_agent.workflows import details, telemetry
from durable_agent.workflows.activity_refs import INVOKE_TOOL, TOOL_THEN_MODEL
from durable_agent.workflows.failures import failure_reason, is_cancellation
from durable_agent.workflows.prompt.context import PromptContext, Room
from durable_agent.workflows.prompt.round_input import MODEL_TIMEOUT
from durable_agent.workflows.prompt.sub_agents import SubAgents
from durable_agent.workflows.protocol import (
    PlannedCall,
    RoundInput,
    RoundResult,
    ToolInvocation,
    ToolInvocationResult,
    ToolThenModel,
)

INFRASTRUCTURE_ATTEMPTS = 5  # extra tool attempts for worker crashes/timeouts, beyond the tool's own
SKIPPED_BY_STEER = "Skipped: the user sent a new message before this call ran."


def fail_if_fatal(call: PlannedCall, outcome: ToolInvocationResult) -> None:
    if isinstance(outcome.result, ToolError) and call.options.failure_mode == "fail":
        raise PromptFailedError(f"tool '{call.tool}' failed: {outcome.result.error}")


class ToolRunner(Room):
    """`steered`: a user message arrived (calls not started yet are skipped). `failed_tools`: tools whose calls
    ended in an error since the last model round."""

    def __init__(self, context: PromptContext, children: SubAgents, *, steered: Callable[[], bool]) -> None:
        super().__init__(context)
        self._prompt = context.prompt
        self._children = children
        self._steered = steered
        self.failed_tools: list[str] = []

    async def run(self, calls: list[tuple[ToolOutput, PlannedCall]]) -> None:
        """Run calls side by side; a failure that fails the prompt is raised in the model's order."""
        self.fail_in_order(calls, await self.run_side_by_side(calls))

    async def run_side_by_side(self, calls: list[tuple[ToolOutput, PlannedCall]]) -> dict[str, ToolInvocationResult]:
        """Run calls concurrently (at most `max_parallel_tools` at once; a `sequential` call runs alone).
        Each entry gets its result in place as it finishes; a steer skips the calls not started yet. Side
        outputs and state changes enter the record as calls finish, in the model's order (a call's outputs wait
        for those of the calls before it that still run, never for anything else)."""
        limit = asyncio.Semaphore(self._request.max_parallel_tools or max(len(calls), 1))
        outcomes: dict[str, ToolInvocationResult] = {}
        ended: set[str] = set()
        recorded = 0  # calls[:recorded] have their side outputs in the record

        def record_finished() -> None:
            nonlocal recorded
            while recorded < len(calls) and calls[recorded][0].id in ended:
                entry, call = calls[recorded]
                if entry.id in outcomes:
                    self.record_outcome(call, outcomes[entry.id])
                recorded += 1

        async def run(entry: ToolOutput, call: PlannedCall) -> None:
            async with limit:
                if self._steered():
                    self._record.end_call(entry, SKIPPED_BY_STEER, "skipped")
                else:
                    outcomes[entry.id], _ = await self.execute(entry, call, entry.input)
            ended.add(entry.id)
            record_finished()

        # Groups run one after another: each run of calls that are not sequential, and each sequential call alone.
        for _, grouped in groupby(enumerate(calls), key=lambda n: n[0] if n[1][1].options.sequential else -1):
            group = [entry_call for _, entry_call in grouped]
            await asyncio.gather(*(run(entry, call) for entry, call in group))
            if any(call.options.failure_mode == "fail" and isinstance(outcomes[entry.id].result, ToolError)
                   for entry, call in group if entry.id in outcomes):
                break  # the prompt fails: later calls are not started
        return outcomes

    @staticmethod
    def fail_in_order(calls: list[tuple[ToolOutput, PlannedCall]], outcomes: dict[str, ToolInvocationResult]) -> None:
        """The first call, in the model's order, whose failure fails the prompt, whatever order they finished in."""
        for entry, call in calls:
            if entry.id in outcomes:
                fail_if_fatal(call, outcomes[entry.id])

    async def invoke(self, entry: ToolOutput, call: PlannedCall, arguments: object,
                     then: RoundInput | None = None) -> RoundResult | None:
        """Run one call and record its outcome. `then`: the next model round's input, run after the call in the
        same activity; that round's result, or None when the workflow must call the model itself."""
        outcome, next_round = await self.execute(entry, call, arguments, then)
        self.record_outcome(call, outcome)
        fail_if_fatal(call, outcome)
        return next_round

    async def execute(self, entry: ToolOutput, call: PlannedCall, arguments: object,
                      then: RoundInput | None = None) -> tuple[ToolInvocationResult, RoundResult | None]:
        """Run one call's activity (`then`: with the next model round); the entry gets its result in place as soon
        as it finishes."""
        with telemetry.within(self._record.call_span(entry.id)):
            outcome, next_round = await self._execute_call(entry, call, arguments, then)
        self._record.close_call(entry, "success" if isinstance(outcome.result, ToolSuccess) else "error")
        return outcome, next_round

    async def _execute_call(self, entry: ToolOutput, call: PlannedCall, arguments: object,
                            then: RoundInput | None = None) -> tuple[ToolInvocationResult, RoundResult | None]:
        """The call's activity (`then`: with the next model round after it, in one activity)."""
        entry.started_at = self._host.now()
        if call.agent is not None:
            outcome = await self._children.run(entry, call, arguments)
            self._record.resolve(entry, outcome.result)
            return outcome, None
        invocation = self._tool_invocation(entry, call, arguments)
        options = call.options
        retry = RetryPolicy(initial_interval=timedelta(seconds=1),
                            maximum_attempts=options.max_attempts + INFRASTRUCTURE_ATTEMPTS)
        timeout = options.timeout
        self._host.set_details(details.running_tool(self._prompt.rounds, entry))
        summary = details.cut_at_word(f"tool {call.tool} {details.compact_args(arguments)}", 100)
        if entry.decision is not None:
            summary += f" · {details.decided(entry.decision)}"
        next_round: RoundResult | None = None
        try:
            # With the next model round: a regular call, or a fast tool's call that would otherwise run local.
            if then is not None:
                fused = await self._host.run_activity(
                    TOOL_THEN_MODEL, ToolThenModel(
                        call=invocation, tool_timeout_seconds=timeout.total_seconds(),
                        entry_index=self._record.index(entry), round=then,
                        stop_on_error=options.failure_mode == "fail"),
                    start_to_close_timeout=timeout + MODEL_TIMEOUT,
                    heartbeat_timeout=options.heartbeat_timeout, retry_policy=retry,  # the model part beats every 0.5 s
                    summary=f"{summary} · then model round {then.round}")
                outcome, next_round = fused.tool, fused.round
            else:
                outcome = await self._host.run_activity(
                    INVOKE_TOOL, invocation, start_to_close_timeout=timeout,
                    heartbeat_timeout=options.heartbeat_timeout, retry_policy=retry, summary=summary,
                    local=bool(options.local))
        except ActivityError as exc:
            if is_cancellation(exc):
                raise
            outcome = ToolInvocationResult(result=ToolError(error=f"Tool call failed: {failure_reason(exc)}"))
        self._record.resolve(entry, outcome.result)
        return outcome, next_round

    def _tool_invocation(self, entry: ToolOutput, call: PlannedCall, arguments: object) -> ToolInvocation:
        plugin_state = self._prompt.plugin_state.get(call.plugin) if call.plugin else None
        prompt = self._prompt
        return ToolInvocation(
            id=entry.id, tool=call.tool, plugin=call.plugin, input=arguments, user_id=prompt.user_id,  # type: ignore[arg-type]
            conversation_id=prompt.conversation_id, plugin_state=plugin_state, max_attempts=call.options.max_attempts,
            prompt_id=prompt.id,
            conversation_schedule=self._request.conversation_schedule)

    def record_outcome(self, call: PlannedCall, outcome: ToolInvocationResult) -> None:
        """A finished call's side outputs (right after what is recorded so far) and its plugin's new state."""
        if isinstance(outcome.result, ToolError):
            self.failed_tools.append(call.tool)
        for side_output in outcome.side_outputs:
            if isinstance(side_output, ScheduledPrompt):  # for the conversation (Prompt.scheduled), not displayed
                if isinstance(outcome.result, ToolSuccess):
                    self._prompt.scheduled.append(side_output)
                continue
            self._record.append(side_output)
        if outcome.state_changed and call.plugin:
            self._prompt.plugin_state[call.plugin] = outcome.plugin_state
