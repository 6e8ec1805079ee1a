"""`dagent.tool_then_model`: a round's only tool call, then the next model round, in one activity.

A round whose model asked for one call that runs now costs the prompt two activities and two workflow tasks
when run apart (a local activity and an activation for a fast tool's call); here it costs one of each. The tool
runs exactly as `dagent.invoke_tool` runs it (hooks, heartbeats, retries). Its result is then checkpointed in the
heartbeat details, carried by the activity's next liveness heartbeat (0.8 x its heartbeat timeout after the last),
so that a retry after a worker dies later in the model call returns it without running the tool again; a worker
that dies before that beat leaves a retry that runs the tool again (with the same `ctx.idempotency_key`), as a
crash before any activity's completion is reported does. A checkpoint sent at once would cost every round a
heartbeat, a billable action: as many as the fused activity saves. The model part is
best effort: when it cannot run here (this worker lacks the transcript, the model failed, the worker is draining, a
result too large to checkpoint) the activity returns the tool's result alone and the workflow calls the model
as it always does, with its own retries and fallbacks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent.activities.heartbeats import LiveDetails, bound_log, heartbeating
from durable_agent.activities.model_round import ModelRoundActivity
from durable_agent.activities.tool_calls import ToolActivities
from durable_agent.agent.models import ScheduledPrompt, ToolError, ToolOutput
from durable_agent.workflows.names import TOOL_THEN_MODEL_ACTIVITY, TOOL_TIMED_OUT_ERROR
from durable_agent.workflows.protocol import (
    OutputChange,
    RoundInput,
    ToolInvocationResult,
    ToolThenModel,
    ToolThenModelResult,
)

CHECKPOINT_KEY = "tool_result"  # the heartbeat detail that holds the finished tool's result (its JSON)
# Every heartbeat of the model part carries the checkpoint (each replaces the last details): a larger result would
# weigh on every beat, so its round goes back to the workflow (the result reaches the model by reference).
CHECKPOINT_MAX_BYTES = 16 * 1024


class ToolThenModelActivity(ToolActivities, ModelRoundActivity):
    """The tool activity's and the model round activity's code, run one after the other."""

    @activity.defn(name=TOOL_THEN_MODEL_ACTIVITY)
    async def tool_then_model(self, inp: ToolThenModel) -> ToolThenModelResult:
        logger = bound_log(prompt_id=inp.round.prompt.id, tool=inp.call.tool, tool_call_id=inp.call.id,
                           round=inp.round.round)
        checkpointed = _checkpoint(activity.info().heartbeat_details)
        if checkpointed is not None:
            logger.info("tool already ran in an earlier attempt; its result is returned, the model is not called")
            return ToolThenModelResult(tool=checkpointed, skipped="the tool ran in an earlier attempt")
        try:
            async with asyncio.timeout(inp.tool_timeout_seconds):  # what start_to_close is to `dagent.invoke_tool`
                outcome = await self.invoke_tool(inp.call)
        except TimeoutError as exc:
            logger.warning("tool timed out", timeout_seconds=inp.tool_timeout_seconds)
            raise ApplicationError(f"the tool did not finish within its timeout ({inp.tool_timeout_seconds:g} s)",
                                   type=TOOL_TIMED_OUT_ERROR) from exc
        if inp.stop_on_error and isinstance(outcome.result, ToolError):
            return ToolThenModelResult(tool=outcome, skipped="the tool failed and its failure ends the prompt")
        if activity.is_worker_shutdown():  # draining: hand the round back now rather than hold the drain for it
            return ToolThenModelResult(tool=outcome, skipped="this worker is shutting down")
        round_input = round_after_tool(inp, outcome)
        if round_input is None:
            return ToolThenModelResult(tool=outcome, skipped="the call's entry is not in the round's input")
        checkpoint = outcome.model_dump_json()
        if len(checkpoint) > CHECKPOINT_MAX_BYTES:
            return ToolThenModelResult(tool=outcome, skipped="the tool's result is too large to checkpoint")
        live = LiveDetails(checkpoint={CHECKPOINT_KEY: checkpoint})
        try:
            async with heartbeating(live, self.runtime.live_every):
                result = await self._model_round(round_input, live)
        except Exception as exc:  # the workflow calls the model itself, with the round activity's retries
            logger.info("model not called after the tool; the workflow calls it", error=str(exc)[:200])
            return ToolThenModelResult(tool=outcome, skipped=f"{type(exc).__name__}: {str(exc)[:200]}")
        return ToolThenModelResult(tool=outcome, round=result)


def round_after_tool(inp: ToolThenModel, outcome: ToolInvocationResult) -> RoundInput | None:
    """The next round's input as the workflow will hold it once it records `outcome`: the call's entry with its
    result, then its side outputs (scheduled prompts are not entries), and the plugin's new state. None when the
    entry is not among the input's changes (nothing to resolve)."""
    changes = list(inp.round.changes or [])
    position = next((i for i, change in enumerate(changes) if change.index == inp.entry_index), None)
    if position is None:  # no changes at all, or none for the call's entry
        return None
    entry = changes[position].output
    if not isinstance(entry, ToolOutput) or entry.id != inp.call.id:
        return None
    changes[position] = OutputChange(index=inp.entry_index, output=entry.model_copy(
        update={"result": outcome.result, "finished_at": datetime.now(UTC)}))
    count = inp.round.output_count
    for side_output in outcome.side_outputs:
        if not isinstance(side_output, ScheduledPrompt):
            changes.append(OutputChange(index=count, output=side_output))
            count += 1
    prompt = inp.round.prompt
    if outcome.state_changed and inp.call.plugin:
        prompt = prompt.model_copy(update={"plugin_state": {**prompt.plugin_state,
                                                            inp.call.plugin: outcome.plugin_state}})
    return inp.round.model_copy(update={"changes": changes, "output_count": count, "prompt": prompt})


def _checkpoint(details: Any) -> ToolInvocationResult | None:
    """The tool result an earlier attempt checkpointed, if any."""
    for detail in details or ():
        if isinstance(detail, dict) and CHECKPOINT_KEY in detail:
            return ToolInvocationResult.model_validate_json(detail[CHECKPOINT_KEY])
    return None
