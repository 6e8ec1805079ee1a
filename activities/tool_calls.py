"""The tool activities: run one tool call (its plugins' hooks, heartbeats and progress, retries, a result the
model can read), and check an approver's corrected arguments against the tool's approval policy."""

from __future__ import annotations

import json
import time
from typing import Any

import pydantic_core
from pydantic import BaseModel, JsonValue
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent.activities import telemetry
from durable_agent.activities.heartbeats import LiveDetails, bound_log, heartbeating
from durable_agent.activities.mcp_tools import MCPUnavailable
from durable_agent.activities.planning import approval_request
from durable_agent.activities.runtime import RuntimeActivities
from durable_agent.agent.context import ToolContext, copy_state
from durable_agent.agent.errors import ToolInputError
from durable_agent.agent.models import PromptRef, ToolError, ToolSuccess
from durable_agent.agent.plugins import ToolCallInfo
from durable_agent.agent.tools import Tool, ToolFailed
from durable_agent.workflows import names
from durable_agent.workflows.names import CHECK_CORRECTION_ACTIVITY, INVOKE_TOOL_ACTIVITY
from durable_agent.workflows.protocol import (
    CorrectionCheck,
    CorrectionVerdict,
    ToolInvocation,
    ToolInvocationResult,
    ToolProgress,
)


class ToolActivities(RuntimeActivities):
    """`dagent.invoke_tool` and `dagent.check_correction`."""

    @activity.defn(name=INVOKE_TOOL_ACTIVITY)
    async def invoke_tool(self, call: ToolInvocation) -> ToolInvocationResult:
        prompt_id = call.prompt_id
        logger = bound_log(prompt_id=prompt_id, tool=call.tool, tool_call_id=call.id)
        try:
            tool = await self.runtime.find_tool(call.plugin, call.tool)
        except MCPUnavailable as exc:
            if activity.info().attempt < call.max_attempts:
                raise ApplicationError(str(exc), type=names.MCP_UNAVAILABLE_ERROR) from exc
            logger.warning("mcp server unavailable", error=str(exc))
            return _error(str(exc))
        if tool is None:
            logger.warning("tool not in this worker's registry")
            return _error(f"Tool '{call.tool}' is not available on this worker: its plugin "
                          f"{call.plugin or '(none)'} does not list it in Plugin.tools, and this worker has not "
                          "seen it offered by the plugin's prepare.")
        info_for_hooks = ToolCallInfo(prompt_id=prompt_id, user_id=call.user_id,
                                      conversation_id=call.conversation_id, tool_call_id=call.id, tool=call.tool,
                                      input=call.input)
        for plugin in self.runtime.plugins:
            decided = await plugin.before_tool(info_for_hooks)
            if isinstance(decided, ToolCallInfo):
                info_for_hooks = decided
            elif decided is not None:
                result = await self._after_tool(info_for_hooks, decided)
                self.transcripts.outputs.remember(result)
                return ToolInvocationResult(result=result)
        with telemetry.tool_call(call.tool, call.id, prompt_id) as span:
            live, started = LiveDetails(), time.monotonic()
            outcome = await self._run_tool(tool, call, prompt_id, info_for_hooks.input, logger, live)
            self.runtime.fast_tools.observe(tool, time.monotonic() - started, reported_progress=live.value is not None)
            outcome.result = await self._after_tool(info_for_hooks, outcome.result)
            error = outcome.result.error if isinstance(outcome.result, ToolError) else None
            telemetry.tool_outcome(span, "success" if error is None else "error", error)
        self.transcripts.outputs.remember(outcome.result)  # the next model round receives it by reference
        return outcome

    async def _after_tool(self, call: ToolCallInfo, result: ToolSuccess | ToolError) -> ToolSuccess | ToolError:
        for plugin in self.runtime.plugins:
            result = await plugin.after_tool(call, result) or result
        return result

    async def _run_tool(self, tool: Tool[Any], call: ToolInvocation, prompt_id: str, arguments: JsonValue,
                        logger: Any, live: LiveDetails) -> ToolInvocationResult:
        try:
            args = tool.validate_input(arguments)
        except ToolInputError as exc:
            return _error(str(exc))
        state_before = copy_state(call.plugin_state)
        info = activity.info()
        ctx = ToolContext(
            prompt=PromptRef(prompt_id=call.prompt_id, user_id=call.user_id, conversation_id=call.conversation_id),
            tool_call_id=call.id, idempotency_key=_idempotency_key(call, info),
            state=copy_state(call.plugin_state), services=self.runtime.services,
            file_store=self.runtime.file_store.scoped(info.workflow_namespace, prompt_id), attempt=info.attempt,
            progress=lambda message, fraction: live.set(ToolProgress(
                tool_call_id=call.id, tool=call.tool, message=message, fraction=fraction)),
            is_cancelled=activity.is_cancelled, conversation_schedule=list(call.conversation_schedule),
        )
        try:
            async with heartbeating(live, self.runtime.live_every):
                raw_output = await tool.fn(args, ctx)
        except ToolFailed as exc:
            logger.info("tool reported an error", error=str(exc)[:200])
            return _error(str(exc), side_outputs=ctx)
        except Exception as exc:
            if info.attempt < tool.options.max_attempts:
                logger.warning("tool raised, will retry", error=f"{type(exc).__name__}: {exc}")
                raise ApplicationError(f"{type(exc).__name__}: {exc}", type=names.TOOL_RAISED_ERROR) from exc
            logger.warning("tool raised", error=f"{type(exc).__name__}: {exc}")
            return _error(f"{type(exc).__name__}: {exc}", side_outputs=ctx)
        try:
            output = _jsonable(raw_output, self.runtime.max_tool_output_bytes)
        except ValueError as exc:
            return _error(str(exc), side_outputs=ctx)
        logger.debug("tool finished")
        changed = ctx.state != state_before
        return ToolInvocationResult(result=ToolSuccess(output=output), side_outputs=list(ctx.side_outputs),
                                    plugin_state=ctx.state if changed else None, state_changed=changed)

    @activity.defn(name=CHECK_CORRECTION_ACTIVITY)
    async def check_correction(self, check: CorrectionCheck) -> CorrectionVerdict:
        """The tool's approval policy run again on arguments an approver corrected: what approval they need.
        The workflow holds no tool code, so it asks here before it takes an approval with a correction."""
        logger = bound_log(tool=check.tool)
        try:
            tool = await self.runtime.find_tool(check.plugin, check.tool)
        except MCPUnavailable as exc:
            raise ApplicationError(str(exc), type=names.MCP_UNAVAILABLE_ERROR) from exc
        if tool is None:
            return CorrectionVerdict(problem=f"tool '{check.tool}' is not available on this worker, so its "
                                             "approval policy cannot check the correction")
        try:
            args = tool.validate_input(check.input)
        except ToolInputError as exc:
            return CorrectionVerdict(problem=str(exc))
        try:
            approval = tool.approval_for(args)
        except Exception as exc:  # fail closed: a correction the policy cannot judge is not approved
            logger.warning("approval policy raised on a correction", error=f"{type(exc).__name__}: {exc}")
            return CorrectionVerdict(problem=f"the approval policy of '{tool.id}' raised {type(exc).__name__} "
                                             "on the corrected arguments")
        if approval is None:
            return CorrectionVerdict()
        return CorrectionVerdict(requirement=approval_request(approval, self.runtime.decision_key,
                                                               self.runtime.four_eyes, self.runtime.notify))


def _error(message: str, side_outputs: ToolContext | None = None) -> ToolInvocationResult:
    extra = list(side_outputs.side_outputs) if side_outputs else []
    return ToolInvocationResult(result=ToolError(error=message), side_outputs=extra)


def _jsonable(value: object, limit: int) -> JsonValue:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        plain = pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError as exc:
        raise ValueError(f"The tool returned a value that is not JSON-serialisable: {exc}") from exc
    encoded = json.dumps(plain, ensure_ascii=False)
    if len(encoded.encode()) <= limit:
        return plain
    kept = encoded.encode()[:limit].decode(errors="ignore")
    return f"{kept}\n[output truncated: {len(encoded.encode())} bytes, limit {limit}]"


def _idempotency_key(call: ToolInvocation, info: activity.Info) -> str:
    """Stable across retries and worker crashes; scoped by run: a later prompt that reuses the workflow id never
    gets the key of an earlier run's call."""
    return f"{info.workflow_id}/{info.workflow_run_id}/{call.id}"

